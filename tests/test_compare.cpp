// tests/test_compare.cpp -- the comparator must reject wrong answers and accept right ones.
//
// Wrong softmax candidates that the max-abs rule passed must FAIL the element-wise + structural rule of
// 01-softmax's contract; every correct candidate must PASS: each rung in float32 and float64, a numpy-style
// float32 softmax (exp of x - max in float32, pairwise sum, divide) on random rows including extreme
// magnitudes and -inf, and every golden case.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>

#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/01-softmax/golden_cases.hpp"
#include "ladder/01-softmax/softmax.hpp"

using namespace ladder;

namespace {

const float kNinf = -std::numeric_limits<float>::infinity();

Array<float> logits(int64_t rows, int64_t cols, double sd, uint64_t seed) {
  Array<float> x({rows, cols});
  Rng rng(seed);
  for (auto& v : x.data) v = static_cast<float>(sd * rng.normal());
  return x;
}

// numpy's float32 softmax as people write it: e = np.exp(x - x.max()); e / e.sum() (pairwise sum).
float pairwise(const float* a, int64_t n) {
  if (n <= 8) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  return pairwise(a, n / 2) + pairwise(a + n / 2, n - n / 2);
}
Array<float> numpy_style(const Array<float>& x) {
  Array<float> y(x.shape);
  const int64_t C = x.cols();
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float* xr = &x.data[r * C];
    float m = kNinf;
    for (int64_t j = 0; j < C; ++j) m = std::max(m, xr[j]);
    std::vector<float> e(C);
    for (int64_t j = 0; j < C; ++j) e[j] = m == kNinf ? 0.f : std::exp(xr[j] - m);
    const float d = pairwise(e.data(), C);
    for (int64_t j = 0; j < C; ++j) y.data[r * C + j] = d > 0 ? e[j] / d : 0.f;
  }
  return y;
}

CheckReport judge(const Array<float>& x, const NpyData& cand) {
  const Contract& c = contract("01-softmax");
  const Tensors in{{"x", to_npy(x)}};
  return check(c, in, {}, run_oracle(c, in, {}), "y", cand);
}
template <class T>
CheckReport judge(const Array<float>& x, const Array<T>& cand) { return judge(x, to_npy(cand)); }

Array<double> oracle_y(const Array<float>& x) { return softmax::apply(&softmax::safe_rows<double>, x.cast<double>()); }

// A wrong candidate: the float64 oracle (itself a perfect answer), changed by f.
Array<float> planted(const Array<float>& x, const std::function<void(Array<double>&)>& f) {
  Array<double> y = oracle_y(x);
  f(y);
  return y.cast<float>();
}

}  // namespace

TEST_CASE("01-softmax contract: wrong candidates the max-abs rule passed now fail") {
  const Array<float> x = logits(2, 4096, 3.0, 4242);  // 2 x 4096 N(0, 3^2)
  REQUIRE(judge(x, oracle_y(x).cast<float>()).pass);  // the unplanted candidate passes
  auto each = [](Array<double>& y, const std::function<void(double&)>& g) { for (double& v : y.data) g(v); };
  const std::vector<std::pair<const char*, std::function<void(Array<double>&)>>> wrong = {
      {"median x 1.01", [](Array<double>& y) {
         std::vector<double> row(y.data.begin(), y.data.begin() + 4096);
         std::nth_element(row.begin(), row.begin() + 2048, row.end());
         for (double& v : y.data) if (v == row[2048]) { v *= 1.01; break; }
       }},
      {"below 5e-6 x 1.05", [&](Array<double>& y) { each(y, [](double& v) { if (v < 5e-6) v *= 1.05; }); }},
      {"below 1e-7 set to 0", [&](Array<double>& y) { each(y, [](double& v) { if (v < 1e-7) v = 0; }); }},
      {"below 1e-8 x 20", [&](Array<double>& y) { each(y, [](double& v) { if (v < 1e-8) v *= 20; }); }},
      {"below 5e-8 negative", [&](Array<double>& y) { each(y, [](double& v) { if (v < 5e-8) v = -v; }); }},
      {"row + 1e-8", [](Array<double>& y) { for (int64_t j = 0; j < 4096; ++j) y.data[j] += 1e-8; }},
  };
  for (const auto& [name, f] : wrong) {
    CAPTURE(name);
    const CheckReport r = judge(x, planted(x, f));
    CHECK_FALSE(r.pass);
    CHECK(!r.failed.empty());
  }
}

