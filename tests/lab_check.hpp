// tests/lab_check.hpp -- the tolerance rule as a test check whose failure names the bug: the rung and
// its precision, the output, the case, the first bad element as a position in the output's own
// dimensions ([b, h, row, col] for attention) with the expected (fp64 oracle) and actual values.
//
// Every failure message starts with one line of a fixed form that scripts/lab collects into the lab's
// summary:
//   rung tiled (float32), output O, case q97_k113_d32_causal: first bad element at [b 0, h 1, row 96,
//   col 5] of [1, 2, 97, 32]: expected 1.234e-01, got 5.678e-01 (|err| 4.4e-01 > tolerance 3.1e-07)
// followed by the comparator's report (max errors, NMSE, share within tolerance). An integer output
// (indices, counts, maps) has no precision tag: "rung dropless, output sort_idx, case e8_T7: ...".
#pragma once
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ladder/core/compare.hpp"

namespace ladder::test {

struct What {
  std::string rung;       // e.g. "online"
  std::string precision;  // "float32" | "float64": the precision the rung ran in
  std::string output;     // e.g. "O", "dK", "y"
  std::string test_case;  // golden case name, plus any variation ("tiles 37x13")
  std::vector<std::string> dims = {};  // names of the output's dimensions, e.g. {"b", "h", "row", "col"}
};

// "[b 0, h 1, row 96, col 5]" for flat index i of an array of shape s (row-major).
inline std::string position(int64_t i, const Shape& s, const std::vector<std::string>& dims) {
  std::vector<int64_t> idx(s.size());
  for (size_t k = s.size(); k-- > 0;) {
    const int64_t n = s[k] > 0 ? s[k] : 1;
    idx[k] = i % n;
    i /= n;
  }
  std::string r = "[";
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k) r += ", ";
    if (dims.size() == idx.size()) r += dims[k] + " ";
    r += std::to_string(idx[k]);
  }
  return r + "]";
}

// The first element the rule rejects: a NaN/inf where the oracle has none (or the reverse), else the
// first finite element whose error exceeds the report's tolerance; -1 if none (the report then failed
// on another ground, e.g. the shape).
template <class C>
int64_t first_bad(const Array<double>& oracle, const Array<C>& cand, const CompareReport& r) {
  if (cand.shape != oracle.shape) return -1;
  for (int64_t i = 0; i < oracle.size(); ++i) {
    const double o = oracle.data[i], c = static_cast<double>(cand.data[i]);
    if (std::isfinite(o) != std::isfinite(c) || (!std::isfinite(o) && !(o == c))) {
      if (std::isnan(o) && std::isnan(c)) continue;
      return i;
    }
    if (std::isfinite(o) && std::abs(c - o) > r.tol) return i;
  }
  return r.max_abs_index;
}

// "; 37 of 3104 elements bad": the elements the rule rejects (its share within tolerance, counted by the
// comparator), which scripts/lab adds up per rung and output.
inline std::string bad_count(const CompareReport& r) {
  const int64_t within = static_cast<int64_t>(std::llround(r.pct_within * static_cast<double>(r.n) / 100.0));
  return fmt::format("; {} of {} elements bad", r.n - within, r.n);
}

// The fixed first line of a failure (see the header comment).
template <class C>
std::string failure_line(const What& w, const Array<double>& oracle, const Array<C>& cand, const CompareReport& r) {
  std::string s = fmt::format("rung {} ({}), output {}, case {}: ", w.rung, w.precision, w.output, w.test_case);
  const int64_t i = first_bad(oracle, cand, r);
  if (i < 0) return s + r.failure;
  const double o = oracle.data[i], c = static_cast<double>(cand.data[i]);
  return s + fmt::format("first bad element at {} of {}: expected {:.6e}, got {:.6e} (|err| {:.2e} > tolerance {:.2e}){}",
                         position(i, oracle.shape, w.dims), shape_str(oracle.shape), o, c, std::abs(c - o), r.tol,
                         bad_count(r));
}

