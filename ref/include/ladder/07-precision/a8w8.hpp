// ladder/07-precision/a8w8.hpp -- rung (a): A8W8 GEMM, int8 x int8 -> int32 exact, then per-token x
// per-channel dequantisation (the Huawei deployment's "A8W8 dynamic": activations quantised per token
// at run time, weights per output channel offline; both symmetric int8, core/quant.hpp).
//
//   x [M x K] float32 --per_token int8--> xq [M x K], xs [M x 1]   (xs_i = amax of row i / 127)
//   w [K x N] float32 --per_channel int8-> wq [K x N], ws [1 x N]  (ws_j = amax of column j / 127)
//   acc = xq wq   [M x N] int32, exact
//   y_ij = fl(fl(float(acc_ij) * xs_i) * ws_j)   [M x N] float32
//
// Why the int32 sum is exact: every product of two int8 values is at most 128 * 128 = 2^14 in
// magnitude, so a sum of K of them is at most K 2^14, which fits int32 (<= 2^31 - 1) for every
// K <= 131071 = 2^17 - 1 (kA8W8MaxK). Larger K is refused with an Error naming K; integer addition is
// associative, so every summation order and blocking gives the same bits.
//
// The bound on y (a8w8_bound; the derivation): the oracle is o = acc xs ws in exact arithmetic (acc is
// exact). The candidate's three float32 roundings (acc -> float exact below 2^24, else relative 2^-24;
// two products) give y = o (1 + d1)(1 + d2)(1 + d3), |di| <= u = 2^-24, so |y - o| <= gamma_3 |o| with
// gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability of Numerical Algorithms, §3.1). The oracle
// itself is computed in float64 (two roundings of 2^-53: gamma_2(2^-53) |o|), and a product that falls
// into float32's subnormal range loses at most half the subnormal spacing, 2^-150, absolutely (two
// products: 2^-149). Any order of the two scale products (acc (xs ws)) obeys the same bound.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

// The largest K whose int32 sum of K int8 x int8 products cannot overflow: K 2^14 <= 2^31 - 1.
inline constexpr int64_t kA8W8MaxK = (int64_t{1} << 17) - 1;

// gamma_n(u) = n u / (1 - n u): the relative error of n roundings of unit roundoff u (n u < 1).
inline double gamma_n(double n, double u) {
  require(n * u < 1, "gamma_n: n u = {} violates n u < 1", n * u);
  return n * u / (1 - n * u);
}

// c = a b: a [m x k] int8 row-major, b [k x n] int8 row-major, c [m x n] int32; exact.
inline void gemm_s8s8s32(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
  require(k >= 0 && k <= kA8W8MaxK,
          "gemm_s8s8s32: K = {} violates K <= {} (a sum of K int8 x int8 products, each up to 2^14, must fit int32)",
          k, kA8W8MaxK);
  for (int64_t i = 0; i < m; ++i) {
    int32_t* ci = c + i * n;
    for (int64_t j = 0; j < n; ++j) ci[j] = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t av = a[i * k + kk];
      const int8_t* bk = b + kk * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * static_cast<int32_t>(bk[j]);
    }
  }
}

struct A8W8Result {
  quant::Quantized xq, wq;  // per-token / per-channel int8
  Mat<int32_t> acc;         // [M x N]
  Mat<float> y;             // [M x N]
};

// The codes of a Quantized int8 matrix as int8_t.
inline std::vector<int8_t> int8_codes(const quant::Quantized& q) {
  return std::vector<int8_t>(q.codes.begin(), q.codes.end());
}

// x [M x K], w [K x N] -> the recipe's codes, scales, int32 accumulators and dequantised output.
inline A8W8Result a8w8_gemm(const Mat<float>& x, const Mat<float>& w) {
  require(x.cols() == w.rows(), "a8w8_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  A8W8Result r;
  r.xq = quant::per_token(x, quant::Elem::int8);
  r.wq = quant::per_channel(w, quant::Elem::int8);
  const int64_t m = x.rows(), k = x.cols(), n = w.cols();
  r.acc.resize(m, n);
  const std::vector<int8_t> a = int8_codes(r.xq), b = int8_codes(r.wq);
  gemm_s8s8s32(a.data(), b.data(), r.acc.data(), m, k, n);
  r.y.resize(m, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float t = static_cast<float>(r.acc(i, j)) * r.xq.scales(i, 0);
      r.y(i, j) = t * r.wq.scales(0, j);
    }
  return r;
}

// The oracle of y: acc xs ws in float64.
inline double a8w8_oracle(int64_t acc, double xs, double ws) { return static_cast<double>(acc) * xs * ws; }

// The bound on |y - o| for y a float32 sum of nb dequantised terms fl(fl(float(acc_b) xs) ws_b), o the
// float64 oracle sum_b acc_b xs ws_b and g = sum_b |acc_b xs ws_b| (derived above for nb = 1; the sum of nb
// terms, A8W4's scale groups, in ladder/07-precision/moe_quant.hpp): gamma_{nb+2}(2^-24) + gamma_{nb+1}(2^-53).
inline double dequant_sum_bound(int64_t nb, double g) {
  require(nb >= 1, "dequant_sum_bound: nb = {} violates nb >= 1", nb);
  const double n = static_cast<double>(nb);
  // |g_exact| <= g (1 + gamma_{nb+1}(2^-53)) < g (1 + 2^-50): the factor covers measuring with the computed g.
  return (gamma_n(n + 2, 0x1p-24) + gamma_n(n + 1, 0x1p-53)) * g * (1 + 0x1p-50) + n * 0x1p-149;
}

// The bound on |y - o| for an oracle value o (derived above): one term.
inline double a8w8_bound(double o) { return dequant_sum_bound(1, std::fabs(o)); }

}  // namespace ladder::precision
