// tests/01-softmax/special_rows.hpp -- the NaN / inf rows of stage 01 and the value each must give, for
// the reference tests (test_softmax.cpp) and the CUDA tests (test_softmax_cuda.cpp).
//
// The expected values are written here from the semantics (ladder/01-softmax/softmax.hpp's header,
// `ladder describe 01-softmax`), never computed by a rung, so a rung and the oracle are both held to
// them: all -inf -> zeros; a NaN or a +inf anywhere -> the row NaN; -inf beside finite -> exactly 0 there,
// an ordinary softmax elsewhere. The rows come at several lengths, with the special entry at the first,
// a middle and the last column, so it lands in every kind of lane, chunk, packet and tail.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lab_oracle.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::test::softmax_special {

enum class Want { zeros, nan, softmax };  // softmax: finite, exactly 0 at -inf, the oracle's values

struct Kind {
  const char* name;
  Want want;
};
// The row kinds, in the order of the rows that rows() makes for each position.
inline const std::vector<Kind>& kinds() {
  static const std::vector<Kind> k = {
      {"all -inf", Want::zeros},           {"NaN among -inf", Want::nan},  {"NaN among finite", Want::nan},
      {"one +inf among finite", Want::nan}, {"three +inf among finite", Want::nan},
      {"+inf among -inf", Want::nan},      {"-inf mixed with finite", Want::softmax},
      {"NaN and +inf among finite", Want::nan}, {"finite (after the special rows)", Want::softmax}};
  return k;
}

// For a row length V: one row per kind and special position p in {0, V / 2, V - 1}; row r is of kind
// kinds()[r % kinds().size()].
inline Array<float> rows(int64_t V, uint64_t seed = 7) {
  constexpr float ninf = -std::numeric_limits<float>::infinity(), inf = std::numeric_limits<float>::infinity();
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t nk = static_cast<int64_t>(kinds().size());
  Array<float> x({3 * nk, V});
  Rng rng(seed);
  for (auto& v : x.data) v = static_cast<float>(3.0 * rng.normal());
  for (int64_t pi = 0; pi < 3; ++pi) {
    const int64_t p = pi == 0 ? 0 : pi == 1 ? V / 2 : V - 1;
    auto row = [&](int64_t k) { return x.data.data() + (pi * nk + k) * V; };
    for (int64_t j = 0; j < V; ++j) row(0)[j] = row(1)[j] = row(5)[j] = ninf;
    row(1)[p] = nan;
    row(2)[p] = nan;
    row(3)[p] = inf;
    row(4)[0] = row(4)[p] = row(4)[V - 1] = inf;
    row(5)[p] = inf;
    for (int64_t j = 0; j < V; j += 3)
      if (j != p) row(6)[j] = ninf;
    row(7)[p] = nan, row(7)[(p + V / 2 + 1) % V] = inf;  // the same column when V = 1: +inf, still NaN
  }
  return x;
}

// Checks candidate y against the kinds (rows of x in the order rows() or the golden case nan_inf makes
// them); naive_lesson: the naive rung's all -inf row is 0/0 = NaN (its documented underflow). One
// failing check per row at most, naming the rung, precision, case, row kind and first bad column.
template <class T>
void check(const std::string& rung, const std::string& prec, const std::string& what, const Array<float>& x,
           const Array<T>& y, bool naive_lesson = false) {
  const int64_t V = x.cols(), nk = static_cast<int64_t>(kinds().size());
  Array<double> o(x.shape);  // the judge's fp64 oracle for the ordinary rows' values
  const Array<double> x64 = x.cast<double>();
  lab_oracle::softmax_rows("safe", x64.data.data(), o.data.data(), x.rows(), V);
  // Loose on the ordinary rows' values (they are judged by the tolerance rule elsewhere): a sequential
  // float32 sum over V terms (naive, v1) errs by up to about V eps.
  const double tol = 1e-5 + 1e-7 * static_cast<double>(V);
  for (int64_t r = 0; r < x.rows(); ++r) {
    const Kind& k = kinds()[static_cast<size_t>(r % nk)];
    const Want want = naive_lesson && k.want == Want::zeros ? Want::nan : k.want;
    const std::string where = "rung " + rung + " (" + prec + "), output y, case " + what + ", row " +
                              std::to_string(r) + " (" + k.name + "): ";
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) {
      const double v = static_cast<double>(y.data[static_cast<size_t>(r * V + j)]);
      const double xj = x.data[static_cast<size_t>(r * V + j)], oj = o.data[static_cast<size_t>(r * V + j)];
      std::string bad;
      if (want == Want::zeros && !(v == 0)) bad = "0 (an all -inf row is all zeros)";
      if (want == Want::nan && !std::isnan(v)) bad = "NaN (a NaN or +inf in the row makes it all NaN)";
      if (want == Want::softmax && xj == -INFINITY && !(v == 0)) bad = "exactly 0 (x is -inf there)";
      if (want == Want::softmax && !(std::abs(v - oj) <= tol * std::max(oj, 1e-3)))
        bad = "the oracle's value (within " + std::to_string(tol) + " relative)";
      if (!bad.empty()) {
        FAIL_CHECK(where << "first bad element at col " << j << " of " << V << ": expected " << bad << ", got "
                         << v << " (oracle " << oj << ")");
        sum = 1;  // reported already
        break;
      }
      sum += v;
    }
    if (want == Want::softmax)
      CHECK_MESSAGE(std::abs(sum - 1) <= tol, where << "the row sums to " << sum << ", expected 1");
  }
}

}  // namespace ladder::test::softmax_special