// The stage's rule on one output; one failing check with the message above when it does not hold.
template <class C, class B>
bool check_rule(const What& w, const Array<double>& oracle, const Array<C>& cand, const Array<B>& baseline,
                Tolerance tol) {
  const CompareReport r = compare(oracle, cand, baseline, tol);
  if (r.pass) return true;
  FAIL_CHECK(failure_line(w, oracle, cand, r) << "\n  " << r.text());
  return false;
}

// The elementwise rule (core/compare_elementwise.hpp), as the contract judges probabilities (01-softmax's
// y): each element at its own scale, and the structural facts of a softmax row (`mask`: the input, whose
// -inf positions must give exactly 0). The same rule `ladder check` applies.
template <class C, class B>
bool check_elementwise(const What& w, const Array<double>& oracle, const Array<C>& cand, const Array<B>& baseline,
                       Tolerance tol, const Array<double>* mask = nullptr) {
  const CompareReport r = compare_elementwise(oracle, cand.template cast<double>(), baseline.template cast<double>(),
                                              tol, true, mask);
  if (r.pass) return true;
  FAIL_CHECK(fmt::format("rung {} ({}), output {}, case {}: {}", w.rung, w.precision, w.output, w.test_case, r.failure)
             << "\n  " << r.text());  // r.failure ends with the count: "; N elements fail"
  return false;
}

// An exact output (integers: routing, sort order, EPLB maps; or times that must match bit for bit):
// one failing check naming the first position where actual differs from expected.
// The fixed head of a failure line; an integer output without the precision tag.
template <class T>
std::string head(const What& w) {
  if constexpr (std::is_integral_v<T>)
    return fmt::format("rung {}, output {}, case {}: ", w.rung, w.output, w.test_case);
  else
    return fmt::format("rung {} ({}), output {}, case {}: ", w.rung, w.precision, w.output, w.test_case);
}

template <class T>
bool check_exact(const What& w, const std::vector<T>& expected, const std::vector<T>& actual, const Shape& shape) {
  const std::string head = test::head<T>(w);
  if (expected.size() != actual.size()) {
    FAIL_CHECK(head << fmt::format("{} elements expected (shape {}), got {}", expected.size(), shape_str(shape), actual.size()));
    return false;
  }
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(expected[i] == actual[i])) {
      size_t bad = 0;
      for (size_t j = i; j < expected.size(); ++j) bad += !(expected[j] == actual[j]);
      FAIL_CHECK(head << fmt::format("first bad element at {} of {}: expected {}, got {} (exact output); {} of {} elements bad",
                                     position(int64_t(i), shape, w.dims), shape_str(shape), expected[i], actual[i], bad,
                                     expected.size()));
      return false;
    }
  return true;
}

// Bit-identity of two runs that must agree to the last bit (1 thread against 2): element by element,
// a NaN equal to a NaN (NaN != NaN would fail two identical runs); one failing check naming the first
// element that differs, `a_is` and `b_is` saying which run gave which value.
template <class T>
bool check_bit_identical(const What& w, const std::vector<T>& a, const std::vector<T>& b, const Shape& shape,
                         const char* a_is, const char* b_is) {
  if (a.size() != b.size()) {
    FAIL_CHECK(head<T>(w) << fmt::format("{} gives {} elements, {} gives {}", a_is, a.size(), b_is, b.size()));
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    bool same = std::memcmp(&a[i], &b[i], sizeof(T)) == 0;
    if constexpr (std::is_floating_point_v<T>) same = same || (std::isnan(a[i]) && std::isnan(b[i]));
    if (!same) {
      FAIL_CHECK(head<T>(w) << fmt::format("not bit-identical: first difference at {} of {}: {} {:.9e}, {} {:.9e}",
                                           position(int64_t(i), shape, w.dims), shape_str(shape), a_is,
                                           double(a[i]), b_is, double(b[i])));
      return false;
    }
  }
  return true;
}

}  // namespace ladder::test
