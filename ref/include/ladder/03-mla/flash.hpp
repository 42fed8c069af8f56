// ladder/03-mla/flash.hpp -- stage 03 rung flash_mla: A_CC_ME fused with a tiled online softmax over the
// paged compressed cache, split over L and merged by log-sum-exp (FlashMLA-style decoding).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <- flash_mla in this file
//
// The notes' "后续优化" (next step): with absorption, MLA is MQA with K = V -- all H heads read the same
// cache rows [c^KV | k^R] (576 dims), and V is the first kv_lora = 512 dims of K (FlashMLA's decode
// kernel in deepseek-ai/FlashMLA). So one pass over the cache suffices, as in FlashAttention (notes
// §3.6-3.7), with the scores never stored. Per sequence b:
//   Q = [q_abs | q^R] [H, 576] (the only concatenation left: one row per head per query, not per token);
//   the L_b tokens are cut into splits of split_blocks pages; each split walks its tokens in tiles of
//   kFlashTileRows logical rows from the split's start (the last one shorter; never past L_b) with the
//   online softmax per head:
//     S = scale Q tile^T [H, n];  m' = max(m, max_k S_k);  P = e^{S - m'};
//     l = l e^{m - m'} + sum_k P_k;  o = o e^{m - m'} + P tile[:, :512];  m = m'
//   and ends with o_s = o / l, lse_s = m + log l.
//   Split-KV combine (FlashMLA's second kernel): lse = log sum_s e^{lse_s}, o^lat = sum_s e^{lse_s - lse} o_s.
// Then the absorbed output path (W_UV, W_O) as A_CC_ME. Splits let a GPU fill its SMs when B * H/64 is
// small; on the CPU they are the parallel tasks. The result does not depend on the split size beyond
// rounding (tests check several).
// The bits of the result are a function of the logical sequence (the tokens' rows in order), the split
// length (split_blocks * block_size) and kFlashTileRows only -- never of where the blocks sit in the
// pool: a tile's rows are read in place when its pages lie back to back and gathered into a scratch
// copy otherwise, the same values at the same row stride either way (a KV migration lays the blocks
// out anew on the decode rank; tests/03-mla/test_mla_placement.cpp checks contiguous vs shuffled pools).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "ladder/03-mla/absorbed.hpp"
#include "ladder/01-softmax/softmax_vec.hpp"

