// tests/test_slices.cpp -- the tolerance rule per independent slice (issue 38, core/compare.hpp).
//
// On every golden case of 02-attention (O, per batch row and head), 03-mla (u, per sequence) and 04-moe
// (y, per token): the oracle rounded to float32 passes; the same candidate with ONE slice zeroed or
// scaled by -5 -- the slice whose true values are smallest, where a tensor-wide scale cannot see it --
// fails, and the report names that slice. The same corruption judged at one scale for the whole tensor
// (slice_axes = 0, the rule before) passes on some case of each stage: what the per-slice rule adds.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "golden_util.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/stage.hpp"

using namespace ladder;

namespace {

struct Slice {
  int64_t index = -1, size = 0;
  double scale = 0;
};

// The slice (over the leading `axes` axes) with the smallest nonzero max|oracle|.
Slice smallest_slice(const Array<double>& o, int axes) {
  int64_t slices = 1;
  for (int d = 0; d < axes; ++d) slices *= o.shape[static_cast<size_t>(d)];
  Slice best;
  best.size = o.size() / slices;
  for (int64_t s = 0; s < slices; ++s) {
    double m = 0;
    for (int64_t i = s * best.size; i < (s + 1) * best.size; ++i)
      if (std::isfinite(o.data[i])) m = std::max(m, std::abs(o.data[i]));
    if (m > 0 && (best.index < 0 || m < best.scale)) best.index = s, best.scale = m;
  }
  return best;
}

// A golden case's folder with every array in it: the committed folder, or (for a case committed as a
// sample) the case written whole by the stage's golden writer into a temporary folder.
std::filesystem::path whole_case(const std::string& stage, const std::string& name) {
  const std::filesystem::path dir = test::golden_dir(stage) / name;
  if (read_json(dir / "case.json").value("stored", "full") != "sample") return dir;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / ("ladder_test_slices_" + name);
  if (!std::filesystem::exists(tmp / "case.json")) ladder::stage(stage).write_golden_case(name, tmp, true);
  return tmp;
}

// Corrupts every golden case's smallest slice of `output`; returns how many cases the one-scale rule missed.
int corrupt_smallest_slices(const std::string& stage, const std::string& output) {
  const Contract& c = contract(stage);
  const OutputSpec& spec = c.output(output);
  REQUIRE(spec.slice_axes > 0);
  int missed_by_one_scale = 0, cases = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::golden_dir(stage))) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.starts_with("model")) continue;
    INFO(stage << " case " << name);
    const CaseFolder cf = read_case(c, whole_case(stage, name));
    const Array<double> o = npy_as_double(cf.expected.at(output));
    const Array<float> o32 = o.cast<float>();
    CHECK(check(c, cf.inputs, cf.params, cf.expected, output, to_npy(o32)).pass);
    const Slice s = smallest_slice(o, spec.slice_axes);
    if (s.index < 0) continue;  // every slice exactly zero
    ++cases;
    const Array<double> b = npy_as_double(c.baseline(cf.inputs, cf.params, DType::F4).at(output));
    for (const float mult : {0.f, -5.f}) {
      Array<float> bad = o32;
      for (int64_t i = s.index * s.size; i < (s.index + 1) * s.size; ++i) bad.data[i] *= mult;
      INFO("slice " << s.index << " (max|oracle| " << s.scale << ") x " << mult);
      const CheckReport r = check(c, cf.inputs, cf.params, cf.expected, output, to_npy(bad));
      CHECK(!r.pass);
      CHECK(r.text.find("slice") != std::string::npos);
      Tolerance one = c.tolerance(output, DType::F4);
      one.slice_axes = 0;
      if (mult == 0.f && compare(o, bad, b, one).pass) ++missed_by_one_scale;
    }
  }
  CHECK(cases > 0);
  return missed_by_one_scale;
}

}  // namespace

TEST_CASE("per-slice rule: 02-attention O, one (b, h) zeroed or x -5, fails") {
  MESSAGE("02-attention: zeroed slices the one-scale rule missed: " << corrupt_smallest_slices("02-attention", "O"));
}

// The issue's own examples, built from a golden case: one slice's input scaled down so that its true
// output is ~1e-9 of the rest (one head's V; one token's x), then that slice zeroed in a float32 answer.
// The one-scale rule (slice_axes = 0) passes it; the per-slice rule fails it, naming the slice.
void tiny_slice(const std::string& stage, const std::string& name, const std::string& input, double factor,
                const std::string& output) {
  const Contract& c = contract(stage);
  CaseFolder cf = read_case(c, whole_case(stage, name));
  const int axes = c.output(output).slice_axes;  // the input's leading axes are the output's slice axes
  auto slice0 = [axes](const Shape& s, int64_t n) {
    int64_t k = 1;
    for (int d = 0; d < axes; ++d) k *= s[static_cast<size_t>(d)];
    return n / k;
  };
  Array<float> in = from_npy<float>(cf.inputs.at(input), input);
  const int64_t per = slice0(in.shape, in.size());  // slice 0: b = 0 (and h = 0)
  for (int64_t i = 0; i < per; ++i) in.data[i] *= static_cast<float>(factor);
  cf.inputs[input] = to_npy(in);
  const Tensors want = run_oracle(c, cf.inputs, cf.params);
  const Array<double> o = npy_as_double(want.at(output));
  Array<float> bad = o.cast<float>();
  const int64_t out_per = slice0(o.shape, o.size());
  double small = 0, all = 0;
  for (int64_t i = 0; i < o.size(); ++i) (i < out_per ? small : all) = std::max(i < out_per ? small : all, std::abs(o.data[i]));
  INFO(stage << " " << name << ": slice 0 of " << output << " max " << small << " vs the rest " << all);
  REQUIRE(small > 0);
  REQUIRE(small < 1e-6 * all);
  for (int64_t i = 0; i < out_per; ++i) bad.data[i] = 0;
  const CheckReport r = check(c, cf.inputs, cf.params, want, output, to_npy(bad));
  CHECK_FALSE(r.pass);
  CHECK(r.text.find("slice [0") != std::string::npos);
  Tolerance one = c.tolerance(output, DType::F4);
  one.slice_axes = 0;
  const Array<double> b = npy_as_double(c.baseline(cf.inputs, cf.params, DType::F4).at(output));
  CHECK(compare(o, bad, b, one).pass);  // what the one-scale rule let through
}

