// ladder/07-precision/smoothquant.hpp -- rung (b): SmoothQuant A8W8 on activations with outlier channels.
//
// SmoothQuant (Xiao et al., ICML 2023, eq. 4) moves the activations' per-channel outliers into the
// weights: s_j = max|X_j|^a / max|W_j|^(1-a), X' = X diag(s)^-1, W' = diag(s) W (core/quant.hpp's
// smoothquant_scales and smooth), so X' W' = X W in exact arithmetic. The weights are then quantised
// per output channel (int8, amax/127) and the activations per tensor or per token (int8, amax/127);
// the int32 sums are exact (a8w8.hpp), and the output is acc * sx * sw in float64 here (this rung
// measures the quantisation error; the float32 dequantisation's 3 roundings are a8w8.hpp's bound).
//
// The data (sq_data): a seeded X [T x K] with N(0, 1) entries whose kOutliers channels (every
// K / kOutliers-th, from channel 3) are multiplied by kOutlierGain, as the LLM activations in the
// SmoothQuant paper have a few channels about 100x the rest in every token; W [K x N] N(0, 1) / sqrt(K).
// Because the outliers sit in channels, not tokens, per-token scaling alone cannot isolate them: every
// token's scale is set by its outlier channels and the other channels keep a few int8 levels.
//
// The error (rel_err): ||Y - O||_F / ||O||_F with O = X W in float64 from the ORIGINAL (unsmoothed)
// X and W, so a smoothing that is not undone in W shows up in it.
//
// The smoothing check (smoothing_violation): before any quantisation, X' W' must equal X W up to the
// two float32 roundings of smoothing: x'_tj = fl(x_tj / s_j) = (x_tj / s_j)(1 + d1), w'_jn = fl(w_jn s_j)
// = w_jn s_j (1 + d2), |di| <= u = 2^-24, so |sum_j x'_tj w'_jn - sum_j x_tj w_jn| <= gamma_2(u) sum_j
// |x_tj w_jn| (products and sums in float64 add gamma_K(2^-53) of the same sum, counted too). The
// function returns the worst ratio |difference| / bound: <= 1 for a right smoothing; a scale applied to
// X and not undone in W gives a ratio of order 1 / gamma_2(u) ~ 2^23.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

inline constexpr int64_t kSqTokens = 64, kSqK = 256, kSqN = 64, kOutliers = 4;
inline constexpr double kOutlierGain = 64.0;
inline constexpr uint64_t kSqSeed = 7040;
inline const double kSqAlphas[5] = {0.0, 0.25, 0.5, 0.75, 1.0};

struct SqData {
  Mat<float> x, w;
};

inline SqData sq_data(uint64_t seed = kSqSeed) {
  SqData d;
  d.x.resize(kSqTokens, kSqK);
  d.w.resize(kSqK, kSqN);
  Rng rng(seed);
  for (int64_t t = 0; t < kSqTokens; ++t)
    for (int64_t j = 0; j < kSqK; ++j) d.x(t, j) = static_cast<float>(rng.normal());
  for (int64_t j = 0; j < kSqK; ++j)
    for (int64_t n = 0; n < kSqN; ++n) d.w(j, n) = static_cast<float>(rng.normal() / std::sqrt(double(kSqK)));
  for (int64_t o = 0; o < kOutliers; ++o) {
    const int64_t j = 3 + o * (kSqK / kOutliers);
    for (int64_t t = 0; t < kSqTokens; ++t) d.x(t, j) = static_cast<float>(d.x(t, j) * kOutlierGain);
  }
  return d;
}

// x w in float64, fixed order.
inline std::vector<double> product_f64(const Mat<float>& x, const Mat<float>& w) {
  std::vector<double> o(static_cast<size_t>(x.rows() * w.cols()), 0.0);
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int64_t j = 0; j < x.cols(); ++j)
      for (int64_t n = 0; n < w.cols(); ++n) o[static_cast<size_t>(t * w.cols() + n)] += double(x(t, j)) * w(j, n);
  return o;
}

enum class ActScale : uint8_t { per_tensor, per_token };

