// ladder/03-mla/absorbed.hpp -- stage 03 rungs A_CC, A_CC_ME and AM: attention in the latent space.
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <- A_CC, A_CC_ME, AM in this file
//
// Projection absorption (the MLA notes' "Projection Absorption"): by associativity
//   q^C_h . k^C_{j,h} = q^C_h . (W_UK(h) c_j) = (q^C_h W_UK(h)) . c_j = q_abs_h . c_j,
// so W_UK moves from every cached token onto the one query (q_abs_h: kv_lora = 512 dims per head), and
//   u = W_O [W_UV(h) (sum_j a_j c_j)]_h            (the notes' einsums (4), (5), (6)),
// so W_UV moves from every token onto the latent output o^lat_h = sum_j a_j c_j. The cache is read as
// it is stored, [c^KV | k^R]; FLOPs per cached token fall from 33.6 M (CC) to 2 H (512 + 64) +
// 2 H 512 = 0.28 M, now from one cache row shared by all H heads -- 2 H FLOPs per cached element.
//
// A_CC: as the notes' Absorbed_CacheCompressed, key_states = [c^KV | k^R] is materialised per head
//   ([B, H, L, 576] of copies, the memory that made it run out on the A100) and the scores are one
//   product per head.
// A_CC_ME ("move elision"): no concatenation; s = q^R k^R^T + q_abs c^KV^T as two products over all
//   heads at once, reading the cache in place.
// AM (AM_CC_ME in the notes' code): W_UK and W_UV are multiplied into W_UQ and W_O ahead of time
//   (W_absQ_h = W_UK(h)^T W_UQ_h: [512, 1536] per head; W_absO_h = W_O[:, h] W_UV(h): [5120, 512] per
//   head), then A_CC_ME's attention. The products are low-rank (<= 128) but stored dense: 3.4x the
//   per-query FLOPs of A_CC_ME (201 + 671 vs 67 + 185 MFLOP), a loss until L is large.
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>

#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes
#include "ladder/03-mla/decompressed.hpp"
#include "ladder/03-mla/step.hpp"
#include "ladder/01-softmax/softmax_vec.hpp"