namespace ladder::mla {

struct FlashParams {
  int64_t split_blocks = 4;  // pages (of block_size tokens) per split-KV chunk
};

inline int64_t num_splits(int64_t L, int64_t block_size, const FlashParams& fp) {
  return (blocks_for(L, block_size) + fp.split_blocks - 1) / fp.split_blocks;
}

template <class T>
Prepared<T> prepare_flash(const Weights<T>& W, const PagedCache<T>& cache) {
  check_paged(cache, W.cfg, "flash_mla");
  Prepared<T> p;
  p.seqlens = cache.seqlens;
  p.paged = cache;
  return p;
}

// Rows per tile of a split: a fixed count of LOGICAL tokens, not a run of pages that happen to lie
// back to back (a run's length is a property of the pool layout, and the tile length fixes where the
// online softmax rescales and how each product blocks its sum over tokens). One page (64 rows) per
// product left Eigen re-packing q [H, 576] for every 64 tokens; 256 rows (a whole default split) packs
// it once per split.
inline constexpr int64_t kFlashTileRows = 256;

// Rows j .. j+n-1 of sequence b as an [n, kv_dim] row-major matrix: the pool's own rows when their
// pages lie back to back there, else a copy gathered page by page into `scratch`. The products read
// both the same way (same values, same row stride; Eigen packs its operands), so the bits do not
// depend on which one a tile got.
template <class T>
const T* tile_rows(const PagedCache<T>& cache, int64_t b, int64_t j, int64_t n, std::vector<T>& scratch) {
  const int64_t bs = cache.block_size, D = cache.kv_dim();
  const T* first = cache.row(b, j);
  bool in_place = true;
  for (int64_t k = bs - j % bs; k < n && in_place; k += bs) in_place = cache.row(b, j + k) == first + k * D;
  if (in_place) return first;
  scratch.resize(static_cast<size_t>(n * D));
  for (int64_t k = 0, run = 0; k < n; k += run) {
    run = std::min(bs - (j + k) % bs, n - k);  // the rest of the page holding token j + k
    std::copy(cache.row(b, j + k), cache.row(b, j + k) + run * D, scratch.data() + k * D);
  }
  return scratch.data();
}

// The online-softmax step of one tile for head row s [n] (the scores, overwritten by P):
//   m' = max(m, max_k scale s_k);  P = e^{scale s - m'};  l = l e^{m - m'} + sum_k P_k;  returns e^{m - m'}.
// float: stage 01's packet code (softmax_vec.hpp: Eigen's packet exp, whole packets from the row start,
// so the bits do not depend on where a thread's scratch lies in memory, as an Eigen expression's
// scalar head peeling would); float64: std::exp, a sum in index order.
template <class T>
T online_tile_row(T* s, int64_t n, T scale, T& m, T& l) {
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t k = 0; k < n; ++k) mx = std::max(mx, s[k]);
  const T m_new = std::max(m, scale * mx);  // scale > 0: max_k scale s_k = scale max_k s_k exactly
  const T alpha = std::exp(m - m_new);      // m = -inf on the first tile gives 0
  T sum = 0;
  if constexpr (std::is_same_v<T, float>) {
    namespace ei = Eigen::internal;
    using P = softmax::vec::Packet<T>;
    const P ps = ei::pset1<P>(scale), pm = ei::pset1<P>(m_new);
    P acc = ei::pset1<P>(T(0));
    softmax::vec::for_packets(s, n, [&](const P& x, int64_t k, int64_t cnt) {
      const P e = softmax::vec::exp_shifted<T>(ei::pmul(x, ps), pm);  // the -inf padding gives 0
      acc = ei::padd(acc, e);
      alignas(64) T out[softmax::vec::kWidth<T>];
      ei::pstoreu(out, e);
      std::copy(out, out + cnt, s + k);
    });
    sum = ei::predux(acc);
  } else {
    for (int64_t k = 0; k < n; ++k) sum += (s[k] = std::exp(scale * s[k] - m_new));
  }
  l = l * alpha + sum;
  m = m_new;
  return alpha;
}

// One split: tokens [j0, j1) of sequence b, j0 a multiple of the page size. Q [H, kv_dim].
// Writes the split's normalised o_s [H, kv_lora] (accumulated in place) and lse_s [H].
template <class T>
void flash_split(const Config& c, const ConstMatMap<T>& Q, const PagedCache<T>& cache, int64_t b, int64_t j0,
                 int64_t j1, T* o_s, T* lse_s) {
  const int64_t H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim();
  const T scale = static_cast<T>(c.scale()), ninf = -std::numeric_limits<T>::infinity();
  std::vector<T> m(static_cast<size_t>(H), ninf), l(static_cast<size_t>(H), T(0));
  MatMap<T> o(o_s, H, R);
  o.setZero();
  thread_local std::vector<T> S, gathered;  // per thread: a split is one task
  S.resize(static_cast<size_t>(H * std::min(kFlashTileRows, j1 - j0)));
  for (int64_t j = j0, n = 0; j < j1; j += n) {
    n = std::min(kFlashTileRows, j1 - j);
    const ConstMatMap<T> tile(tile_rows(cache, b, j, n, gathered), n, D);  // rows j .. j+n-1
    MatMap<T> Sn(S.data(), H, n);
    gemm_nt<T>(Q, tile, Sn);
    for (int64_t h = 0; h < H; ++h) o.row(h) *= online_tile_row(&Sn(h, 0), n, scale, m[h], l[h]);  // o e^{m - m'}
    gemm_nn<T>(Sn, tile.leftCols(R), o, true);  // o += P V, V = the first kv_lora dims of the tile
  }
  for (int64_t h = 0; h < H; ++h) {
    o.row(h) /= l[h];
    lse_s[h] = m[h] + std::log(l[h]);
  }
}