TEST_CASE("per-slice rule: the issue's examples, a slice ~1e-9 of the rest zeroed, fail (and passed before)") {
  tiny_slice("02-attention", "q97_k113_d32_causal", "V", 1e-9, "O");  // head (b 0, h 0) of V
  tiny_slice("04-moe", "e8_T7", "x", 1e-5, "y");                      // token 0
}

// The goldens of 03 and 04 hold no slice small enough for the one-scale rule to miss (the cases
// were an engineer's own); the per-slice rule must catch the corruption all the same.
TEST_CASE("per-slice rule: 03-mla u, one sequence zeroed or x -5, fails") {
  MESSAGE("03-mla: zeroed slices the one-scale rule missed: " << corrupt_smallest_slices("03-mla", "u"));
}

TEST_CASE("per-slice rule: 04-moe y, one token zeroed or x -5, fails") {
  MESSAGE("04-moe: zeroed slices the one-scale rule missed: " << corrupt_smallest_slices("04-moe", "y"));
}

// Attention's gradients are judged as one tensor (OutputSpec::judged_with): on a one-key attention dQ and
// dK are exactly 0 while dV is not, and a correct backward in float32 (or float64) leaves rounding-sized
// values there. Judged alone their tolerance is 0; judged with dV, rounding at dV's scale passes and an
// error a thousand times larger fails.
TEST_CASE("judged together: one-key attention's zero dQ and dK at dV's scale") {
  const Contract& c = contract("02-attention");
  int cases = 0;
  for (const char* name : {"q1_k1_d32", "q239_k1_d64_causal"}) {
    INFO("case " << name);
    const CaseFolder cf = read_case(c, whole_case("02-attention", name));
    const Array<double> dV = npy_as_double(cf.expected.at("dV"));
    double scale = 0;
    for (double v : dV.data) scale = std::max(scale, std::abs(v));
    REQUIRE(scale > 0);
    for (const char* out : {"dQ", "dK"}) {
      INFO("output " << out);
      const Array<double> o = npy_as_double(cf.expected.at(out));
      for (double v : o.data) REQUIRE(v == 0);  // the true gradient is exactly zero
      ++cases;
      auto noisy = [&](double amp) {  // alternating +-amp: rounding-like values where 0 is exact
        Array<double> a = o;
        for (int64_t i = 0; i < a.size(); ++i) a.data[i] = (i % 2 ? amp : -amp);
        return a;
      };
      const double eps32 = 0x1p-23, eps64 = 0x1p-52;
      CHECK(check(c, cf.inputs, cf.params, cf.expected, out, to_npy(noisy(2 * eps32 * scale).cast<float>())).pass);
      // A float64 candidate is judged by its derived bound (core/fp64_bound.hpp), which at these exact zeros
      // is a floor from the terms of dS = P (dP - D) (the roundings of dP and D), not 0: half of it passes,
      // twice it fails. (Noise at 2 eps64 x dV's scale, the judged-together scale, exceeds it on two of the
      // four outputs: the derived floor is that of dQ's and dK's own terms, and the float64 rungs pass it,
      // tests/test_fp64_bound.cpp.)
      const Array<double> fb = npy_as_double(c.fp64_bound(cf.inputs, cf.params, cf.expected).at(out));
      Array<double> half = o, twice = o;
      int64_t floored = 0;  // fully masked rows (q239_k1's first 238) are exactly 0 in every rung: bound 0
      for (int64_t i = 0; i < o.size(); ++i) {
        floored += fb.data[i] > 0;
        half.data[i] = (i % 2 ? 0.5 : -0.5) * fb.data[i], twice.data[i] = (i % 2 ? 2.0 : -2.0) * fb.data[i];
      }
      CHECK(floored > 0);
      CHECK(check(c, cf.inputs, cf.params, cf.expected, out, to_npy(half)).pass);
      CHECK_FALSE(check(c, cf.inputs, cf.params, cf.expected, out, to_npy(twice)).pass);
      (void)eps64;
      CHECK_FALSE(check(c, cf.inputs, cf.params, cf.expected, out, to_npy(noisy(2e3 * eps32 * scale).cast<float>())).pass);
      // Alone, the tolerance is k x the baseline's own rounding there (its D = rowsum(dO o O), as FA2's,
      // leaves rounding in dQ and dK; with D = P . dP it was exactly 0 and so was the tolerance): of
      // rounding size, so the large error fails alone too.
      const Array<double> b = npy_as_double(c.baseline(cf.inputs, cf.params, DType::F4).at(out));
      const CompareReport alone = compare(o, noisy(2e3 * eps32 * scale).cast<float>(), b, c.tolerance(out, DType::F4));
      CHECK_FALSE(alone.pass);
    }
  }
  CHECK(cases == 4);
}