TEST_CASE("01-softmax contract: structural facts (-inf, fully masked row, negatives, row sums)") {
  const Array<float> x = softmax::golden_case_input("neg_inf");
  CHECK(judge(x, oracle_y(x).cast<float>()).pass);
  Array<float> c = oracle_y(x).cast<float>();
  c.data[0] = 1e-8f;  // x[0][0] is -inf: exactly 0 required
  CheckReport r = judge(x, c);
  CHECK_FALSE(r.pass);
  CHECK(r.text.find("where the input is -inf") != std::string::npos);
  CHECK(r.text.find("[0, 0]") != std::string::npos);  // positions as multi-indices

  const Array<float> m = softmax::golden_case_input("all_neg_inf");
  Array<float> cm = oracle_y(m).cast<float>();
  for (int64_t j = 0; j < 8; ++j) cm.data[j] = 1e-7f;  // the fully masked row must stay all zeros
  CHECK_FALSE(judge(m, cm).pass);

  // A row that no longer sums to 1 (1e-8 added to each of 1025 entries): the row-sum fact is reported.
  const Array<float> w = logits(4, 1025, 3.0, 77);
  REQUIRE(judge(w, oracle_y(w).cast<float>()).pass);
  Array<double> shifted = oracle_y(w);
  for (int64_t j = 0; j < 1025; ++j) shifted.data[j] += 1e-8;
  r = judge(w, shifted);
  CHECK_FALSE(r.pass);
  CHECK(r.text.find("sums to") != std::string::npos);
}

TEST_CASE("01-softmax contract: mixed scales, zeroed tiny probabilities fail") {
  const Array<float> x = softmax::golden_case_input("mixed_scales");
  CHECK(judge(x, softmax::apply(&softmax::online_rows<float>, x)).pass);
  const CheckReport r = judge(x, planted(x, [](Array<double>& y) { for (double& v : y.data) if (v < 1e-7) v = 0; }));
  CHECK_FALSE(r.pass);
}

TEST_CASE("01-softmax contract: flush-to-zero (--ftz) accepts 0 for a subnormal probability, and only that") {
  const Array<float> x = softmax::golden_case_input("mixed_scales");
  const Contract& c = contract("01-softmax");
  const Tensors in{{"x", to_npy(x)}};
  const Tensors want = run_oracle(c, in, {});
  // A correct float32 answer from a device that flushes subnormal results to 0.
  Array<float> y = softmax::apply(&softmax::safe_rows<float>, x);
  int64_t flushed = 0;
  for (float& v : y.data)
    if (v != 0 && std::abs(v) < std::numeric_limits<float>::min()) v = 0, ++flushed;
  REQUIRE(flushed > 0);  // the case has subnormal probabilities
  CHECK_FALSE(check(c, in, {}, want, "y", to_npy(y)).pass);
  const CheckReport r = check(c, in, {}, want, "y", to_npy(y), "", {}, true);
  CHECK(r.pass);
  CHECK(r.text.find("flush-to-zero") != std::string::npos);
  // FTZ forgives 0 for a subnormal value only: a zeroed normal probability still fails.
  float* smallest_normal = nullptr;
  for (float& v : y.data)
    if (v >= std::numeric_limits<float>::min() && (!smallest_normal || v < *smallest_normal)) smallest_normal = &v;
  REQUIRE(smallest_normal != nullptr);
  *smallest_normal = 0;
  CHECK_FALSE(check(c, in, {}, want, "y", to_npy(y), "", {}, true).pass);
}

TEST_CASE("01-softmax contract: a device candidate (--device) gets FTZ by default and the expf allowance, "
          "and only that") {
  const Contract& c = contract("01-softmax");
  REQUIRE(c.output("y").device_rel > 0);
  {  // FTZ is on for a device candidate unless turned off
    const Array<float> x = softmax::golden_case_input("mixed_scales");
    const Tensors in{{"x", to_npy(x)}};
    const Tensors want = run_oracle(c, in, {});
    Array<float> y = softmax::apply(&softmax::safe_rows<float>, x);
    for (float& v : y.data)
      if (v != 0 && std::abs(v) < std::numeric_limits<float>::min()) v = 0;
    const CheckReport r = check(c, in, {}, want, "y", to_npy(y), "", {}, std::nullopt, true);
    CHECK(r.pass);
    CHECK(r.text.find("device candidate: FTZ on") != std::string::npos);
    CHECK_FALSE(check(c, in, {}, want, "y", to_npy(y), "", {}, false, true).pass);
  }
  // The largest entry moved by t: the smallest t that fails the host rule (bisection), plus half the
  // device allowance, fails on the host and passes as a device candidate; plus twice it fails both.
  const Array<float> x = softmax::golden_case_input("len_97");
  const Tensors in{{"x", to_npy(x)}};
  const Tensors want = run_oracle(c, in, {});
  const Array<double> o = from_npy<double>(want.at("y"), "oracle");
  const int64_t top = std::max_element(o.data.begin(), o.data.end()) - o.data.begin();
  auto moved = [&](double t) {
    Array<double> y = o;
    y.data[static_cast<size_t>(top)] *= 1 + t;
    return to_npy(y.cast<float>());
  };
  double lo = 0, hi = 1e-4;
  REQUIRE(check(c, in, {}, want, "y", moved(lo)).pass);
  REQUIRE_FALSE(check(c, in, {}, want, "y", moved(hi)).pass);
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    (check(c, in, {}, want, "y", moved(mid)).pass ? lo : hi) = mid;
  }
  const double rel = c.output("y").device_rel;
  CHECK_FALSE(check(c, in, {}, want, "y", moved(hi + rel / 2)).pass);
  CHECK(check(c, in, {}, want, "y", moved(hi + rel / 2), "", {}, std::nullopt, true).pass);
  CHECK_FALSE(check(c, in, {}, want, "y", moved(hi + 2 * rel), "", {}, std::nullopt, true).pass);
}

