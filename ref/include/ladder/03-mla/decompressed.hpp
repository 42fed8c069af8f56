// ladder/03-mla/decompressed.hpp -- stage 03 rungs CD and CC: attention over the decompressed K and V.
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <- CD and CC in this file
//
// CD (CacheDecompressed, the MLA notes' "KV Caching"): the cache holds K [B, H, L, nope + rope] (k^R
// replicated per head) and V [B, H, L, v], decompressed once at prefill; the step is standard
// multi-head attention, per head
//   s_j = scale * [q^C_h | q^R_h] . K[b, h, j],   a = softmax(s),   o_h = sum_j a_j V[b, h, j],
// then u = W_O [o_1; ...; o_H]. 81,920 bytes of bf16 cache per token per layer at DeepSeek-V2 shapes,
// but only 2 FLOPs per cached element: memory-bound on every machine.
// CD at T = double is the stage's oracle.
//
// CC (CacheCompressed): the cache holds only [c^KV | k^R] (1,152 bytes bf16 per token); every step
// decompresses all L cached tokens through kv_b (2 * 512 * 32768 FLOPs per token) and then runs CD's
// attention: 400x the FLOPs of CD per token, the "CacheCompressed还需进一步优化" of the notes.
#pragma once
#include <cstdint>

#include "ladder/03-mla/step.hpp"

namespace ladder::mla {

// CD's prepare: the decompressed cache, built once from the paged compressed cache.
template <class T>
Prepared<T> prepare_cd(const Weights<T>& W, const PagedCache<T>& cache) {
  check_paged(cache, W.cfg, "CD");
  Prepared<T> p;
  p.seqlens = cache.seqlens;
  decompress(W, gather(cache), p.seqlens, p.K, p.V);
  return p;
}

// The attention of CD over K, V [B, H, Lmax, *] for queries q^C [B, H * nope], q^R [B, H * rope];
// writes out.scores, out.attn and returns o [B, H * v]. OpenMP over (b, h): each pair is one GEMV for
// the scores and one for o, computed by the same serial code whatever the thread count.
template <class T>
Mat<T> attend_decompressed(const Config& c, const Mat<T>& q_nope, const Mat<T>& q_pe, const Array<T>& K,
                           const Array<T>& V, const std::vector<int64_t>& seqlens, Output<T>& out) {
  const int64_t B = static_cast<int64_t>(seqlens.size()), H = c.n_heads, Lmax = K.shape[2], dk = c.q_head();
  const T scale = static_cast<T>(c.scale());
  Mat<T> o(B, H * c.v_head);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t L = seqlens[b];
      Mat<T> q(1, dk);  // query_states = [q^C_h | q^R_h] (the concatenation of DeepSeek's code)
      q.leftCols(c.qk_nope) = q_nope.block(b, h * c.qk_nope, 1, c.qk_nope);
      q.rightCols(c.qk_rope) = q_pe.block(b, h * c.qk_rope, 1, c.qk_rope);
      const ConstMatMap<T> Kbh(&K.data[(b * H + h) * Lmax * dk], L, dk);
      const ConstMatMap<T> Vbh(&V.data[(b * H + h) * Lmax * c.v_head], L, c.v_head);
      T* s = &out.scores.data[(b * H + h) * Lmax];
      T* a = &out.attn.data[(b * H + h) * Lmax];
      MatMap<T> srow(s, 1, L);
      gemm_nt<T>(q, Kbh, srow);
      scale_and_softmax(s, a, L, scale);
      gemm_nn<T>(ConstMatMap<T>(a, 1, L), Vbh, o.block(b, h * c.v_head, 1, c.v_head));
    }
  }
  return o;
}

template <class T>
void decode_cd_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  check_step(W, p, step, "CD");
  const Mat<T> cQ = query_latent(W, step.h);
  const Mat<T> q_nope = query_nope(W, cQ), q_pe = query_rope(W, cQ, step.q_pos);
  reset_output<T>(out, W.cfg, p.seqlens, p.max_len(), true);
  output_projection(W, attend_decompressed(W.cfg, q_nope, q_pe, p.K, p.V, p.seqlens, out), out.u);
}
template <class T>
Output<T> decode_cd(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step) {
  Output<T> out;
  decode_cd_into(W, p, step, out);
  return out;
}

// CC keeps the compressed cache; its step decompresses it (scratch K, V) and runs CD's attention.
template <class T>
Prepared<T> prepare_compressed(const Weights<T>& W, const PagedCache<T>& cache) {
  check_paged(cache, W.cfg, "prepare");
  Prepared<T> p;
  p.seqlens = cache.seqlens;
  p.kv = gather(cache);
  return p;
}

template <class T>
void decode_cc_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, Output<T>& out) {
  check_step(W, p, step, "CC");
  const Mat<T> cQ = query_latent(W, step.h);
  const Mat<T> q_nope = query_nope(W, cQ), q_pe = query_rope(W, cQ, step.q_pos);
  Array<T> K, V;
  decompress(W, p.kv, p.seqlens, K, V);  // every cached token, every step
  reset_output<T>(out, W.cfg, p.seqlens, p.max_len(), true);
  output_projection(W, attend_decompressed(W.cfg, q_nope, q_pe, K, V, p.seqlens, out), out.u);
}
template <class T>
Output<T> decode_cc(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step) {
  Output<T> out;
  decode_cc_into(W, p, step, out);
  return out;
}

}  // namespace ladder::mla
