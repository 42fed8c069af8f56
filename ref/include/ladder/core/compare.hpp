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
// The tolerance is never tuned per tensor: k, floor_ulps and the baseline are fixed per stage.
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
  double baseline_err = 0, floor = 0, tol = 0;

  std::string text() const {
    std::string s = pass ? "PASS (" + rule + " rule)" : "FAIL (" + rule + " rule): " + failure;
    for (size_t i = 1; i < failures.size(); ++i) s += "\n  also: " + failures[i];
    s += fmt::format(
        "\n  max abs err {:.3e} at {}, max rel err {:.3e} at {}\n  NMSE {:.3e}, cosine diff {:.3e}, "
        "{:.2f}% of {} elements within tolerance\n",
        max_abs_err, index_str(shape, max_abs_index), max_rel_err, index_str(shape, max_rel_index), nmse, cos_diff,
        pct_within, n);
    if (rule == "elementwise")
      s += fmt::format("  tolerance per element = (k * baseline rel err at its magnitude + floor) * |oracle|; at the "
                       "worst element {:.3e} (baseline rel err {:.3e}, floor {:.3e})",
                       tol, baseline_err, floor);
    else
      s += fmt::format("  tolerance {:.3e} = k * baseline err {:.3e} + floor {:.3e}", tol, baseline_err, floor);
    return s;
  }
  void fail(std::string f) {
    if (failure.empty()) failure = f;
    failures.push_back(std::move(f));
  }
};

namespace detail {
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

  double scale = 0;
  for (double o : oracle.data)
    if (std::isfinite(o)) scale = std::max(scale, std::abs(o));
  r.baseline_err = detail::max_abs_err(oracle, baseline);
  r.floor = tol.floor_ulps * tol.eps * scale + tol.device_rel * scale;
  r.tol = tol.k * r.baseline_err + r.floor;

  double num = 0, den = 0, dot = 0, cc = 0;
  int64_t within = 0, first_special = -1;
  for (int64_t i = 0; i < r.n; ++i) {
    const double o = oracle.data[i], c = static_cast<double>(cand.data[i]);
    const int ko = detail::special_kind(o), kc = detail::special_kind(c);
    if (ko != kc) {
      if (first_special < 0) first_special = i;
      continue;
    }
    if (ko != 0) {
      ++within;
      continue;
    }
    const double e = std::abs(c - o);
    if (e > r.max_abs_err || r.max_abs_index < 0) r.max_abs_err = e, r.max_abs_index = i;
    if (std::abs(o) > r.floor) {
      const double rel = e / std::abs(o);
      if (rel > r.max_rel_err || r.max_rel_index < 0) r.max_rel_err = rel, r.max_rel_index = i;
    }
    if (e <= r.tol) ++within;
    num += e * e;
    den += o * o;
    dot += c * o;
    cc += c * c;
  }
  r.nmse = den > 0 ? num / den : num;
  r.cos_diff = (den > 0 && cc > 0) ? 1.0 - dot / std::sqrt(den * cc) : (num > 0 ? 1.0 : 0.0);
  r.pct_within = r.n ? 100.0 * static_cast<double>(within) / static_cast<double>(r.n) : 100.0;
  if (first_special >= 0) {
    r.fail(fmt::format("NaN/inf position mismatch at {}: candidate {} where the oracle has {}",
                       index_str(r.shape, first_special), static_cast<double>(cand.data[first_special]),
                       oracle.data[first_special]));
  } else if (r.max_abs_err > r.tol) {
    r.fail(fmt::format("max abs err {:.3e} at {} exceeds tolerance {:.3e}", r.max_abs_err,
                       index_str(r.shape, r.max_abs_index), r.tol));
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
