// tests/04-moe/test_moe_deepgemm_k_grouped_fp8.cpp -- DeepGEMM's k-grouped layout with FP8 values
// (04-moe/deepgemm_k_grouped_fp8, ref/src/04-moe/deepgemm_k_grouped_fp8.cpp): the oracle pinned against a hand
// computation from the files (codes times their scales, group g's rows, plus c; an empty group gives c); stage 07's
// fp8_block rung (14- and 24-bit accumulators) and a float32 dequantise-then-sum candidate in reverse order pass, in
// every scale form, the packed UE8M0 case giving the float32-scale case's oracle; the planted bugs fail: the scale of
// the neighbouring K block, a group boundary one row late, scales read untransposed; bad inputs refused by name.
#include <doctest/doctest.h>

#include <cmath>

#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/core/contract.hpp"

using namespace ladder;
using namespace ladder::moe;

namespace {
struct Case {
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};
Case make(const std::string& scales, bool accumulate = true) {
  DeepGemmKSpec s;
  s.m = 26;  // align4(26) = 28: the TMA padding of the scale rows is there
  s.scales = scales, s.accumulate = accumulate;
  Case c{deepgemm_k_grouped_fp8_inputs(s), deepgemm_k_grouped_fp8_params(s), {}};
  c.expected = run_oracle(contract(kDeepGemmKGroupedFp8), c.in, c.params);
  return c;
}
CheckReport judge(const Case& c, const NpyData& d) {
  return check(contract(kDeepGemmKGroupedFp8), c.in, c.params, c.expected, "d", d);
}
}  // namespace

TEST_CASE("deepgemm k_grouped fp8: d[g] = c[g] + sum of the dequantised a[r]^T b[r]; shapes of the scales") {
  const Case c = make("fp32");
  const Array<float> a = from_npy<float>(c.in.at("a"), "a"), b = from_npy<float>(c.in.at("b"), "b");
  const Array<float> sa = from_npy<float>(c.in.at("sa"), "sa"), sb = from_npy<float>(c.in.at("sb"), "sb");
  const Array<float> acc = from_npy<float>(c.in.at("c"), "c");
  CHECK(sa.shape == Shape{6, 28});  // sum(ks) = 768 rows: 6 K blocks
  CHECK(sb.shape == Shape{6, 40});
  const Array<double> d = npy_as_double(c.expected.at("d"));
  CHECK(d.shape == Shape{4, 26, 40});
  for (int64_t j = 0; j < 40; ++j) CHECK(d.data[(1 * 26 + 5) * 40 + j] == acc.data[(1 * 26 + 5) * 40 + j]);  // ks[1] = 0
  for (const auto& [g, lo, hi] : {std::tuple{0, 0, 256}, std::tuple{3, 384, 768}}) {
    double want = acc.data[(g * 26 + 3) * 40 + 7];
    for (int64_t r = lo; r < hi; ++r)
      want += (static_cast<double>(a.data[r * 26 + 3]) * sa.data[(r / 128) * 28 + 3]) *
              (static_cast<double>(b.data[r * 40 + 7]) * sb.data[(r / 128) * 40 + 7]);
    CHECK(d.data[(g * 26 + 3) * 40 + 7] == doctest::Approx(want).epsilon(1e-13));
  }
}

