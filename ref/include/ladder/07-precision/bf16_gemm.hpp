// ladder/07-precision/bf16_gemm.hpp -- recipe "bf16_gemm": y = x w with bf16 operands, exact products and
// float32 accumulation, as tensor cores (mma.sync m16n8k16 bf16 -> f32), AVX512_BF16 and cuBLAS's bf16 GEMM
// with an fp32 compute type run it; the recipe of DeepSeek MLA's projections (W_DKV, W_UQ, W_O, ...) in bf16.
//
//   x [M x K] float32 --bf16 RNE--> xq [M x K] codes   (core/formats.hpp to_bf16; judged exactly)
//   w [K x N] float32 --bf16 RNE--> wq [K x N] codes   (judged exactly)
//   y_ij = the float32 sum of the K products p_k = xq_ik wq_kj, each exact (8 x 8 significand bits fit
//          float32's 24), in ANY order and grouping (a chain, blocks, a tree, k-blocks of an mma)
//
// The reference rung runs gemm_bf16_cpu (cpu_gemm.hpp: one fixed chain, the same bits on every CPU); the
// contract's baseline, bf16_gemm_chain, the ascending float32 chain. gemm_bf16_cpu's contract
// flushes: a subnormal bf16 code is read as zero (DAZ) and a tiny float32 result becomes zero
// (FTZ). The recipe allows both (and gradual underflow): the bound below carries their allowance, so a
// candidate with or without DAZ / FTZ passes.
//
// The bound on |y - o| (bf16_gemm_bound; the derivation, Higham, Accuracy and Stability of Numerical
// Algorithms, §3.1 and §4.2, gamma_n(u) = n u / (1 - n u)). o = sum_k p_k exactly, S = sum_k |p_k|.
//   * Summation: any order of K terms is a binary tree of K - 1 float32 additions, each rounded to nearest
//     ((1 + d), |d| <= u = 2^-24); every term passes through at most K - 1 of them, so
//     |y - o| <= gamma_{K-1}(2^-24) S <= gamma_K(2^-24) S. (A product rounded to float32 on its own is
//     exact unless it underflows: below.)
//   * Underflow: each of the 2K - 1 operations (K products, K - 1 additions) may in addition lose an absolute
//     amount below 2^-126 (a result flushed to zero is tiny, below 2^-126; gradual underflow loses at most
//     2^-150). The later roundings scale such a loss by at most (1 + u)^(K-1) < 2 (K u < 1/2): 2 (2K) 2^-126
//     = K 2^-124 in all.
//   * DAZ: a subnormal code (|v| < 2^-126) read as zero drops its products: + D = sum of |p_k| over the k
//     with xq_ik or wq_kj subnormal (0 when no operand is subnormal, as in every golden case).
//   * The oracle: o is the float64 sum of the exact products (exact in float64 too) in ascending k:
//     within gamma_{K-1}(2^-53) S of exact; S and D are computed the same way (relative gamma_{K-1}(2^-53)),
//     and the bound's own few float64 roundings are below 2^-50 relative: the factor (1 + 2 gamma_K(2^-53)
//     + 2^-50) covers measuring with the computed S, D.
//   bound = ((gamma_K(2^-24) + gamma_K(2^-53)) S + D) (1 + 2 gamma_K(2^-53) + 2^-50) + K 2^-124.
// What it catches (tests/07-precision/test_bf16_gemm.cpp, on every golden): x w in float32 from the UNROUNDED
// inputs (each factor off by up to 2^-8 relative: the goldens hold a row and a column whose products all have
// the same sign and the same direction of rounding error, so the sum is off by about 2^-8 S, against the
// bound's K 2^-24 S: caught for K < 2^16), w read transposed, codes truncated (RTZ) where RNE is declared
// (xq, wq exactly), a column summed over k = 0..K-2. A device's tensor core does not add in float32 RNE
// steps (its mma sums 16 products and c with its own alignment and truncation; tests/simt/
// test_tensor_core.cpp measures 17 2^-23 per mma on an H200); under SIMT the emulated mma adds in float32
// RNE steps and is inside the recipe.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

