// ladder/core/quant.hpp -- block-scaled quantisation and its dequantisation, on top of core/formats.hpp.
//
// One function, quantize(x, elem, block_rows, block_cols, rule), does every granularity: x (rows x
// cols, row-major) is cut into block_rows x block_cols tiles (the last row / column of tiles may be
// smaller), each tile gets one scale s, and each element is stored as q = encode(x / s) in the element
// format. The named granularities are that call with a fixed tile:
//   per_tensor(x)        one tile, the whole matrix
//   per_channel(w)       rows x 1: one scale per column (an output channel of W [K x N] in Y = X W)
//   per_token(x)         1 x cols: one scale per row (a token of X [T x K]); "dynamic": the scales come
//                        from the activation at hand, as the Huawei deployment's A8W8 dynamic int8 does
//   tiles_1x128(x)       1 x 128 activation tiles, E4M3 (DeepSeek-V3 technical report §3.3)
//   blocks_128x128(w)    128 x 128 weight blocks, E4M3 (ibid.)
//   int4_groups(w, g)    g x 1: one scale per g consecutive rows of a column (groups along K), int4
// Element formats (Elem) and their largest magnitude qmax: int8 127 and int4 7 (symmetric: -128 / -8
// are never produced), e4m3 448 (OCP FP8; encode saturates).
// Scale rules (ScaleRule):
//   amax   s = fl(amax / qmax) in float32 (DeepSeek-V3: amax / 448). x / s may exceed qmax by an ulp
//          (fl rounding); the element encoder saturates that back to qmax, inside the bound below.
//   pow2   s = 2^k, the SMALLEST power of two with amax / 2^k <= qmax (UE8M0, to_ue8m0 rounding UP, then
//          one exact check that bumps k if fl(amax / qmax) had rounded below the true quotient): nothing
//          overflows, and x / s and q * s are exact (no float32 rounding in scaling).
// A tile whose amax is 0 gets s = 1 (both rules): its codes are 0 and it dequantises to exact zeros.
// Inputs must be finite (NaN / inf are refused with an Error naming the element).
//
// Error bound of one element (dequant_bound; the derivation):
//   Let u = 2^-24 (float32's unit roundoff), y = fl(x / s) = (x / s)(1 + d1), |d1| <= u (d1 = 0 for
//   pow2), q = round_elem(y) with |q - y| <= h(y), and xh = fl(q * s) = q s (1 + d2), |d2| <= u.
//   Then xh - x = (q - y) s + (y s - x) + q s d2 = (q - y) s + x d1 + q s d2, so
//     |xh - x| <= s h + u |x| + u |q| s,  and |q| s <= |y| s + h s <= |x| (1 + u) + h s, giving
//     |xh - x| <= s h (1 + u) + u |x| (2 + u).
//   h, the element format's rounding error at |y| <= (|x| / s)(1 + u) (RNE, within range):
//     int8 / int4: h = 1/2 (an integer grid; saturation of the ulp overshoot moves y by less than 1/2).
//     e4m3: h = 2^-4 |y| + 2^-10: relative half-ulp 2^-(3+1) in the normal range, and half the subnormal
//           quantum 2^-9 below 2^-6 (the sum covers both). The ulp overshoot past 448 stays below the
//           overflow point 464, so saturation is a rounding to 448 like any other.
//   (d1, d2 as stated hold while x / s and q * s stay normal float32 numbers: tiles whose amax is below
//   about 2^-100 can lose more to float32 underflow than the bound allows; the pow2 rule has the same
//   caveat for scales below 2^-126.)
//   The bound is of order s / 2 (ints) or |x| / 16 (e4m3): a tile dequantised with another tile's
//   scale (transposed scales, the neighbour's block) is off by |x| |s' / s - 1| and fails it.
//
// SmoothQuant (Xiao et al., "SmoothQuant: Accurate and Efficient Post-Training Quantization for Large
// Language Models", ICML 2023, eq. 4): s_j = max|X_j|^a / max|W_j|^(1-a) over input channel j (a column
// of X [T x K], a row of W [K x N]); X' = X diag(s)^-1, W' = diag(s) W, so X' W' = X W in exact
// arithmetic while the activation outliers move into the weights. A channel with max|X_j| = 0 or
// max|W_j| = 0 gets s_j = 1. The power is ladder::math::pow (the same bits on every CPU).
//
// Determinism: every tile is computed on its own, in a fixed order inside it; tiles are shared over
// OpenMP threads, so codes and scales are the same bits for any thread count.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/math.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::quant {

