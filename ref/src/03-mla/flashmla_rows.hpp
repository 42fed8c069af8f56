// ref/src/03-mla/flashmla_rows.hpp -- internal to the FlashMLA layouts (flashmla.cpp, flashmla_sparse.cpp): the
// attention of query tokens over lists of cache rows, one list per token. Dense decode lists rows 0 .. L-1 of a
// sequence through its block_table; sparse decode and sparse prefill list the rows their indices name, in index
// order, duplicates as often as they occur (FlashMLA gathers kv[indices]: README "Sparse MLA Prefill" and
// tests/ref.py, index_select then softmax over topk entries), invalid entries left out.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ladder/03-mla/flash.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::mla::flashmla_detail {

// The cache rows [rows, d]: `exact` as the oracle reads them (float32 inputs widened; an FP8 record dequantised
// as code x scale in double, exact: a 4-bit E4M3 significand times a 24-bit float32 one fits in 53 bits; bf16
// RoPE values exactly), `f32` as a float32 kernel reads them (an FP8 record: fl32(code x scale)).
struct Pool {
  int64_t rows = 0, d = 0;
  std::vector<double> exact;
  std::vector<float> f32;
  template <class T>
  const T* row(int64_t i) const {
    if constexpr (std::is_same_v<T, double>) return &exact[static_cast<size_t>(i * d)];
    else return &f32[static_cast<size_t>(i * d)];
  }
};

// N query tokens of H heads of q [N, H, D] (float32), attending over rows[n] of the pool; V = a row's first R dims.
struct Query {
  const float* q = nullptr;
  int64_t N = 0, H = 0, D = 0, R = 0;
  double scale = 0;
  std::vector<std::vector<int64_t>> rows;  // [N][listed rows]
};

template <class T>
struct Attn {
  Array<T> o, lse, mx;  // [N, H, R]; [N, H] natural-log lse; [N, H] the largest scaled score
};

// The oracle's form (stage 03's, mla.hpp): scaled scores over the listed rows, lse by logsumexp_rows, o = sum_j
// e^{s_j - lse} row_j[:R] in list order; at T = double the fp64 oracle, at T = float the float32 baseline.
template <class T>
Attn<T> attend_rows(const Query& qy, const Pool& pool) {
  const int64_t N = qy.N, H = qy.H, D = qy.D, R = qy.R;
  std::vector<int64_t> lens(static_cast<size_t>(N));
  int64_t Lmax = 1;
  for (int64_t n = 0; n < N; ++n) lens[n] = static_cast<int64_t>(qy.rows[n].size()), Lmax = std::max(Lmax, lens[n]);
  const T scale = static_cast<T>(qy.scale);
  Array<T> scores({N, H, Lmax});
  std::fill(scores.data.begin(), scores.data.end(), -std::numeric_limits<T>::infinity());
  Attn<T> a{Array<T>({N, H, R}), Array<T>({N, H}), Array<T>({N, H})};
  std::fill(a.mx.data.begin(), a.mx.data.end(), -std::numeric_limits<T>::infinity());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < lens[n]; ++j) {
      const T* row = pool.row<T>(qy.rows[n][j]);
      for (int64_t h = 0; h < H; ++h) {
        const float* q = &qy.q[(n * H + h) * D];
        T dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += static_cast<T>(q[k]) * row[k];
        scores.data[(n * H + h) * Lmax + j] = scale * dot;
        a.mx.data[n * H + h] = std::max(a.mx.data[n * H + h], scale * dot);
      }
    }
  a.lse = logsumexp_rows(scores, lens);
  std::fill(a.o.data.begin(), a.o.data.end(), T(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const T l = a.lse.data[n * H + h];
      T* out = &a.o.data[(n * H + h) * R];
      for (int64_t j = 0; j < lens[n]; ++j) {
        const T w = std::exp(scores.data[(n * H + h) * Lmax + j] - l);
        const T* row = pool.row<T>(qy.rows[n][j]);
        for (int64_t r = 0; r < R; ++r) out[r] += w * row[r];
      }
    }
  return a;
}

// A float32 candidate computed another way: stage 03's flash_mla rung (flash.hpp) per query token on its listed
// rows gathered into pages of 64, split-KV over split_blocks pages at a time, the splits merged by lse.
inline Attn<float> flash_rows(const Query& qy, const Pool& pool, int64_t split_blocks) {
  const int64_t N = qy.N, H = qy.H, D = qy.D, R = qy.R, bs = kBlockSize;
  Config cfg;
  cfg.n_heads = H, cfg.kv_lora_rank = R, cfg.qk_rope = D - R, cfg.qk_nope = R, cfg.softmax_scale = qy.scale;
  Attn<float> a{Array<float>({N, H, R}), Array<float>({N, H}), Array<float>({N, H})};
  const float scale = static_cast<float>(qy.scale);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t L = static_cast<int64_t>(qy.rows[n].size()), W = blocks_for(L, bs);
    PagedCache<float> c;
    c.blocks = Array<float>({W, bs, D});
    c.block_table = Array<int32_t>({1, W});
    for (int64_t p = 0; p < W; ++p) c.block_table.data[p] = static_cast<int32_t>(p);
    c.seqlens = {L};
    for (int64_t j = 0; j < L; ++j) std::copy_n(pool.row<float>(qy.rows[n][j]), D, &c.blocks.data[j * D]);
    const int64_t splits = (W + split_blocks - 1) / split_blocks;
    std::vector<float> o_parts(static_cast<size_t>(splits * H * R)), lse_parts(static_cast<size_t>(splits * H));
    const ConstMatMap<float> Q(&qy.q[n * H * D], H, D);
    for (int64_t s = 0; s < splits; ++s) {
      const int64_t j0 = s * split_blocks * bs, j1 = std::min(L, j0 + split_blocks * bs);
      flash_split(cfg, Q, c, 0, j0, j1, &o_parts[s * H * R], &lse_parts[s * H]);
    }
    flash_combine(splits, H, R, o_parts.data(), lse_parts.data(), &a.o.data[n * H * R], &a.lse.data[n * H]);
    for (int64_t h = 0; h < H; ++h) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < L; ++j) {
        const float* row = &c.blocks.data[j * D];
        float dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += qy.q[(n * H + h) * D + k] * row[k];
        m = std::max(m, scale * dot);
      }
      a.mx.data[n * H + h] = m;
    }
  }
  return a;
}

}  // namespace ladder::mla::flashmla_detail
