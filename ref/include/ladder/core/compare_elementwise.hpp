// ladder/core/compare_elementwise.hpp -- the element-wise tolerance rule, for outputs whose scale
// varies element to element (probabilities, attention weights). Included by core/compare.hpp.
//
// Why not max-abs: a softmax row of 4096 logits ~ N(0, 9) holds probabilities from 1e-2 down to 1e-12.
// The largest absolute error sits at the largest entries, so max|c - o| <= k max|b - o| + floor lets any
// entry below ~1e-7 be zeroed, scaled by 20 or made negative. Each element is judged at its own scale:
//
//   s_i   = max(|o_i|, tiny)            (tiny = smallest normal number of the candidate's dtype: below
//                                        it the dtype has no relative precision left; with
//                                        Tolerance::ftz an exact 0 for a subnormal oracle value is equal)
//   rel_i = |c_i - o_i| / s_i
//   B(q)  = max rel error of the same-precision baseline over elements of binade q (s in [2^q, 2^q+1)),
//           made non-increasing in magnitude: B'(q) = max_{q' >= q} B(q'). A softmax entry's rounding
//           error grows with x_max - x_i = -log(p_i) + log(d), so a smaller entry is never allowed
//           less than a larger one, and a bucket the baseline happened to get exactly right still
//           inherits the error of its larger neighbours.
//   pass  iff  rel_i <= k B'(q_i) + (floor_ulps + sqrt(min(cols, 1024))) * eps + device_rel   for every
//   finite element (the sqrt term only for probability rows: the normaliser's summation error, common
//   to the row, for sums in short runs; see below)
//   (device_rel: Tolerance's allowance for a device's math library, relative per element by derivation),
// after the NaN/inf positions matched as in compare(). With `probability` set the structural facts of
// a probability row hold too, whatever the precision: no negative entry; exactly 0 where `mask` (the
// input) is -inf (which makes a fully masked row all zeros, the contract's value); and each row's sum
// within k * (the baseline's worst row-sum error) + the same floor, of the oracle's row sum.
#pragma once
// The tail of compare.hpp (which includes this file last); included on its own, it brings compare.hpp.
#include "ladder/core/compare.hpp"
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ladder/core/tensor.hpp"

