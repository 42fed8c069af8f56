// tests/test_quant.cpp -- ladder/core/quant.hpp: every granularity, element format and scale rule
// dequantises within the derived per-element bound (dequant_bound; the derivation is in quant.hpp),
// zero tiles are exact, and wrong candidates fail the same bound: scales transposed, a tile dequantised
// with its neighbour's scale, power-of-two scales rounded down (they overflow). Codes and scales are the
// same bits for 1, 2 and 3 OpenMP threads. SmoothQuant's smoothing: X' W' = X W to rounding, the
// maxima balanced at alpha = 1/2, and the per-token int8 product more accurate after smoothing.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ladder/core/quant.hpp"
#include "ladder/core/rng.hpp"

using namespace ladder;
using namespace ladder::quant;

namespace {

// 384 x 320 (the last tile column is partial for 128-wide tiles): normal values times a row factor,
// a column factor and a per-128x128-block factor (so neighbouring tiles of every granularity, and
// transposed blocks, have different scales), a few outlier columns, and one all-zero 128 x 128 block.
Mat<float> data(uint64_t seed) {
  Rng rng(seed);
  Mat<float> x(384, 320);
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t c = 0; c < x.cols(); ++c) {
      const double block = std::ldexp(1.0, int((r / 128 + 2 * (c / 128)) % 3));
      const double outlier = c % 53 == 7 ? 30.0 : 1.0;
      x(r, c) = float(rng.normal() * (1 + r % 7) * (1 + c % 5) * block * outlier);
    }
  x.block(128, 0, 128, 128).setZero();
  return x;
}

// Elements of xh outside the bound of the reference quantisation q (its scales, its element format).
int64_t violations(const Mat<float>& x, const Mat<float>& xh, const Quantized& q, double* worst = nullptr) {
  int64_t bad = 0;
  double w = 0;
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t c = 0; c < x.cols(); ++c) {
      const double b = dequant_bound(q.elem, q.scale_at(r, c), x(r, c));
      const double e = std::fabs(double(xh(r, c)) - double(x(r, c)));
      bad += !(e <= b);
      if (b > 0) w = std::max(w, e / b);
    }
  if (worst) *worst = w;
  return bad;
}

struct Case {
  std::string name;
  std::function<Quantized(const Mat<float>&)> quant;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  for (ScaleRule rule : {ScaleRule::amax, ScaleRule::pow2}) {
    const std::string rn = rule == ScaleRule::amax ? " amax" : " pow2";
    for (Elem e : {Elem::int8, Elem::e4m3, Elem::int4}) {
      const std::string en = std::string(" ") + elem_name(e) + rn;
      v.push_back({"per_tensor" + en, [=](const Mat<float>& x) { return per_tensor(x, e, rule); }});
      v.push_back({"per_channel" + en, [=](const Mat<float>& x) { return per_channel(x, e, rule); }});
      v.push_back({"per_token" + en, [=](const Mat<float>& x) { return per_token(x, e, rule); }});
    }
    v.push_back({"tiles_1x128" + rn, [=](const Mat<float>& x) { return tiles_1x128(x, rule); }});
    v.push_back({"blocks_128x128" + rn, [=](const Mat<float>& x) { return blocks_128x128(x, rule); }});
    v.push_back({"int4_groups 32" + rn, [=](const Mat<float>& x) { return int4_groups(x, 32, rule); }});
    v.push_back({"int4_groups 128" + rn, [=](const Mat<float>& x) { return int4_groups(x, 128, rule); }});
  }
  return v;
}

// The scales of q with each tile given its right-hand neighbour's (or, in a one-column grid, the next
// row's; wrapping), and transposed over the largest square corner of the grid.
Quantized neighbour_scales(Quantized q) {
  const Mat<float> s = q.scales;
  for (int64_t i = 0; i < s.rows(); ++i)
    for (int64_t j = 0; j < s.cols(); ++j)
      q.scales(i, j) = s.cols() > 1 ? s(i, (j + 1) % s.cols()) : s((i + 1) % s.rows(), j);
  return q;
}
Quantized transposed_scales(Quantized q) {
  const int64_t n = std::min(q.scales.rows(), q.scales.cols());
  q.scales.topLeftCorner(n, n) = Mat<float>(q.scales.topLeftCorner(n, n).transpose());
  return q;
}

