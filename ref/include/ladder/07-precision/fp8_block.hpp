// ladder/07-precision/fp8_block.hpp -- rung (c): FP8 (E4M3) block-scaled GEMM as DeepSeek-V3 runs it,
// with an emulated limited-precision tensor-core accumulator and promotion to float32 every N_C elements.
//
// The recipe (DeepSeek-V3 technical report, arXiv 2412.19437, §3.3 "FP8 training"):
//   x [M x K] float32 -> E4M3 codes, one scale per 1 x 128 tile (per token, per 128 channels);
//   w [K x N] float32 -> E4M3 codes, one scale per 128 x 128 block; scale = amax / 448 (core/quant.hpp);
//   the tensor core sums the products of the codes in an accumulator that keeps about 14 bits; every
//   N_C = 128 elements the partial sum is promoted: multiplied by the two tiles' scales and added to a
//   float32 accumulator on the CUDA cores.
// Here (Fp8Recipe): acc_bits = the accumulator's significant bits, the leading bit included (default 14;
// 24 = a float32 accumulator), acc_round = how each addition is rounded to them (default round to
// nearest, ties to even; or toward zero, truncation), nc = N_C (a divisor of 128, so a promotion never
// spans two scale blocks), x_scale = 0 for dynamic scales, or one static (calibrated) activation scale
// for every tile, x / x_scale saturated to +-448 (OCP FP8's saturating conversion).
//
// The emulation, exactly (fp8_gemm): every E4M3 value is a multiple of 2^-9 of magnitude <= 448, so the
// product p of two codes is exact in float32 and a multiple of 2^-18; the accumulator holds an integer
// count of 2^-18 units (int64). Each step adds p exactly and rounds the sum to acc_bits significant bits
// (round_significant: RNE on the integer; or truncation); the first step from 0 is exact. At the end of
// each chunk of nc elements (or of the 128-block): t = fl32(xs_i,b * ws_b,j), v = the accumulator as a
// float32 (exact: <= 24 bits), y_ij = fl32(y_ij + fl32(v * t)), chunks in ascending k. Every operation
// is specified bit for bit (integer rounding, float32 products and sums with no FMA contraction:
// -ffp-contract=off), so the goldens are the same bytes on every CPU.
//
// The bound (fp8_bound; the derivation, Higham §3.1, gamma_n(u) = n u / (1 - n u)):
//   The oracle (fp8_oracle) is o = sum_k xh_ik wh_kj, xh / wh the dequantised codes (exactly the code
//   times its tile's scale): quantisation is deterministic and judged exactly through the codes and
//   scales, so what remains is the accumulation. Let G = sum_k |xh_ik wh_kj| and, for chunk c, A_c the
//   sum of |p| over its terms, T_c = xs ws its exact scale product (so sum_c T_c A_c = G).
//   * The limited accumulator: n terms summed in any order with n - 1 roundings of unit roundoff u_a
//     (2^-acc_bits for RNE, 2^(1-acc_bits) for truncation) are off by at most gamma_{n-1}(u_a) A_c.
//   * Promotion: t and v t are two float32 roundings, and the float32 sum of the chunks' values over
//     nch chunks is off by gamma_{nch-1}(2^-24) times their absolute sum, so the whole float32 part is
//     within gamma_{nch+1}(2^-24) of sum_c |v_c| T_c <= (1 + gamma_{nc-1}(u_a)) G.
//   * The oracle's own error (float64 products, pairwise sum): below gamma_{K+1}(2^-53) G.
//   |y - o| <= [gamma_{nc-1}(u_a) + gamma_{nch+1}(2^-24) (1 + gamma_{nc-1}(u_a)) + gamma_{K+1}(2^-53)] G,
//   times (1 + 2^-30) for G itself computed in float64. It assumes no float32 underflow in v t (every
//   scale product t above 2^-100; the recipe's scales are amax / 448). Any summation order or blocking
//   of the same recipe, a finer N_C or a wider accumulator has a bound no larger, so it passes.
//   A scale taken from the wrong tile scales a whole chunk by s' / s, far beyond gamma_{127}(2^-14)
//   < 0.8 % of G when the block magnitudes differ (the golden cases make them differ); codes rounded
//   the wrong way or not saturated are caught by the exact check of xq.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"  // gamma_n
#include "ladder/07-precision/fp8_kernels.hpp"  // Fp8Recipe, the accumulator, encode_e4m3, fp8_block_dot
#include "ladder/core/error.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