TEST_CASE("01-softmax contract: correct candidates pass (rungs fp32 / fp64, numpy-style, every golden)") {
  std::vector<Array<float>> xs;
  for (const std::string& n : softmax::golden_case_names())
    if (n != "len_1048576" && n != "nan_inf") xs.push_back(softmax::golden_case_input(n));  // nan_inf: below
  uint64_t seed = 900;
  for (double sd : {1e-3, 1.0, 3.0, 30.0, 1e3, 1e4})
    for (int64_t cols : {1, 7, 97, 1025, 4096}) {
      Array<float> x = logits(3, cols, sd, ++seed);
      if (cols > 2) x.data[1] = kNinf, x.data[cols + 2] = kNinf;  // masked entries
      if (cols > 1) for (int64_t j = 0; j < cols; ++j) x.data[2 * cols + j] = j ? kNinf : x.data[2 * cols];
      xs.push_back(x);
    }
  for (const Array<float>& x : xs) {
    CAPTURE(shape_str(x.shape));
    CAPTURE(x.data[0]);
    for (const CheckReport& r : {judge(x, numpy_style(x)), judge(x, softmax::apply(&softmax::safe_rows<float>, x)),
                                 judge(x, softmax::apply(&softmax::online_rows<float>, x)),
                                 judge(x, softmax::apply(&softmax::online_rows<double>, x.cast<double>())),
                                 judge(x, softmax::apply(&softmax::safe_rows<double>, x.cast<double>()))}) {
      CAPTURE(r.text);
      CHECK(r.pass);
    }
  }
}

// nan_inf's rows as torch.softmax gives them: a NaN or +inf anywhere, and an all -inf row, make the row
// NaN; the contract agrees except on the all -inf row (zeros). Written from those rules, not by a rung.
Array<float> torch_like(const Array<float>& x) {
  Array<float> y = oracle_y(x).cast<float>();
  for (int64_t r = 0; r < x.rows(); ++r) {
    bool nan = false, finite = false;
    for (int64_t j = 0; j < x.cols(); ++j) {
      const float v = x.data[r * x.cols() + j];
      nan = nan || std::isnan(v) || v == INFINITY;
      finite = finite || std::isfinite(v);
    }
    if (nan || !finite)
      for (int64_t j = 0; j < x.cols(); ++j) y.data[r * x.cols() + j] = NAN;
  }
  return y;
}

TEST_CASE("01-softmax contract: NaN rows -- torch's NaN on a fully masked row fails, so does a number in a NaN row") {
  const Array<float> x = softmax::golden_case_input("nan_inf");  // row 0 all -inf, row 2 a NaN among finite
  Array<float> t = torch_like(x);
  const CheckReport r = judge(x, t);
  CHECK_FALSE(r.pass);  // the all -inf row is zeros by contract
  CHECK(r.text.find("NaN/inf position mismatch at [0, 0]") != std::string::npos);
  for (int64_t j = 0; j < x.cols(); ++j) t.data[j] = 0;
  t.data[2 * x.cols() + 7] = 0.5f;  // one number in a row the contract makes NaN
  CHECK(judge(x, t).text.find("NaN/inf position mismatch at [2, 7]") != std::string::npos);
}

// The structural facts of compare_elementwise.hpp (exactly 0 where x is -inf, each row's sum) are not
// checked on the rows the oracle makes NaN (their NaN positions are matched already): before that, a NaN
// row failed them even when the candidate was the oracle itself.
TEST_CASE("01-softmax contract: a torch-like candidate passes on the rows the contract makes NaN") {
  const Array<float> x = softmax::golden_case_input("nan_inf");
  Array<float> t = torch_like(x);
  for (int64_t j = 0; j < x.cols(); ++j) t.data[j] = 0;  // torch's result with its fully masked row set to 0
  const CheckReport r = judge(x, t);
  CHECK_MESSAGE(r.pass, r.text);
  const CheckReport o = judge(x, oracle_y(x));  // the oracle itself, as a float64 candidate
  CHECK_MESSAGE(o.pass, o.text);
  for (auto rows : {&softmax::safe_rows<float>, &softmax::online_rows<float>})
    CHECK(judge(x, softmax::apply(rows, x)).pass);
}