TEST_CASE("quant: dequant(quant(x)) within the derived bound; wrong scales fail it") {
  const Mat<float> x = data(7);
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    const Quantized q = k.quant(x);
    double worst = 0;
    CHECK(violations(x, dequantize(q), q, &worst) == 0);
    CHECK(worst > 0.5);  // the bound is not loose: some element comes near it (0.94 to 1.0 seen)
    if (q.scales.size() > 1) CHECK(violations(x, dequantize(neighbour_scales(q)), q) > 0);
    if (q.scales.rows() > 1 && q.scales.cols() > 1) CHECK(violations(x, dequantize(transposed_scales(q)), q) > 0);
    MESSAGE(k.name << ": " << q.scales.rows() << " x " << q.scales.cols() << " scales, worst error / bound "
                   << worst);
  }
}

TEST_CASE("quant: zero tiles have scale 1, zero codes and dequantise to exact zeros") {
  const Mat<float> x = data(8);
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    const Quantized q = k.quant(x);
    const Mat<float> xh = dequantize(q);
    int64_t bad = 0, zero_tiles = 0;
    for (int64_t i = 0; i < q.scales.rows(); ++i)
      for (int64_t j = 0; j < q.scales.cols(); ++j) {
        const int64_t r0 = i * q.block_rows, c0 = j * q.block_cols;
        const int64_t nr = std::min(q.block_rows, q.rows - r0), nc = std::min(q.block_cols, q.cols - c0);
        if (x.block(r0, c0, nr, nc).cwiseAbs().maxCoeff() != 0.0f) continue;
        ++zero_tiles;
        bad += q.scales(i, j) != 1.0f || xh.block(r0, c0, nr, nc).cwiseAbs().maxCoeff() != 0.0f;
      }
    CHECK(bad == 0);
    if (q.block_rows <= 128 && q.block_cols <= 128) CHECK(zero_tiles > 0);
  }
}

TEST_CASE("quant: power-of-two scales are the smallest that do not overflow") {
  const Mat<float> x = data(9);
  for (Elem e : {Elem::int8, Elem::e4m3, Elem::int4}) {
    CAPTURE(elem_name(e));
    const Quantized q = quantize(x, e, 1, 64, ScaleRule::pow2);
    int64_t bad = 0, planted = 0;
    for (int64_t i = 0; i < q.scales.rows(); ++i)
      for (int64_t j = 0; j < q.scales.cols(); ++j) {
        const float amax = x.block(i, j * 64, 1, 64).cwiseAbs().maxCoeff(), s = q.scales(i, j);
        if (amax == 0) continue;
        bad += formats::from_ue8m0(formats::to_ue8m0(s, formats::Round::toward_zero)) != s;  // 2^k
        bad += !(amax / s <= qmax(e)) || !(amax / s > qmax(e) / 2);  // fits, and 2^(k-1) would not
        // Planted: the scale rounded down (toward zero) overflows the element format somewhere.
        const float down = formats::from_ue8m0(formats::to_ue8m0(amax / qmax(e), formats::Round::toward_zero));
        planted += amax / down > qmax(e);
      }
    CHECK(bad == 0);
    CHECK(planted > 0);
  }
  // An exact power-of-two quotient needs no rounding: amax = 448 * 2^-3 gives s = 2^-3.
  Mat<float> one = Mat<float>::Constant(1, 4, 56.0f);
  CHECK(tiles_1x128(one, ScaleRule::pow2).scales(0, 0) == 0.125f);
  CHECK(tiles_1x128(one).scales(0, 0) == 0.125f);
}