inline void check_recipe(const Fp8Recipe& r) {
  require(r.acc_bits >= 8 && r.acc_bits <= 24, "fp8 recipe: acc_bits = {} violates 8 <= acc_bits <= 24", r.acc_bits);
  require(r.nc >= 1 && 128 % r.nc == 0, "fp8 recipe: nc = {} violates nc >= 1 and 128 % nc == 0", r.nc);
  require(r.x_scale == 0 || (std::isfinite(r.x_scale) && r.x_scale >= 0x1p-50f),
          "fp8 recipe: x_scale = {} violates x_scale == 0 (dynamic) or finite x_scale >= 2^-50", r.x_scale);
}

// Largest K emulated: K 448^2 < 2^38 units... keeps every sum far inside int64 (and float32's range).
inline constexpr int64_t kFp8MaxK = int64_t{1} << 20;

// x [M x K] -> E4M3 codes in 1 x 128 tiles: dynamic (amax / 448) or with the recipe's static scale.
inline quant::Quantized fp8_quantize_x(const Mat<float>& x, const Fp8Recipe& r) {
  check_recipe(r);
  if (r.x_scale == 0) return quant::tiles_1x128(x);
  quant::Quantized q = quant::quantize(x, quant::Elem::e4m3, 1, 128);  // the layout; codes and scales redone
  q.scales.setConstant(r.x_scale);
  for (int64_t i = 0; i < q.rows; ++i)
    for (int64_t c = 0; c < q.cols; ++c)
      q.codes[static_cast<size_t>(i * q.cols + c)] = formats::to_e4m3(x(i, c) / r.x_scale);  // RNE, saturating
  return q;
}

struct Fp8Result {
  quant::Quantized xq, wq;  // 1 x 128 tiles / 128 x 128 blocks, E4M3
  Mat<float> y;             // [M x N]
};

// The decoded codes of q as a float matrix (exact).
inline Mat<float> code_values(const quant::Quantized& q) {
  Mat<float> v(q.rows, q.cols);
  for (int64_t i = 0; i < q.rows; ++i)
    for (int64_t c = 0; c < q.cols; ++c) v(i, c) = q.element(i, c);
  return v;
}