enum class Elem : uint8_t { int8, int4, e4m3 };
enum class ScaleRule : uint8_t { amax, pow2 };

inline float qmax(Elem e) { return e == Elem::int8 ? 127.0f : e == Elem::int4 ? 7.0f : formats::kE4m3Max; }
inline const char* elem_name(Elem e) { return e == Elem::int8 ? "int8" : e == Elem::int4 ? "int4" : "e4m3"; }

// The quantised matrix: one code byte per element (int8 / int4: the two's complement value, int4 in
// [-8, 7]; e4m3: the bits), row-major, and one float scale per tile.
struct Quantized {
  Elem elem = Elem::int8;
  ScaleRule rule = ScaleRule::amax;
  int64_t rows = 0, cols = 0, block_rows = 1, block_cols = 1;
  std::vector<uint8_t> codes;
  Mat<float> scales;  // ceil(rows / block_rows) x ceil(cols / block_cols)

  float scale_at(int64_t r, int64_t c) const { return scales(r / block_rows, c / block_cols); }
  float element(int64_t r, int64_t c) const {  // the code's value in the element format, before scaling
    const uint8_t b = codes[static_cast<size_t>(r * cols + c)];
    return elem == Elem::e4m3 ? formats::from_e4m3(b) : static_cast<float>(static_cast<int8_t>(b));
  }
};

inline uint8_t encode_elem(float y, Elem e) {
  switch (e) {
    case Elem::int8: return static_cast<uint8_t>(formats::to_int8(y));
    case Elem::int4: return static_cast<uint8_t>(formats::to_int4(y));
    case Elem::e4m3: return formats::to_e4m3(y);
  }
  return 0;
}

// The scale of a tile whose largest magnitude is amax (see the rules above).
inline float tile_scale(float amax, Elem e, ScaleRule rule) {
  if (amax == 0.0f) return 1.0f;
  const float qm = qmax(e);
  if (rule == ScaleRule::amax) return amax / qm;
  uint8_t k = formats::to_ue8m0(amax / qm, formats::Round::up);
  while (k < 0xFE && amax / formats::from_ue8m0(k) > qm) ++k;  // fl(amax / qm) rounded below: one more
  return formats::from_ue8m0(k);
}

inline Quantized quantize(const Mat<float>& x, Elem elem, int64_t block_rows, int64_t block_cols,
                          ScaleRule rule = ScaleRule::amax) {
  require(block_rows >= 1, "quantize: block_rows = {} violates block_rows >= 1", block_rows);
  require(block_cols >= 1, "quantize: block_cols = {} violates block_cols >= 1", block_cols);
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t c = 0; c < x.cols(); ++c)
      require(std::isfinite(x(r, c)), "quantize: x({}, {}) = {} violates isfinite", r, c, x(r, c));
  Quantized q;
  q.elem = elem;
  q.rule = rule;
  q.rows = x.rows();
  q.cols = x.cols();
  q.block_rows = block_rows;
  q.block_cols = block_cols;
  q.codes.assign(static_cast<size_t>(q.rows * q.cols), 0);
  const int64_t br = (q.rows + block_rows - 1) / block_rows, bc = (q.cols + block_cols - 1) / block_cols;
  q.scales = Mat<float>::Ones(br, bc);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < br * bc; ++t) {
    const int64_t r0 = (t / bc) * block_rows, c0 = (t % bc) * block_cols;
    const int64_t r1 = std::min(r0 + block_rows, q.rows), c1 = std::min(c0 + block_cols, q.cols);
    float amax = 0.0f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x(r, c)));
    const float s = tile_scale(amax, elem, rule);
    q.scales(t / bc, t % bc) = s;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) q.codes[static_cast<size_t>(r * q.cols + c)] = encode_elem(x(r, c) / s, elem);
  }
  return q;
}

// xh(r, c) = fl(element(r, c) * scale of its tile).
inline Mat<float> dequantize(const Quantized& q) {
  Mat<float> x(q.rows, q.cols);
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) x(r, c) = q.element(r, c) * q.scale_at(r, c);
  return x;
}

// The bound on |dequantize(q)(r, c) - x| for an element of value x in a tile of scale s (derived above).
inline double dequant_bound(Elem e, double s, double x) {
  const double u = 0x1p-24, ax = std::fabs(x);
  const double y = ax / s * (1 + u);
  const double h = e == Elem::e4m3 ? 0x1p-4 * y + 0x1p-10 : 0.5;
  return s * h * (1 + u) + u * ax * (2 + u);
}