// The bf16 codes of m (row-major), RNE; a non-finite element is an Error naming it.
inline std::vector<uint16_t> bf16_codes(const Mat<float>& m, const char* name,
                                        formats::Round r = formats::Round::nearest_even) {
  std::vector<uint16_t> c(static_cast<size_t>(m.size()));
  for (int64_t i = 0; i < m.size(); ++i) {
    require(std::isfinite(m.data()[i]), "bf16_gemm: input {} element {} = {} violates isfinite", name, i, m.data()[i]);
    c[static_cast<size_t>(i)] = formats::to_bf16(m.data()[i], r);
  }
  return c;
}

// Codes as the contract's int32 outputs (0..65535).
inline Array<int32_t> bf16_codes_i32(const std::vector<uint16_t>& c, int64_t rows, int64_t cols) {
  Array<int32_t> a({rows, cols});
  a.data.assign(c.begin(), c.end());
  return a;
}

// The bound derived above, for K terms with S = sum |p_k| and D = sum of the |p_k| with a subnormal factor.
inline double bf16_gemm_bound(int64_t K, double S, double D) {
  require(K >= 1 && K <= (int64_t{1} << 22), "bf16_gemm_bound: K = {} violates 1 <= K <= 2^22 (K 2^-24 < 1/2)", K);
  const double k = static_cast<double>(K), g53 = gamma_n(k, 0x1p-53);
  return ((gamma_n(k, 0x1p-24) + g53) * S + D) * (1 + 2 * g53 + 0x1p-50) + k * 0x1p-124;
}

inline bool bf16_subnormal(uint16_t c) { return (c & 0x7F80u) == 0 && (c & 0x7Fu) != 0; }

// The fp64 oracle on the codes xq [M x K], wq [K x N]: y (ascending k) and the per-element bound.
struct Bf16Oracle {
  Array<double> y, bound;
};
inline Bf16Oracle bf16_gemm_oracle(const std::vector<uint16_t>& xq, const std::vector<uint16_t>& wq, int64_t M,
                                   int64_t K, int64_t N) {
  Bf16Oracle o{Array<double>({M, N}), Array<double>({M, N})};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double y = 0, S = 0, D = 0;
      for (int64_t k = 0; k < K; ++k) {
        const uint16_t a = xq[static_cast<size_t>(i * K + k)], b = wq[static_cast<size_t>(k * N + j)];
        const double p = static_cast<double>(formats::from_bf16(a)) * formats::from_bf16(b);  // exact
        y += p;
        S += std::fabs(p);
        if (bf16_subnormal(a) || bf16_subnormal(b)) D += std::fabs(p);
      }
      o.y.data[static_cast<size_t>(i * N + j)] = y;
      o.bound.data[static_cast<size_t>(i * N + j)] = bf16_gemm_bound(K, S, D);
    }
  return o;
}

// The recipe in its plainest order, the contract's baseline: the codes and y = the ascending float32 chain of the
// exact products (no DAZ / FTZ; header-only, so the contract needs no compiled GEMM). The registered reference rung
// ref/bf16_gemm runs gemm_bf16_cpu instead (ref/src/07-precision/registry.cpp): VDPBF16PS's pairs, DAZ / FTZ.
struct Bf16Result {
  std::vector<uint16_t> xq, wq;
  std::vector<float> y;
};
inline Bf16Result bf16_gemm_chain(const Mat<float>& x, const Mat<float>& w) {
  require(x.cols() == w.rows(), "bf16_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  const int64_t M = x.rows(), K = x.cols(), N = w.cols();
  Bf16Result r{bf16_codes(x, "x"), bf16_codes(w, "w"), std::vector<float>(static_cast<size_t>(M * N), 0.0f)};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const float a = formats::from_bf16(r.xq[static_cast<size_t>(i * K + k)]);
      for (int64_t j = 0; j < N; ++j)
        r.y[static_cast<size_t>(i * N + j)] += a * formats::from_bf16(r.wq[static_cast<size_t>(k * N + j)]);
    }
  return r;
}

}  // namespace ladder::precision