TEST_CASE("deepgemm k_grouped fp8: the rung and a dequantised float32 candidate pass; planted bugs fail") {
  for (const char* scales : {"fp32", "ue8m0", "ue8m0_packed"})
    for (const bool accumulate : {true, false}) {
      const Case c = make(scales, accumulate);
      CAPTURE(scales);
      CAPTURE(accumulate);
      for (const int acc : {14, 24}) {
        const CheckReport r = judge(c, deepgemm_k_grouped_fp8_rung(c.in, c.params, acc).at("d"));
        INFO(acc, "-bit: ", r.text);
        CHECK(r.pass);
      }
      const CheckReport ok = judge(c, deepgemm_k_grouped_fp8_run(c.in, c.params).at("d"));
      INFO(ok.text);
      CHECK(ok.pass);
      CHECK(ok.metrics.at("deepgemm_calc_diff") < 1e-9);
      if (std::string(scales) == "ue8m0_packed") continue;  // the bugs read the float32 scale arrays
      for (const KFp8Bug bug : {KFp8Bug::neighbour_block_scale, KFp8Bug::boundary_shift, KFp8Bug::scales_untransposed}) {
        const CheckReport r = judge(c, deepgemm_k_grouped_fp8_run(c.in, c.params, bug).at("d"));
        INFO(static_cast<int>(bug), ": ", r.text);
        CHECK_FALSE(r.pass);
      }
    }
}

TEST_CASE("deepgemm k_grouped fp8: packed UE8M0 scales unpack exactly to the float32 case's") {
  const Case u = make("ue8m0"), p = make("ue8m0_packed");
  CHECK(p.in.at("sa").shape == Shape{3, 28});  // ks 256, 0, 128, 384: ceil(2/4) + 0 + ceil(1/4) + ceil(3/4) rows
  CHECK(p.in.at("sa").dtype == DType::I4);
  CHECK(u.expected.at("d").bytes == p.expected.at("d").bytes);
  const Array<int32_t> w = from_npy<int32_t>(p.in.at("sa"), "sa");
  const Array<float> sa = from_npy<float>(u.in.at("sa"), "sa");
  // Group 3's K blocks 3, 4, 5 in bytes 0, 1, 2 of its one packed row (row 2), column 0.
  for (int b = 0; b < 3; ++b)
    CHECK(std::ldexp(1.0f, static_cast<int>((static_cast<uint32_t>(w.data[2 * 28]) >> (8 * b)) & 0xFF) - 127) ==
          sa.data[(3 + b) * 28]);
}

TEST_CASE("deepgemm k_grouped fp8: bad inputs are refused naming the input") {
  const Case c = make("fp32");
  const Contract& k = contract(kDeepGemmKGroupedFp8);
  Tensors bad = c.in;
  Array<float> a = from_npy<float>(c.in.at("a"), "a");
  a.data[5] = 0.3f;  // not an E4M3 value
  bad["a"] = to_npy(a);
  CHECK_THROWS_WITH_AS(run_oracle(k, bad, c.params), doctest::Contains("input a[5] = 0.3 violates an E4M3 value"), Error);
  bad = c.in;
  bad["sa"] = to_npy(Array<float>({6, 26}, 1.0f));  // unpadded: not TMA-aligned
  CHECK_THROWS_WITH_AS(run_oracle(k, bad, c.params), doctest::Contains("input sa has shape [6, 26]"), Error);
  bad = c.in;
  Array<float> sb = from_npy<float>(c.in.at("sb"), "sb");
  sb.data[41] = -1.0f;
  bad["sb"] = to_npy(sb);
  CHECK_THROWS_WITH_AS(run_oracle(k, bad, c.params), doctest::Contains("input sb[1, 1] = -1 violates a finite scale > 0"),
                       Error);
  nlohmann::json p = c.params;
  p["scales"] = "ue8m0";
  CHECK_THROWS_WITH_AS(run_oracle(k, c.in, p), doctest::Contains("a power of two (UE8M0)"), Error);
  p["scales"] = "e8m0";
  CHECK_THROWS_WITH_AS(run_oracle(k, c.in, p), doctest::Contains("param scales = \"e8m0\""), Error);
  p = c.params;
  p["k_alignment"] = 64;
  bad = c.in;
  Array<int32_t> ks({4});
  ks.data = {256, 64, 64, 384};
  bad["ks"] = to_npy(ks);
  CHECK_THROWS_WITH_AS(run_oracle(k, bad, p), doctest::Contains("input ks[1] = 64 violates a multiple of 128"), Error);
}
