// ladder/core/compare.hpp -- the tolerance rule (chapter 01 §7) and its report.
//
// A candidate is compared with the fp64 oracle:
//   1. shapes must be equal;
//   2. NaN, +inf and -inf must occur at exactly the same positions;
//   3. on the finite positions, err = max |candidate - oracle| must satisfy
//        err <= k * err_baseline + floor
//      where err_baseline is the same error of the stage's same-precision baseline rung (what an
//      honest textbook implementation at the candidate's precision achieves), k = 2 forward and 3
//      backward, and floor = floor_ulps * eps(output dtype) * max|oracle| (a few ULPs at the output's
//      scale, so an exact baseline does not demand an exact candidate).
//   Per slice: the leading axes of an output that index independent computations (a batch row and
//   head of attention, a sequence of MLA, a token of MoE: Tolerance::slice_axes, from the contract)
//   are judged apart, each with its own err_baseline and max|oracle| -- a head whose true values are
//   1e-9 is checked at 1e-9, not at the 1e-6 x max|O| of the whole tensor (zeroing it fails).
// The tolerance is never tuned per tensor: k, floor_ulps and the baseline are fixed per stage.
// A float64 candidate is judged instead by Tolerance::bound, per element: the oracle's error bound plus
// the candidate's, derived from u = 2^-53 and the magnitudes of the element's terms (core/fp64_bound.hpp).
// The report names the max abs and rel error with their index, NMSE, cosine difference and the
// share of elements within tolerance. Integer outputs are compared exactly (compare_exact).
//
// That max-abs form fits outputs of one scale (O, gradients, scores). Outputs whose scale varies
// element to element -- probabilities span 1 down to 1e-38 in one row, and an error of 1e-8 is
// rounding at 0.1 but a wrong answer at 1e-9 -- are judged by compare_elementwise (below): every
// element at its own scale, plus the structural facts of a probability row. The stage's contract
// (core/contract.hpp) says which form each output uses and why.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ladder/core/tensor.hpp"

namespace ladder {

struct Tolerance {
  double k = 2.0;           // 2 forward, 3 backward
  double floor_ulps = 4.0;  // floor in ULPs of the output dtype at the output's scale
  double eps = std::numeric_limits<float>::epsilon();  // eps of the output dtype
  // Relative error the device's math library may add to each output (CUDA's expf is 2 ulp where
  // glibc's is correctly rounded), derived in ladder/core/device_math.hpp; 0 for CPU candidates.
  // The max-abs rule adds device_rel * max|oracle| to the floor.
  double device_rel = 0;
  // The rule per independent slice: the leading `slice_axes` axes index independent computations (a
  // batch row and head of attention, a sequence of MLA, a token of MoE), and each slice is judged with
  // its own scale and its own baseline error, so a slice whose true values are small is checked at its
  // own scale instead of hiding under the tensor's largest (its baseline error taken as at least the
  // largest relative baseline error of any slice times its scale: a one-element slice's own is luck).
  // 0: one scale for the whole tensor.
  // slice_names: the axes' names for the report ("B, H"), from the output's symbolic shape.
  int slice_axes = 0;
  std::string slice_names = {};
  // Flush-to-zero: an oracle value below the candidate dtype's smallest normal number (a subnormal)
  // matched by an exact 0 counts as equal -- what GPUs do in fast-math and some kernels on purpose.
  bool ftz = false;
  // Outputs judged together (OutputSpec::judged_with): per slice, the group's largest max|oracle| and
  // baseline error, which replace this output's own where larger. An output that is exactly zero where
  // its group is not (dQ and dK of a one-key attention, beside dV) is then judged at the group's scale.
  std::vector<double> group_scale = {}, group_berr = {};
  // A float64 candidate's derived allowance per element (Contract::fp64_bound, core/fp64_bound.hpp: the
  // oracle's error bound plus the candidate's). Non-empty: it is the tolerance of each element, replacing
  // k x baseline + floor (the report still names the slice of the worst element).
  std::vector<double> bound = {};
};

// "[i, j, k]" for flat index `flat` of a C-order array of shape s ("[-]" for none).
inline std::string index_str(const Shape& s, int64_t flat) {
  if (flat < 0) return "[-]";
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t d = s.size(); d-- > 0;) {
    if (s[d] > 0) idx[d] = flat % s[d], flat /= s[d];
  }
  return shape_str(idx.empty() ? Shape{flat} : idx);
}