namespace ladder::mla {

// scale_and_softmax (step.hpp) with stage 01's vectorised safe rung at float (softmax_vec.hpp: the
// exps on every SIMD lane) for the latent rungs, whose softmax covers H rows of L per sequence (scalar
// libm exps, two per score, were a tenth of A_CC_ME's time at B = 32, L = 4096). CD and CC keep the
// scalar rung: float CD is the tolerance rule's same-precision baseline. float64 stays scalar.
template <class T>
void scale_and_softmax_vec(T* s, T* a, int64_t L, T scale) {
  for (int64_t j = 0; j < L; ++j) s[j] *= scale;
  if constexpr (std::is_same_v<T, float>) {
    softmax::safe_vec_row(s, a, L);
  } else {
    softmax::safe_row(s, a, L);
  }
}

// The latent attention of one sequence with the cache read in place (A_CC_ME, AM):
//   S [H, L] = q_abs_b [H, kv_lora] c^KV^T + q^R_b [H, rope] k^R^T,  a = softmax(scale S),
//   o^lat_b [H, kv_lora] = a c^KV.
// Writes out.scores, out.attn and row b of o_lat [B, H * kv_lora].
template <class T>
LADDER_LAB_ENTRY void attend_latent_me(const Config& c, const Mat<T>& q_abs, const Mat<T>& q_pe, const Array<T>& kv,
                                       int64_t b, int64_t L, Output<T>& out, Mat<T>& o_lat) {
  const int64_t H = c.n_heads, Lmax = kv.shape[1], D = c.kv_dim(), R = c.kv_lora_rank;
  const ConstMatMap<T> rows(&kv.data[b * Lmax * D], L, D);  // [c^KV | k^R] per token
  const ConstMatMap<T> qa(q_abs.row(b).data(), H, R), qr(q_pe.row(b).data(), H, c.qk_rope);
  // S [H, L] is computed in place in out.scores (rows of Lmax; entries j >= L stay -inf)
  Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>> S(&out.scores.data[b * H * Lmax], H, L, Eigen::OuterStride<>(Lmax));
  // lab:todo(scores_me) S = q_abs c^KV^T + q^R k^R^T: two gemm_nt on the cache rows in place, no concatenation
  gemm_nt<T>(qa, rows.leftCols(R), S);
  gemm_nt<T>(qr, rows.rightCols(c.qk_rope), S, true);
  // lab:end
#pragma omp parallel for schedule(static)  // B = 1: rows shared out; inside decode's region: this thread
  for (int64_t h = 0; h < H; ++h) {
    T* s = &out.scores.data[(b * H + h) * Lmax];
    scale_and_softmax_vec(s, &out.attn.data[(b * H + h) * Lmax], L, static_cast<T>(c.scale()));
  }
  const Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>> A(&out.attn.data[b * H * Lmax], H, L,
                                                            Eigen::OuterStride<>(Lmax));
  MatMap<T> ob(o_lat.row(b).data(), H, R);
  // lab:todo(latent_output) o^lat_b = a c^KV: the weights A [H, L] times the c^KV columns of the rows, into ob
  gemm_nn<T>(A, rows.leftCols(R), ob);
  // lab:end
}

// The absorbed output path shared by A_CC, A_CC_ME: o = W_UV o^lat per head, u = W_O o.
template <class T>
LADDER_LAB_ENTRY void absorbed_output(const Weights<T>& W, const Mat<T>& o_lat, Output<T>& out) {
  // lab:todo(absorbed_output) u = W_O o with o = absorb_output(W, o_lat) (step.hpp), into out.u
  output_projection(W, absorb_output(W, o_lat), out.u);
  // lab:end
}

template <class T>
void decode_acc_me_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  check_step(W, p, step, "A_CC_ME");
  const Config& c = W.cfg;
  const Mat<T> cQ = query_latent(W, step.h);
  const Mat<T> q_abs = absorb_query(W, query_nope(W, cQ)), q_pe = query_rope(W, cQ, step.q_pos);
  reset_output<T>(out, c, p.seqlens, p.max_len(), true);
  Mat<T> o_lat(p.batch(), c.n_heads * c.kv_lora_rank);
#pragma omp parallel for schedule(dynamic) if (p.batch() > 1)  // B = 1: the products share out instead
  for (int64_t b = 0; b < p.batch(); ++b) {
    const WholeProducts whole(p.batch() > 1);  // one task per sequence: its products in one piece each
    attend_latent_me(c, q_abs, q_pe, p.kv, b, p.seqlens[b], out, o_lat);
  }
  absorbed_output(W, o_lat, out);
}
template <class T>
Output<T> decode_acc_me(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step) {
  Output<T> out;
  decode_acc_me_into(W, p, step, out);
  return out;
}

// A_CC: query_states [H, kv_lora + rope] = [q_abs | q^R] and key_states [B, H, L, kv_lora + rope]
// materialised (a copy of the cache per head), then one product per (b, h).
template <class T>
void decode_acc_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  check_step(W, p, step, "A_CC");
  const Config& c = W.cfg;
  const int64_t B = p.batch(), H = c.n_heads, Lmax = p.max_len(), D = c.kv_dim(), R = c.kv_lora_rank;
  const Mat<T> cQ = query_latent(W, step.h);
  const Mat<T> q_abs = absorb_query(W, query_nope(W, cQ)), q_pe = query_rope(W, cQ, step.q_pos);
  reset_output<T>(out, c, p.seqlens, Lmax, true);
  Mat<T> o_lat(B, H * R);
  Array<T> key_states({B, H, Lmax, D}, T(0));
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t L = p.seqlens[b];
      T* ks = &key_states.data[(b * H + h) * Lmax * D];
      std::copy(&p.kv.data[b * Lmax * D], &p.kv.data[(b * Lmax + L) * D], ks);  // the materialised copy
      Mat<T> q(1, D);
      q.leftCols(R) = q_abs.block(b, h * R, 1, R);
      q.rightCols(c.qk_rope) = q_pe.block(b, h * c.qk_rope, 1, c.qk_rope);
      T* s = &out.scores.data[(b * H + h) * Lmax];
      T* a = &out.attn.data[(b * H + h) * Lmax];
      MatMap<T> srow(s, 1, L);
      gemm_nt<T>(q, ConstMatMap<T>(ks, L, D), srow);
      scale_and_softmax(s, a, L, static_cast<T>(c.scale()));
      const ConstMatMap<T> rows(ks, L, D);
      gemm_nn<T>(ConstMatMap<T>(a, 1, L), rows.leftCols(R), o_lat.block(b, h * R, 1, R));
    }
  }
  absorbed_output(W, o_lat, out);
}
template <class T>
Output<T> decode_acc(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step) {
  Output<T> out;
  decode_acc_into(W, p, step, out);
  return out;
}