TEST_CASE("quant: the same bits for any thread count") {
  const Mat<float> x = data(10);
  const int saved = omp_get_max_threads();
  for (const Case& k : cases()) {
    CAPTURE(k.name);
    omp_set_num_threads(1);
    const Quantized a = k.quant(x);
    for (int n : {2, 3}) {
      omp_set_num_threads(n);
      const Quantized b = k.quant(x);
      CHECK(a.codes == b.codes);
      CHECK(a.scales == b.scales);
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("quant: int4 packing and bad input") {
  const Quantized q = int4_groups(data(11), 64);
  const std::vector<uint8_t> p = pack_int4_rows(q);
  CHECK(p.size() == q.codes.size() / 2);
  CHECK(unpack_int4_rows(p) == q.codes);
  CHECK((p[0] & 0x0F) == (q.codes[0] & 0x0F));  // element 0 in the low nibble
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Mat<float> bad = Mat<float>::Ones(2, 4);
  bad(1, 2) = std::nanf("");
  CHECK(message([&] { per_token(bad, Elem::int8); }).find("x(1, 2) = nan violates isfinite") != std::string::npos);
  CHECK(message([&] { int4_groups(bad, 0); }).find("group = 0 violates group >= 1") != std::string::npos);
  CHECK(message([&] { pack_int4_rows(per_token(Mat<float>::Ones(2, 3), Elem::int4)); }).find("cols % 2") !=
        std::string::npos);
}

// X [T x K] with outlier channels, W [K x N].
void smooth_data(Mat<float>& x, Mat<float>& w) {
  Rng rng(12);
  x.resize(64, 256);
  w.resize(256, 96);
  for (int64_t t = 0; t < x.rows(); ++t)
    for (int64_t j = 0; j < x.cols(); ++j) x(t, j) = float(rng.normal() * (j % 37 == 3 ? 60.0 : 1.0));
  for (auto& v : w.reshaped()) v = float(0.05 * rng.normal());
}

TEST_CASE("quant: SmoothQuant smoothing") {
  Mat<float> x, w;
  smooth_data(x, w);
  const std::vector<float> s = smoothquant_scales(x, w, 0.5);
  Mat<float> xs = x, ws = w;
  smooth(xs, ws, s);
  // alpha = 1/2 balances the channel maxima: max|X'_j| = max|W'_j| = sqrt(max|X_j| max|W_j|).
  int64_t unbalanced = 0;
  for (int64_t j = 0; j < x.cols(); ++j) {
    const double ax = xs.col(j).cwiseAbs().maxCoeff(), aw = ws.row(j).cwiseAbs().maxCoeff();
    unbalanced += std::fabs(ax - aw) > 1e-5 * ax;
  }
  CHECK(unbalanced == 0);
  // X' W' = X W up to the two roundings of each product term: |diff| <= 3u sum_k |x_tk| |w_kn|.
  const auto product_violations = [&](const Mat<float>& a, const Mat<float>& b) {
    const Mat<double> ref = x.cast<double>() * w.cast<double>(), got = a.cast<double>() * b.cast<double>();
    const Mat<double> mag = x.cast<double>().cwiseAbs() * w.cast<double>().cwiseAbs();
    return ((ref - got).cwiseAbs().array() > 3 * 0x1p-24 * mag.array()).count();
  };
  CHECK(product_violations(xs, ws) == 0);
  Mat<float> only_x = x, w_unused = w;
  smooth(only_x, w_unused, s);
  CHECK(product_violations(only_x, w) > 0);  // planted: X smoothed, W not
  // Planted: max|X_j|^a * max|W_j|^(1-a) (multiplied, not divided) does not balance the maxima.
  std::vector<float> wrong = s;
  for (int64_t j = 0; j < x.cols(); ++j)
    wrong[size_t(j)] = float(std::sqrt(double(x.col(j).cwiseAbs().maxCoeff()) * w.row(j).cwiseAbs().maxCoeff()));
  Mat<float> xw = x, ww = w;
  smooth(xw, ww, wrong);
  CHECK(std::fabs(xw.col(3).cwiseAbs().maxCoeff() - ww.row(3).cwiseAbs().maxCoeff()) > 1e-3);
  // SmoothQuant's point: per-token int8 activations x per-channel int8 weights lose less after smoothing.
  const auto a8w8_error = [&](const Mat<float>& a, const Mat<float>& b) {
    const Mat<double> got = dequantize(per_token(a, Elem::int8)).cast<double>() *
                            dequantize(per_channel(b, Elem::int8)).cast<double>();
    return (got - x.cast<double>() * w.cast<double>()).cwiseAbs().maxCoeff();
  };
  const double plain = a8w8_error(x, w), smoothed = a8w8_error(xs, ws);
  MESSAGE("A8W8 max |error| of X W: " << plain << " plain, " << smoothed << " smoothed (alpha = 0.5)");
  CHECK(smoothed < 0.5 * plain);
  CHECK(smoothquant_scales(Mat<float>::Zero(2, 3), Mat<float>::Ones(3, 2), 0.5) == std::vector<float>(3, 1.0f));
}

}  // namespace