struct CompareReport {
  bool pass = false;
  std::string failure;                // empty when pass; else the first rule that failed
  std::vector<std::string> failures;  // every rule that failed, one line each
  std::string rule = "max_abs";
  Shape shape;
  int64_t n = 0;
  double max_abs_err = 0, max_rel_err = 0;
  int64_t max_abs_index = -1, max_rel_index = -1;
  double nmse = 0, cos_diff = 0, pct_within = 100;
  double baseline_err = 0, floor = 0, tol = 0;  // per-slice rule: those of the worst element's slice
  std::string slice;                              // per-slice rule: the worst element's slice, "[0, 3] (B, H)"
  bool ftz = false;                               // judged with flush-to-zero (Tolerance::ftz)
  bool derived = false;                           // judged by Tolerance::bound (a float64 candidate)

  std::string text() const {
    std::string s = pass ? "PASS (" + rule + " rule)" : "FAIL (" + rule + " rule): " + failure;
    for (size_t i = 1; i < failures.size(); ++i) s += "\n  also: " + failures[i];
    s += fmt::format(
        "\n  max abs err {:.3e} at {}, max rel err {:.3e} at {}\n  NMSE {:.3e}, cosine diff {:.3e}, "
        "{:.2f}% of {} elements within tolerance\n",
        max_abs_err, index_str(shape, max_abs_index), max_rel_err, index_str(shape, max_rel_index), nmse, cos_diff,
        pct_within, n);
    if (derived)
      s += fmt::format("  tolerance per element = the derived float64 bound (the oracle's error + the candidate's, "
                       "core/fp64_bound.hpp); at the worst element {:.3e}{}",
                       tol, slice.empty() ? std::string() : ", slice " + slice);
    else if (rule == "elementwise")
      s += fmt::format("  tolerance per element = (k * baseline rel err at its magnitude + floor) * |oracle|; at the "
                       "worst element {:.3e} (baseline rel err {:.3e}, floor {:.3e})",
                       tol, baseline_err, floor);
    else if (!slice.empty())
      s += fmt::format("  tolerance per slice {} = k * the slice's baseline err + floor at its scale; at slice {}: "
                       "{:.3e} = k * {:.3e} + {:.3e}",
                       slice.substr(slice.find('(')), slice, tol, baseline_err, floor);
    else
      s += fmt::format("  tolerance {:.3e} = k * baseline err {:.3e} + floor {:.3e}", tol, baseline_err, floor);
    if (ftz) s += "\n  flush-to-zero: a subnormal oracle value matched by 0 counts as equal";
    return s;
  }
  void fail(std::string f) {
    if (failure.empty()) failure = f;
    failures.push_back(std::move(f));
  }
};

namespace detail {
// The smallest normal number of the candidate's dtype (float32 or float64, told apart by eps).
inline double smallest_normal(const Tolerance& t) {
  return t.eps > 0x1p-40 ? static_cast<double>(std::numeric_limits<float>::min()) : std::numeric_limits<double>::min();
}
inline int special_kind(double v) {  // 0 finite, 1 NaN, 2 +inf, 3 -inf
  if (std::isnan(v)) return 1;
  if (std::isinf(v)) return v > 0 ? 2 : 3;
  return 0;
}
// Max |b - oracle| over positions where the oracle is finite and b is finite.
template <class B>
double max_abs_err(const Array<double>& oracle, const Array<B>& b) {
  double e = 0;
  for (int64_t i = 0; i < oracle.size(); ++i) {
    const double o = oracle.data[i], v = static_cast<double>(b.data[i]);
    if (std::isfinite(o) && std::isfinite(v)) e = std::max(e, std::abs(v - o));
  }
  return e;
}
}  // namespace detail