namespace ladder {

inline CompareReport compare_elementwise(const Array<double>& oracle, const Array<double>& cand,
                                         const Array<double>& baseline, Tolerance tol, bool probability = false,
                                         const Array<double>* mask = nullptr) {
  CompareReport r;
  r.rule = "elementwise";
  r.n = oracle.size();
  r.shape = oracle.shape;
  if (cand.shape != oracle.shape) {
    r.fail("shape " + shape_str(cand.shape) + " where the oracle has " + shape_str(oracle.shape));
    r.pct_within = 0;
    return r;
  }
  require(baseline.shape == oracle.shape, "compare: baseline shape {} differs from oracle shape {}",
          shape_str(baseline.shape), shape_str(oracle.shape));
  require(!mask || mask->shape == oracle.shape, "compare: mask shape {} differs from oracle shape {}",
          mask ? shape_str(mask->shape) : "", shape_str(oracle.shape));
  const double tiny = detail::smallest_normal(tol);
  r.ftz = tol.ftz;
  auto scale = [tiny](double o) { return std::max(std::abs(o), tiny); };
  // Binade of s: ilogb in [-1075, 1024); offset so it indexes a vector.
  constexpr int kOff = 1100, kBins = 2200;
  auto bin = [](double s) { return std::ilogb(s) + kOff; };

  std::vector<double> B(kBins, 0.0);
  for (int64_t i = 0; i < r.n; ++i) {
    const double o = oracle.data[i], b = baseline.data[i];
    if (!std::isfinite(o) || !std::isfinite(b)) continue;
    const double s = scale(o);
    B[bin(s)] = std::max(B[bin(s)], std::abs(b - o) / s);
  }
  for (int q = kBins - 2; q >= 0; --q) B[q] = std::max(B[q], B[q + 1]);  // B'(q)
  // device_rel: a device math library's excess (device_math.hpp). For a probability row every entry
  // shares the normaliser's rounding, d = sum of `cols` terms, whose relative error depends on the
  // summation order, and the fp64 baseline, being the oracle's own algorithm, shows none of it. The
  // allowance is sqrt(min(cols, kSumRun)) eps, kSumRun = 1024: any order for a row of up to 1024 terms;
  // beyond, a sum in short sequential runs combined as a tree (a block's threads, a vector's lanes), not
  // one run over the row. Measured on a 2^20 row of 3 N(0, 1) logits (float32, relative error of d):
  // runs of 4096 1.3e-6, of 1024 2e-7, pairwise 5e-8 -- against (4 + 32) eps = 4.3e-6 with k B' on top;
  // 16 lanes of 2^16 each 7e-5, in index order 1.9e-3. So a row scaled by 1 + 1e-5 fails at every length.
  constexpr double kSumRun = 1024;
  const double sum_ulps = probability ? std::sqrt(std::min(static_cast<double>(oracle.cols()), kSumRun)) : 0.0;
  r.floor = (tol.floor_ulps + sum_ulps) * tol.eps + tol.device_rel;
  // A float64 candidate (Tolerance::bound): each element within its derived bound, no baseline or floor.
  require(tol.bound.empty() || static_cast<int64_t>(tol.bound.size()) == r.n,
          "compare_elementwise: {} derived bounds for {} elements", tol.bound.size(), r.n);
  r.derived = !tol.bound.empty();
  if (r.derived) r.floor = 0;
  auto allowed_at = [&](int64_t i, double s) {
    return r.derived ? tol.bound[static_cast<size_t>(i)] / s : tol.k * B[bin(s)] + r.floor;
  };

  double num = 0, den = 0, dot = 0, cc = 0, worst = -1;
  int64_t within = 0, first_special = -1, first_bad = -1;
  for (int64_t i = 0; i < r.n; ++i) {
    const double o = oracle.data[i], c = cand.data[i];
    const int ko = detail::special_kind(o), kc = detail::special_kind(c);
    if (ko != kc) {
      if (first_special < 0) first_special = i;
      continue;
    }
    if (ko != 0 || (tol.ftz && c == 0 && std::abs(o) < tiny)) {  // FTZ: Tolerance::ftz
      ++within;
      continue;
    }
    const double s = scale(o), e = std::abs(c - o), rel = e / s;
    const double allowed = allowed_at(i, s);
    if (e > r.max_abs_err || r.max_abs_index < 0) r.max_abs_err = e, r.max_abs_index = i;
    if (rel > r.max_rel_err || r.max_rel_index < 0) r.max_rel_err = rel, r.max_rel_index = i;
    const double ratio = allowed > 0 ? rel / allowed : (rel > 0 ? HUGE_VAL : 0.0);
    if (ratio > worst) worst = ratio, r.tol = allowed * s, r.baseline_err = r.derived ? 0 : B[bin(s)];
    if (rel <= allowed)
      ++within;
    else if (first_bad < 0)
      first_bad = i;
    num += e * e, den += o * o, dot += c * o, cc += c * c;
  }
  r.nmse = den > 0 ? num / den : num;
  r.cos_diff = (den > 0 && cc > 0) ? 1.0 - dot / std::sqrt(den * cc) : (num > 0 ? 1.0 : 0.0);
  r.pct_within = r.n ? 100.0 * static_cast<double>(within) / static_cast<double>(r.n) : 100.0;
  if (first_special >= 0)
    r.fail(fmt::format("NaN/inf position mismatch at {}: candidate {} where the oracle has {}",
                       index_str(r.shape, first_special), cand.data[first_special], oracle.data[first_special]));
  if (first_bad >= 0) {
    const double o = oracle.data[first_bad], s = scale(o);
    const double rel = std::abs(cand.data[first_bad] - o) / s;
    if (r.derived)
      r.fail(fmt::format("element {} is {:.17g} where the oracle has {:.17g}: rel err {:.3e} exceeds its derived "
                         "float64 bound {:.3e} (the oracle's error + the candidate's); {} elements fail",
                         index_str(r.shape, first_bad), cand.data[first_bad], o, rel, allowed_at(first_bad, s),
                         r.n - within - (first_special >= 0)));
    else
      r.fail(fmt::format("element {} is {:.9g} where the oracle has {:.9g}: rel err {:.3e} exceeds {:.3e} "
                         "(k * baseline rel err {:.3e} at this magnitude + floor {:.3e}); {} elements fail",
                         index_str(r.shape, first_bad), cand.data[first_bad], o, rel, allowed_at(first_bad, s),
                         B[bin(s)], r.floor, r.n - within - (first_special >= 0)));
  }
  if (probability) {
    int64_t neg = -1, nneg = 0, masked = -1, nmasked = 0;
    for (int64_t i = 0; i < r.n; ++i) {
      if (cand.data[i] < 0 && ++nneg && neg < 0) neg = i;
      // a row the oracle makes NaN (a NaN or +inf in it) has no probability facts; its NaNs matched above
      if (mask && mask->data[i] == -std::numeric_limits<double>::infinity() && !std::isnan(oracle.data[i]) &&
          cand.data[i] != 0 && ++nmasked && masked < 0)
        masked = i;
    }
    if (neg >= 0)
      r.fail(fmt::format("negative probability {:.9g} at {} ({} negative entries)", cand.data[neg],
                         index_str(r.shape, neg), nneg));
    if (masked >= 0)
      r.fail(fmt::format("{:.9g} at {} where the input is -inf (exactly 0 required; {} such entries)",
                         cand.data[masked], index_str(r.shape, masked), nmasked));
    const int64_t rows = oracle.rows(), cols = oracle.cols();
    std::vector<double> so(rows, 0), sc(rows, 0), sb(rows, 0), sd(rows, 0);
    double eb = 0;
    for (int64_t row = 0; row < rows; ++row) {
      double mag = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t i = row * cols + j;
        so[row] += oracle.data[i], sc[row] += cand.data[i], sb[row] += baseline.data[i];
        if (r.derived) sd[row] += tol.bound[static_cast<size_t>(i)], mag += std::abs(oracle.data[i]) + std::abs(cand.data[i]);
      }
      if (std::isfinite(sb[row]) && std::isfinite(so[row])) eb = std::max(eb, std::abs(sb[row] - so[row]));
      // derived: |sum c - sum o| <= sum_i bound_i, plus the rounding of these two sums of `cols` terms
      // (gamma_{cols - 1} sum |terms| each, core/fp64_bound.hpp), taken relative to the row sum below.
      const double g = (cols - 1) * 0x1p-53 / (1 - (cols - 1) * 0x1p-53);
      if (r.derived) sd[row] = (sd[row] + g * mag) / std::max(1.0, std::abs(so[row]));
    }
    const double sum_tol = tol.k * eb + r.floor;
    for (int64_t row = 0; row < rows; ++row)
      if (!std::isnan(so[row]) &&
          !(std::abs(sc[row] - so[row]) <= (r.derived ? sd[row] : sum_tol) * std::max(1.0, std::abs(so[row])))) {
        if (r.derived) {
          r.fail(fmt::format("row {} sums to {:.17g} where the oracle's row sums to {:.17g} (|diff| {:.3e} exceeds the "
                             "sum of its elements' derived float64 bounds {:.3e})",
                             index_str(Shape(oracle.shape.begin(), oracle.shape.end() - 1), row), sc[row], so[row],
                             std::abs(sc[row] - so[row]), sd[row] * std::max(1.0, std::abs(so[row]))));
          break;
        }
        r.fail(fmt::format("row {} sums to {:.12g} where the oracle's row sums to {:.12g} (|diff| {:.3e} exceeds "
                           "k * baseline's worst row-sum err {:.3e} + floor {:.3e})",
                           index_str(Shape(oracle.shape.begin(), oracle.shape.end() - 1), row), sc[row], so[row],
                           std::abs(sc[row] - so[row]), eb, r.floor));
        break;
      }
  }
  r.pass = r.failures.empty();
  return r;
}

}  // namespace ladder
