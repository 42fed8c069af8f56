// tests/07-precision/bf16_gemm_check.hpp -- the judge of the bf16 tensor-core GEMM (cuda/src/07-precision/
// bf16_gemm.cuh), shared by its tests (test_bf16_gemm_cuda.cpp) and its planted copies
// (test_bf16_gemm_cuda_planted.cu): random bf16 operands, the fp64 oracle and the derived error bound.
//
// The bound. Per output, the kernel runs T = 2 ceil(K / 32) mma steps (k-blocks of 16 in order; a block past
// K holds zero-filled products), each d = c + sum of its 16 products. The products of bf16 values are exact
// in fp32 (8 x 8 significand bits). One mma's fp32 sum of its 17 terms, in whatever order and grouping the
// hardware uses, each addition rounded or truncated, is within 17 u |terms| with u = 2^-23 -- the per-mma
// bound tests/simt/test_tensor_core.cpp checks on the emulator and on the device (an H200 met it). With
// S = sum_k |a_ik b_jk|, P_s = the |products| of steps before s, c_s the accumulator before step s and
// E_s = |c_s - exact partial sum|: E_{s+1} <= E_s + 17 u (|c_s| + S_s) <= E_s + 17 u (P_s + S_s + E_s)
// <= E_s + 17 u (S + E_T), so E_T <= 17 u T (S + E_T), i.e.
//     |c - exact| <= 17 u T S / (1 - 17 u T)            ((K + K/16) u S (1 + tiny) when 32 divides K).
// The oracle sums the exact products in fp64: within (K - 1) 2^-53 S of exact, added to the bound. A wrong
// fragment, a lost k-block or a product of the wrong row changes an output by about S / K, far above it.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/core/formats.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::test_bf16 {

// rows x cols bf16 bit patterns: normal values, row r scaled by 2^(r % 7 - 3) (a spread of magnitudes
// within each output's sum), rounded to nearest even.
inline std::vector<uint16_t> random_bf16(Rng& rng, int64_t rows, int64_t cols) {
  std::vector<uint16_t> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k)
      v[static_cast<size_t>(r * cols + k)] =
          formats::to_bf16(static_cast<float>(std::ldexp(rng.normal(), static_cast<int>(r % 7) - 3)));
  return v;
}

struct Judged {
  int64_t outside = 0;     // outputs not finite or beyond the bound
  double worst = 0;        // max |c - exact| / bound
};

// c [M, N] against the fp64 oracle of a [M, K] b [N, K]^T with the bound above.
inline Judged judge(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<float>& c,
                    int64_t M, int64_t N, int64_t K) {
  const double u = std::ldexp(1.0, -23), T = 2.0 * static_cast<double>((K + 31) / 32);
  const double mma = 17.0 * u * T / (1.0 - 17.0 * u * T), oracle = static_cast<double>(K - 1) * std::ldexp(1.0, -53);
  Judged j;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, S = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(formats::from_bf16(a[static_cast<size_t>(i * K + k)])) *
                         formats::from_bf16(b[static_cast<size_t>(n * K + k)]);  // exact in fp64
        exact += p;
        S += std::fabs(p);
      }
      const double got = c[static_cast<size_t>(i * N + n)], err = std::fabs(got - exact), bound = (mma + oracle) * S;
      if (!std::isfinite(got) || err > bound) ++j.outside;
      if (bound > 0) j.worst = std::fmax(j.worst, err / bound);
    }
  return j;
}

}  // namespace ladder::test_bf16