// Candidate C and baseline B at the candidate's precision vs the fp64 oracle.
template <class C, class B>
CompareReport compare(const Array<double>& oracle, const Array<C>& cand, const Array<B>& baseline, Tolerance tol) {
  CompareReport r;
  r.n = oracle.size();
  r.shape = oracle.shape;
  if (cand.shape != oracle.shape) {
    r.fail("shape " + shape_str(cand.shape) + " where the oracle has " + shape_str(oracle.shape));
    r.pct_within = 0;
    return r;
  }
  require(baseline.shape == oracle.shape, "compare: baseline shape {} differs from oracle shape {}",
          shape_str(baseline.shape), shape_str(oracle.shape));

  // One tolerance per slice (Tolerance::slice_axes): k x the slice's baseline error + the floor at the
  // slice's scale.
  require(tol.slice_axes >= 0 && tol.slice_axes <= static_cast<int>(oracle.shape.size()),
          "compare: slice_axes = {} violates 0 <= slice_axes <= the output's rank {}", tol.slice_axes,
          oracle.shape.size());
  const int sa = tol.slice_axes;
  int64_t slices = 1;
  for (int d = 0; d < sa; ++d) slices *= oracle.shape[static_cast<size_t>(d)];
  const int64_t per = slices > 0 ? r.n / slices : 0;
  std::vector<double> s_tol(static_cast<size_t>(slices)), s_floor(s_tol.size()), s_berr(s_tol.size()),
      s_scale(s_tol.size());
  double rel_berr = 0;  // the baseline's error relative to its slice's scale, the largest over the slices
  for (int64_t s = 0; s < slices; ++s) {
    double scale = 0, berr = 0;
    for (int64_t i = s * per; i < (s + 1) * per; ++i) {
      const double o = oracle.data[i], v = static_cast<double>(baseline.data[i]);
      if (std::isfinite(o)) scale = std::max(scale, std::abs(o));
      if (std::isfinite(o) && std::isfinite(v)) berr = std::max(berr, std::abs(v - o));
    }
    const size_t k = static_cast<size_t>(s);
    if (k < tol.group_scale.size()) scale = std::max(scale, tol.group_scale[k]);
    if (k < tol.group_berr.size()) berr = std::max(berr, tol.group_berr[k]);
    s_berr[k] = berr, s_scale[k] = scale;
    if (scale > 0) rel_berr = std::max(rel_berr, berr / scale);
  }
  // A slice's baseline error is at least rel_berr x its scale: a slice of a few elements (a decode
  // step's one query row, a one-row D) holds a few samples of the baseline's rounding, which may be
  // right to the last bit by luck, while a correct candidate's relative error does not depend on the
  // slice. A wrong slice is still measured at its own scale (a zeroed head: error = its scale, against
  // ~1e-6 of it).
  for (size_t k = 0; k < s_tol.size(); ++k) {
    s_berr[k] = std::max(s_berr[k], rel_berr * s_scale[k]);
    s_floor[k] = tol.floor_ulps * tol.eps * s_scale[k] + tol.device_rel * s_scale[k];
    s_tol[k] = tol.k * s_berr[k] + s_floor[k];
  }
  auto slice_of = [&](int64_t i) { return per > 0 ? static_cast<size_t>(i / per) : size_t{0}; };
  require(tol.bound.empty() || static_cast<int64_t>(tol.bound.size()) == r.n,
          "compare: {} derived bounds for {} elements", tol.bound.size(), r.n);
  r.derived = !tol.bound.empty();
  // The tolerance of element i: its slice's, or its derived bound (Tolerance::bound).
  auto tol_at = [&](int64_t i) { return r.derived ? tol.bound[static_cast<size_t>(i)] : s_tol[slice_of(i)]; };
  r.ftz = tol.ftz;
  const double tiny = detail::smallest_normal(tol);
  // Reported: the slice of the worst element (largest error over its slice's tolerance).
  int64_t worst = -1;
  double worst_ratio = -1;

  double num = 0, den = 0, dot = 0, cc = 0;
  int64_t within = 0, first_special = -1;
  for (int64_t i = 0; i < r.n; ++i) {
    const double o = oracle.data[i], c = static_cast<double>(cand.data[i]);
    const int ko = detail::special_kind(o), kc = detail::special_kind(c);
    if (ko != kc) {
      if (first_special < 0) first_special = i;
      continue;
    }
    if (ko != 0 || (tol.ftz && c == 0 && std::abs(o) < tiny)) {
      ++within;
      continue;
    }
    const double e = std::abs(c - o);
    const size_t sl = slice_of(i);
    if (e > r.max_abs_err || r.max_abs_index < 0) r.max_abs_err = e, r.max_abs_index = i;
    if (std::abs(o) > s_floor[sl]) {
      const double rel = e / std::abs(o);
      if (rel > r.max_rel_err || r.max_rel_index < 0) r.max_rel_err = rel, r.max_rel_index = i;
    }
    const double t = tol_at(i);
    const double ratio = t > 0 ? e / t : (e > 0 ? HUGE_VAL : 0.0);
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    if (e <= t) ++within;
    num += e * e;
    den += o * o;
    dot += c * o;
    cc += c * c;
  }
  r.nmse = den > 0 ? num / den : num;
  r.cos_diff = (den > 0 && cc > 0) ? 1.0 - dot / std::sqrt(den * cc) : (num > 0 ? 1.0 : 0.0);
  r.pct_within = r.n ? 100.0 * static_cast<double>(within) / static_cast<double>(r.n) : 100.0;
  if (worst < 0 && slices > 0) worst = 0;
  if (worst >= 0 && slices > 0) {
    const size_t sl = slice_of(worst);
    r.baseline_err = s_berr[sl], r.floor = s_floor[sl], r.tol = s_tol[sl];
    if (r.derived) r.baseline_err = 0, r.floor = 0, r.tol = tol_at(worst);
  }
  if (sa > 0 && worst >= 0) {
    Shape lead(oracle.shape.begin(), oracle.shape.begin() + sa);
    r.slice = fmt::format("{} ({})", index_str(lead, static_cast<int64_t>(slice_of(worst))), tol.slice_names);
  }
  if (first_special >= 0) {
    r.fail(fmt::format("NaN/inf position mismatch at {}: candidate {} where the oracle has {}",
                       index_str(r.shape, first_special), static_cast<double>(cand.data[first_special]),
                       oracle.data[first_special]));
  } else if (worst_ratio > 1) {
    const double e = std::abs(static_cast<double>(cand.data[worst]) - oracle.data[worst]);
    if (r.derived)
      r.fail(fmt::format("abs err {:.3e} at {} exceeds its derived float64 bound {:.3e} (the oracle's error + the "
                         "candidate's){}", e, index_str(r.shape, worst), r.tol,
                         sa > 0 ? " in slice " + r.slice : std::string()));
    else if (sa > 0)
      r.fail(fmt::format("abs err {:.3e} at {} exceeds its slice's tolerance {:.3e} (slice {}: k * its baseline err "
                         "{:.3e} + floor {:.3e})",
                         e, index_str(r.shape, worst), r.tol, r.slice, r.baseline_err, r.floor));
    else
      r.fail(fmt::format("max abs err {:.3e} at {} exceeds tolerance {:.3e}", e, index_str(r.shape, worst), r.tol));
  }
  r.pass = r.failure.empty();
  return r;
}