// y = the recipe's product of the quantised xq [M x K] and wq [K x N] (emulation above).
inline Mat<float> fp8_block_product(const quant::Quantized& xq, const quant::Quantized& wq, const Fp8Recipe& r) {
  check_recipe(r);
  require(xq.cols == wq.rows, "fp8_block_product: x.cols = {} violates x.cols == w.rows = {}", xq.cols, wq.rows);
  require(xq.cols <= kFp8MaxK, "fp8_block_product: K = {} violates K <= {}", xq.cols, kFp8MaxK);
  require(xq.block_rows == 1 && xq.block_cols == 128 && wq.block_rows == 128 && wq.block_cols == 128,
          "fp8_block_product: tiles {}x{} and blocks {}x{} violate 1x128 and 128x128", xq.block_rows, xq.block_cols,
          wq.block_rows, wq.block_cols);
  const int64_t m = xq.rows, k = xq.cols, n = wq.cols, kb = (k + 127) / 128;
  // Row i of x's codes is contiguous; w's columns are gathered once ([N x K]), and so are the scales:
  // xs row i ([kb]) and, per column block, the 128 x 128 blocks' scales down k ([kb]).
  std::vector<uint8_t> wt(static_cast<size_t>(n * k));
  for (int64_t c = 0; c < k; ++c)
    for (int64_t j = 0; j < n; ++j) wt[static_cast<size_t>(j * k + c)] = wq.codes[static_cast<size_t>(c * n + j)];
  std::vector<float> xs(static_cast<size_t>(m * kb)), ws(static_cast<size_t>(wq.scales.cols() * kb));
  for (int64_t b = 0; b < kb; ++b) {
    for (int64_t i = 0; i < m; ++i) xs[static_cast<size_t>(i * kb + b)] = xq.scales(i, b);
    for (int64_t jb = 0; jb < wq.scales.cols(); ++jb) ws[static_cast<size_t>(jb * kb + b)] = wq.scales(b, jb);
  }
  Mat<float> y(m, n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      y(i, j) = fp8_block_dot(&xq.codes[static_cast<size_t>(i * k)], &xs[static_cast<size_t>(i * kb)],
                              &wt[static_cast<size_t>(j * k)], &ws[static_cast<size_t>(j / 128 * kb)], k, r);
  return y;
}

inline Fp8Result fp8_gemm(const Mat<float>& x, const Mat<float>& w, const Fp8Recipe& r) {
  require(x.cols() == w.rows(), "fp8_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  Fp8Result res;
  res.xq = fp8_quantize_x(x, r);
  res.wq = quant::blocks_128x128(w);
  res.y = fp8_block_product(res.xq, res.wq, r);
  return res;
}

// The oracle of y and G = sum_k |xh wh| (float64), from the codes and scales.
struct Fp8Oracle {
  Mat<double> y, g;
};
inline Fp8Oracle fp8_oracle(const quant::Quantized& xq, const quant::Quantized& wq) {
  require(xq.cols == wq.rows, "fp8_oracle: x.cols = {} violates x.cols == w.rows = {}", xq.cols, wq.rows);
  const int64_t m = xq.rows, k = xq.cols, n = wq.cols;
  Mat<double> xh(m, k), wt(n, k);  // wt: w dequantised, transposed (contiguous columns)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) xh(i, c) = static_cast<double>(xq.element(i, c)) * xq.scale_at(i, c);
  for (int64_t c = 0; c < k; ++c)
    for (int64_t j = 0; j < n; ++j) wt(j, c) = static_cast<double>(wq.element(c, j)) * wq.scale_at(c, j);
  Fp8Oracle o{Mat<double>(m, n), Mat<double>(m, n)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double* xi = xh.row(i).data();
      const double* wj = wt.row(j).data();
      o.y(i, j) = sum_pairwise_of<double>(k, [&](int64_t c) { return xi[c] * wj[c]; });
      o.g(i, j) = sum_pairwise_of<double>(k, [&](int64_t c) { return std::fabs(xi[c] * wj[c]); });
    }
  return o;
}

// The number of promotions of a K-long dot product: each 128-block cut into chunks of nc.
inline int64_t fp8_chunks(int64_t k, int64_t nc) {
  int64_t c = 0;
  for (int64_t b = 0; b < k; b += 128) c += (std::min<int64_t>(128, k - b) + nc - 1) / nc;
  return c;
}

// The bound on |y - o| for an element whose G = sum_k |xh wh| is g (derived above).
inline double fp8_bound(const Fp8Recipe& r, int64_t k, double g) {
  check_recipe(r);
  const double ua = r.acc_round == AccRound::nearest_even ? std::ldexp(1.0, -r.acc_bits) : std::ldexp(1.0, 1 - r.acc_bits);
  const double inner = gamma_n(static_cast<double>(r.nc - 1), ua);
  const double outer = gamma_n(static_cast<double>(fp8_chunks(k, r.nc) + 1), 0x1p-24);
  const double oracle = gamma_n(static_cast<double>(k + 1), 0x1p-53);
  return (inner + outer * (1 + inner) + oracle) * g * (1 + 0x1p-30);
}

}  // namespace ladder::precision