// Merges the splits of one sequence: o_parts [S, H, kv_lora], lse_parts [S, H] -> o^lat row, lse row.
template <class T>
void flash_combine(int64_t splits, int64_t H, int64_t R, const T* o_parts, const T* lse_parts, T* o_lat, T* lse) {
  for (int64_t h = 0; h < H; ++h) {
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t s = 0; s < splits; ++s) mx = std::max(mx, lse_parts[s * H + h]);
    T sum = 0;
    for (int64_t s = 0; s < splits; ++s) sum += std::exp(lse_parts[s * H + h] - mx);
    lse[h] = mx + std::log(sum);
    for (int64_t r = 0; r < R; ++r) o_lat[h * R + r] = 0;
    for (int64_t s = 0; s < splits; ++s) {
      const T w = std::exp(lse_parts[s * H + h] - lse[h]);
      for (int64_t r = 0; r < R; ++r) o_lat[h * R + r] += w * o_parts[(s * H + h) * R + r];
    }
  }
}

template <class T>
void decode_flash_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, const FlashParams& fp,
                       Output<T>& out) {
  check_step(W, p, step, "flash_mla");
  require(fp.split_blocks >= 1, "mla flash_mla: split_blocks = {} violates split_blocks >= 1", fp.split_blocks);
  const Config& c = W.cfg;
  const int64_t B = p.batch(), H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim(), bs = p.paged.block_size;
  const Mat<T> cQ = query_latent(W, step.h);
  const Mat<T> q_abs = absorb_query(W, query_nope(W, cQ)), q_pe = query_rope(W, cQ, step.q_pos);
  Mat<T> Q(B, H * D);  // [q_abs_h | q^R_h] per head: FlashMLA's q (b, 1, h_q, 576)
  for (int64_t h = 0; h < H; ++h) {
    Q.middleCols(h * D, R) = q_abs.middleCols(h * R, R);
    Q.middleCols(h * D + R, c.qk_rope) = q_pe.middleCols(h * c.qk_rope, c.qk_rope);
  }
  // Tasks (b, split) in order; first[b] = index of sequence b's first task.
  std::vector<int64_t> first(static_cast<size_t>(B) + 1, 0);
  for (int64_t b = 0; b < B; ++b) first[b + 1] = first[b] + num_splits(p.seqlens[b], bs, fp);
  const int64_t tasks = first[B];
  // Not zero-filled here (each task writes its own part): a serial fill of B * splits * H * kv_lora
  // floats (134 MB at B = 32, L = 4096) would cost more than the combine. Kept in out between calls.
  T* const o_parts = out.scratch.get(tasks * H * R);
  std::vector<T> lse_parts(static_cast<size_t>(tasks * H));
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < tasks; ++t) {
    const WholeProducts whole;  // one task per split: its products in one piece each
    const int64_t b = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1;
    const int64_t j0 = (t - first[b]) * fp.split_blocks * bs;
    const int64_t j1 = std::min(p.seqlens[b], j0 + fp.split_blocks * bs);
    flash_split(c, ConstMatMap<T>(Q.row(b).data(), H, D), p.paged, b, j0, j1, &o_parts[t * H * R], &lse_parts[t * H]);
  }
  reset_output<T>(out, c, p.seqlens, p.max_len(), false);
  refill(out.lse, {B, H}, T(0));
  Mat<T> o_lat(B, H * R);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b)
    flash_combine(first[b + 1] - first[b], H, R, &o_parts[first[b] * H * R], &lse_parts[first[b] * H],
                  o_lat.row(b).data(), &out.lse.data[b * H]);
  absorbed_output(W, o_lat, out);
}

template <class T>
Output<T> decode_flash(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, const FlashParams& fp) {
  Output<T> out;
  decode_flash_into(W, p, step, fp, out);
  return out;
}

}  // namespace ladder::mla