struct ExactReport {
  bool pass = false;
  std::string failure;
  int64_t mismatches = 0, first_mismatch = -1;
  Shape shape;
  std::string text() const {
    return pass ? "PASS (exact)" : fmt::format("FAIL: {} ({} mismatching elements)", failure, mismatches);
  }
};

// Integer outputs (routing, EPLB maps, group sizes, schedules): exact equality.
template <class T>
ExactReport compare_exact(const Array<T>& expected, const Array<T>& cand) {
  ExactReport r;
  r.shape = expected.shape;
  if (cand.shape != expected.shape) {
    r.failure = "shape " + shape_str(cand.shape) + " where " + shape_str(expected.shape) + " is expected";
    return r;
  }
  for (int64_t i = 0; i < expected.size(); ++i)
    if (expected.data[i] != cand.data[i]) {
      if (r.first_mismatch < 0) r.first_mismatch = i;
      ++r.mismatches;
    }
  if (r.mismatches)
    r.failure = fmt::format("element {} is {} where {} is expected", index_str(r.shape, r.first_mismatch),
                            cand.data[r.first_mismatch], expected.data[r.first_mismatch]);
  r.pass = r.failure.empty();
  return r;
}

}  // namespace ladder

#include "ladder/core/compare_elementwise.hpp"
