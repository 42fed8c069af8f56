// ladder/mla/flash.hpp -- stage 03 rung flash_mla: A_CC_ME fused with a tiled online softmax over the
// paged compressed cache, split over L and merged by log-sum-exp (FlashMLA-style decoding).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <- flash_mla in this file
//
// The notes' "后续优化" (next step): with absorption, MLA is MQA with K = V -- all H heads read the same
// cache rows [c^KV | k^R] (576 dims), and V is the first kv_lora = 512 dims of K (FlashMLA's decode
// kernel in deepseek-ai/FlashMLA). So one pass over the cache suffices, as in FlashAttention (notes
// §3.6-3.7), with the scores never stored. Per sequence b:
//   Q = [q_abs | q^R] [H, 576] (the only concatenation left: one row per head per query, not per token);
//   the L_b tokens are cut into splits of split_blocks pages; each split walks its pages (tile = one
//   page of <= 64 rows, a whole number of tokens, never past L_b) with the online softmax per head:
//     S = scale Q tile^T [H, n];  m' = max(m, max_k S_k);  P = e^{S - m'};
//     l = l e^{m - m'} + sum_k P_k;  o = o e^{m - m'} + P tile[:, :512];  m = m'
//   and ends with o_s = o / l, lse_s = m + log l.
//   Split-KV combine (FlashMLA's second kernel): lse = log sum_s e^{lse_s}, o^lat = sum_s e^{lse_s - lse} o_s.
// Then the absorbed output path (W_UV, W_O) as A_CC_ME. Splits let a GPU fill its SMs when B * H/64 is
// small; on the CPU they are the parallel tasks. The result does not depend on the split size beyond
// rounding (tests check several).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ladder/mla/absorbed.hpp"

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

// One split: tokens [j0, j1) of sequence b, j0 a multiple of the page size. Q [H, kv_dim].
// Writes the split's normalised o_s [H, kv_lora] and lse_s [H].
template <class T>
void flash_split(const Config& c, const ConstMatMap<T>& Q, const PagedCache<T>& cache, int64_t b, int64_t j0,
                 int64_t j1, T* o_s, T* lse_s) {
  const int64_t H = c.n_heads, R = c.kv_lora_rank, D = c.kv_dim();
  const T scale = static_cast<T>(c.scale()), ninf = -std::numeric_limits<T>::infinity();
  std::vector<T> m(static_cast<size_t>(H), ninf), l(static_cast<size_t>(H), T(0));
  Mat<T> o = Mat<T>::Zero(H, R), S(H, cache.block_size);
  for (int64_t j = j0; j < j1; j += cache.block_size) {
    const int64_t n = std::min(cache.block_size, j1 - j);
    const ConstMatMap<T> tile(cache.row(b, j), n, D);  // rows j .. j+n-1 are consecutive in one page
    auto Sn = S.leftCols(n);
    gemm_nt<T>(Q, tile, Sn);
    for (int64_t h = 0; h < H; ++h) {
      T m_new = m[h];
      for (int64_t k = 0; k < n; ++k) m_new = std::max(m_new, scale * Sn(h, k));
      const T alpha = std::exp(m[h] - m_new);  // e^{m - m'}; m = -inf on the first tile gives 0
      T sum = 0;
      for (int64_t k = 0; k < n; ++k) sum += (Sn(h, k) = std::exp(scale * Sn(h, k) - m_new));
      l[h] = l[h] * alpha + sum;
      o.row(h) *= alpha;
      m[h] = m_new;
    }
    gemm_nn<T>(Sn, tile.leftCols(R), o, true);  // o += P V, V = the first kv_lora dims of the tile
  }
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t r = 0; r < R; ++r) o_s[h * R + r] = o(h, r) / l[h];
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
Output<T> decode_flash(const Weights<T>& W, const Prepared<T>& p, const Step<T>& step, const FlashParams& fp) {
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
  std::vector<T> o_parts(static_cast<size_t>(tasks * H * R)), lse_parts(static_cast<size_t>(tasks * H));
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t b = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1;
    const int64_t j0 = (t - first[b]) * fp.split_blocks * bs;
    const int64_t j1 = std::min(p.seqlens[b], j0 + fp.split_blocks * bs);
    flash_split(c, ConstMatMap<T>(Q.row(b).data(), H, D), p.paged, b, j0, j1, &o_parts[t * H * R], &lse_parts[t * H]);
  }
  Output<T> out = make_output<T>(c, p.seqlens, p.max_len(), false);
  out.lse = Array<T>({B, H});
  Mat<T> o_lat(B, H * R);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < B; ++b)
    flash_combine(first[b + 1] - first[b], H, R, &o_parts[first[b] * H * R], &lse_parts[first[b] * H],
                  o_lat.row(b).data(), &out.lse.data[b * H]);
  absorbed_output(W, o_lat, out);
  return out;
}

}  // namespace ladder::mla