// Y = dequant(int8 x) dequant(int8 w): activations per tensor or per token, weights per channel.
inline std::vector<double> a8w8_product(const Mat<float>& x, const Mat<float>& w, ActScale act) {
  require(x.cols() == w.rows(), "a8w8_product: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  const quant::Quantized xq = act == ActScale::per_tensor ? quant::per_tensor(x, quant::Elem::int8)
                                                          : quant::per_token(x, quant::Elem::int8);
  const quant::Quantized wq = quant::per_channel(w, quant::Elem::int8);
  const int64_t m = x.rows(), k = x.cols(), n = w.cols();
  Mat<int32_t> acc(m, n);
  const std::vector<int8_t> a = int8_codes(xq), b = int8_codes(wq);
  gemm_s8s8s32(a.data(), b.data(), acc.data(), m, k, n);
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      y[static_cast<size_t>(i * n + j)] = double(acc(i, j)) * xq.scale_at(i, 0) * wq.scale_at(0, j);
  return y;
}

inline double rel_err(const std::vector<double>& y, const std::vector<double>& o) {
  double num = 0, den = 0;
  for (size_t e = 0; e < o.size(); ++e) {
    num += (y[e] - o[e]) * (y[e] - o[e]);
    den += o[e] * o[e];
  }
  return std::sqrt(num / den);
}

// The worst |X'W' - XW| / bound over the outputs (see above): <= 1 for a right smoothing.
inline double smoothing_violation(const Mat<float>& x, const Mat<float>& w, const Mat<float>& xs, const Mat<float>& ws) {
  const int64_t k = x.cols();
  const double g = gamma_n(2, 0x1p-24) + gamma_n(double(k) + 2, 0x1p-53);
  double worst = 0;
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int64_t n = 0; n < w.cols(); ++n) {
      double a = 0, b = 0, mag = 0;
      for (int64_t j = 0; j < k; ++j) {
        a += double(xs(t, j)) * ws(j, n);
        b += double(x(t, j)) * w(j, n);
        mag += std::fabs(double(x(t, j)) * w(j, n));
      }
      const double bound = g * mag * (1 + 0x1p-20);  // (1 + 2^-20): mag itself is a float64 sum
      if (bound > 0) worst = std::max(worst, std::fabs(a - b) / bound);
      else if (a != b) worst = INFINITY;
    }
  return worst;
}

// One row of the table: the relative errors at one alpha.
struct SqRow {
  double alpha = 0;
  double tensor_plain = 0, token_plain = 0;    // unsmoothed: per-tensor, per-token activations
  double tensor_smooth = 0, token_smooth = 0;  // smoothed
  double violation = 0;                        // smoothing_violation of the smoothed pair
};

// A smoothing: given X, W and alpha, writes the smoothed pair. The right one is core/quant.hpp's.
using Smoother = void (*)(const Mat<float>& x, const Mat<float>& w, double alpha, Mat<float>& xs, Mat<float>& ws);

inline void smooth_right(const Mat<float>& x, const Mat<float>& w, double alpha, Mat<float>& xs, Mat<float>& ws) {
  xs = x;
  ws = w;
  quant::smooth(xs, ws, quant::smoothquant_scales(x, w, alpha));
}

inline std::vector<SqRow> smoothquant_table(const SqData& d, Smoother smoother = smooth_right) {
  const std::vector<double> o = product_f64(d.x, d.w);
  const double tp = rel_err(a8w8_product(d.x, d.w, ActScale::per_tensor), o);
  const double kp = rel_err(a8w8_product(d.x, d.w, ActScale::per_token), o);
  std::vector<SqRow> rows;
  for (const double a : kSqAlphas) {
    Mat<float> xs, ws;
    smoother(d.x, d.w, a, xs, ws);
    SqRow r;
    r.alpha = a;
    r.tensor_plain = tp;
    r.token_plain = kp;
    r.tensor_smooth = rel_err(a8w8_product(xs, ws, ActScale::per_tensor), o);
    r.token_smooth = rel_err(a8w8_product(xs, ws, ActScale::per_token), o);
    r.violation = smoothing_violation(d.x, d.w, xs, ws);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace ladder::precision