// The named granularities.
inline Quantized per_tensor(const Mat<float>& x, Elem e, ScaleRule r = ScaleRule::amax) {
  return quantize(x, e, std::max<int64_t>(x.rows(), 1), std::max<int64_t>(x.cols(), 1), r);
}
inline Quantized per_channel(const Mat<float>& w, Elem e, ScaleRule r = ScaleRule::amax) {
  return quantize(w, e, std::max<int64_t>(w.rows(), 1), 1, r);
}
inline Quantized per_token(const Mat<float>& x, Elem e, ScaleRule r = ScaleRule::amax) {
  return quantize(x, e, 1, std::max<int64_t>(x.cols(), 1), r);
}
inline Quantized tiles_1x128(const Mat<float>& x, ScaleRule r = ScaleRule::amax) {
  return quantize(x, Elem::e4m3, 1, 128, r);
}
inline Quantized blocks_128x128(const Mat<float>& w, ScaleRule r = ScaleRule::amax) {
  return quantize(w, Elem::e4m3, 128, 128, r);
}
inline Quantized int4_groups(const Mat<float>& w, int64_t group, ScaleRule r = ScaleRule::amax) {
  require(group >= 1, "int4_groups: group = {} violates group >= 1", group);
  return quantize(w, Elem::int4, group, 1, r);
}

// int4 codes packed two per byte along each row (formats::pack_int4: element 2i in the low nibble),
// cols / 2 bytes per row; and back.
inline std::vector<uint8_t> pack_int4_rows(const Quantized& q) {
  require(q.elem == Elem::int4, "pack_int4_rows: elem = {} violates elem == int4", elem_name(q.elem));
  require(q.cols % 2 == 0, "pack_int4_rows: cols = {} violates cols % 2 == 0", q.cols);
  std::vector<uint8_t> p(q.codes.size() / 2);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = formats::pack_int4(static_cast<int8_t>(q.codes[2 * i]), static_cast<int8_t>(q.codes[2 * i + 1]));
  return p;
}
inline std::vector<uint8_t> unpack_int4_rows(const std::vector<uint8_t>& p) {
  std::vector<uint8_t> c(2 * p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    c[2 * i] = static_cast<uint8_t>(formats::unpack_int4_lo(p[i]));
    c[2 * i + 1] = static_cast<uint8_t>(formats::unpack_int4_hi(p[i]));
  }
  return c;
}

// SmoothQuant's per-input-channel smoothing factors for X [T x K] and W [K x N], 0 <= alpha <= 1.
inline std::vector<float> smoothquant_scales(const Mat<float>& x, const Mat<float>& w, double alpha) {
  require(x.cols() == w.rows(), "smoothquant_scales: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  require(alpha >= 0 && alpha <= 1, "smoothquant_scales: alpha = {} violates 0 <= alpha <= 1", alpha);
  std::vector<float> s(static_cast<size_t>(x.cols()), 1.0f);
  for (int64_t j = 0; j < x.cols(); ++j) {
    double ax = 0, aw = 0;
    for (int64_t t = 0; t < x.rows(); ++t) ax = std::max(ax, std::fabs(static_cast<double>(x(t, j))));
    for (int64_t n = 0; n < w.cols(); ++n) aw = std::max(aw, std::fabs(static_cast<double>(w(j, n))));
    require(std::isfinite(ax) && std::isfinite(aw), "smoothquant_scales: channel {} violates finite inputs", j);
    if (ax > 0 && aw > 0) s[static_cast<size_t>(j)] = static_cast<float>(math::pow(ax, alpha) / math::pow(aw, 1 - alpha));
  }
  return s;
}

// X' = X diag(s)^-1 and W' = diag(s) W, in place.
inline void smooth(Mat<float>& x, Mat<float>& w, const std::vector<float>& s) {
  require(static_cast<int64_t>(s.size()) == x.cols() && x.cols() == w.rows(),
          "smooth: s.size = {}, x.cols = {}, w.rows = {} violate all equal", s.size(), x.cols(), w.rows());
  for (int64_t j = 0; j < x.cols(); ++j) {
    x.col(j) /= s[static_cast<size_t>(j)];
    w.row(j) *= s[static_cast<size_t>(j)];
  }
}

}  // namespace ladder::quant