// AM's absorbed matrices, computed once per model.
template <class T>
std::shared_ptr<const Absorbed<T>> absorb_weights(const Weights<T>& W) {
  const Config& c = W.cfg;
  const int64_t H = c.n_heads, R = c.kv_lora_rank;
  auto a = std::make_shared<Absorbed<T>>();
  a->W_absQ = Mat<T>(H * R, c.q_lora_rank);
  a->W_absO = Mat<T>(c.hidden, H * R);
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < H; ++h) {
    // W_absQ_h = W_UK(h)^T W_UQ_h: [kv_lora, q_lora]
    gemm_nn<T>(W.W_UK(h).transpose(), W.W_UQ.middleRows(h * c.qk_nope, c.qk_nope), a->W_absQ.middleRows(h * R, R));
    // W_absO_h = W_O[:, h*v : (h+1)*v] W_UV(h): [hidden, kv_lora]
    gemm_nn<T>(W.W_O.middleCols(h * c.v_head, c.v_head), W.W_UV(h), a->W_absO.middleCols(h * R, R));
  }
  return a;
}

// AM's prepare: the compressed cache plus the absorbed matrices.
template <class T>
Prepared<T> prepare_am(const Weights<T>& W, const PagedCache<T>& cache) {
  Prepared<T> p = prepare_compressed(W, cache);
  p.absorbed = absorb_weights(W);
  return p;
}

template <class T>
void decode_am_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  check_step(W, p, step, "AM");
  const Config& c = W.cfg;
  require(p.absorbed != nullptr, "mla AM: prepared.absorbed is null (run prepare_am or absorb_weights)");
  const Absorbed<T>& a = *p.absorbed;
  require(a.W_absQ.rows() == c.n_heads * c.kv_lora_rank && a.W_absQ.cols() == c.q_lora_rank &&
              a.W_absO.rows() == c.hidden && a.W_absO.cols() == c.n_heads * c.kv_lora_rank,
          "mla AM: absorbed W_absQ is [{}, {}] and W_absO [{}, {}], violate [H * kv_lora, q_lora] and "
          "[hidden, H * kv_lora]",
          a.W_absQ.rows(), a.W_absQ.cols(), a.W_absO.rows(), a.W_absO.cols());
  const Mat<T> cQ = query_latent(W, step.h);
  Mat<T> q_abs(p.batch(), c.n_heads * c.kv_lora_rank);
  gemm_nt<T>(cQ, a.W_absQ, q_abs);  // q_abs = W_absQ c^Q, no q^C
  const Mat<T> q_pe = query_rope(W, cQ, step.q_pos);
  reset_output<T>(out, c, p.seqlens, p.max_len(), true);
  Mat<T> o_lat(p.batch(), c.n_heads * c.kv_lora_rank);
#pragma omp parallel for schedule(dynamic) if (p.batch() > 1)  // B = 1: the products share out instead
  for (int64_t b = 0; b < p.batch(); ++b) {
    const WholeProducts whole(p.batch() > 1);  // one task per sequence: its products in one piece each
    attend_latent_me(c, q_abs, q_pe, p.kv, b, p.seqlens[b], out, o_lat);
  }
  gemm_nt<T>(o_lat, a.W_absO, out.u);  // u = W_absO o^lat, no W_UV, W_O
}
template <class T>
Output<T> decode_am(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step) {
  Output<T> out;
  decode_am_into(W, p, step, out);
  return out;
}

}  // namespace ladder::mla
