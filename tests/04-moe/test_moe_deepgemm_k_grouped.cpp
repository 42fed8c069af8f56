// tests/04-moe/test_moe_deepgemm_k_grouped.cpp -- DeepGEMM's K-grouped layout (04-moe/deepgemm_k_grouped,
// ref/src/04-moe/deepgemm_k_grouped.cpp): the semantics pinned against an independent computation (group g's slice of
// a and b multiplied by hand, plus c; an empty group gives c exactly), a float32 candidate summing in another order
// passes, a group boundary shifted by one row fails, c ignored fails; bad ks refused naming the input.
#include <doctest/doctest.h>

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
Case make(bool accumulate = true) {
  DeepGemmKSpec s;
  s.accumulate = accumulate;
  Case c{deepgemm_k_grouped_inputs(s), deepgemm_k_grouped_params(s), {}};
  c.expected = run_oracle(contract(kDeepGemmKGrouped), c.in, c.params);
  return c;
}
CheckReport judge(const Case& c, const NpyData& d) {
  return check(contract(kDeepGemmKGrouped), c.in, c.params, c.expected, "d", d);
}
}  // namespace

TEST_CASE("deepgemm k_grouped: d[g] = c[g] + a[K_g]^T b[K_g]; an empty group gives c exactly") {
  const Case c = make();
  const Array<float> a = from_npy<float>(c.in.at("a"), "a"), b = from_npy<float>(c.in.at("b"), "b");
  const Array<float> acc = from_npy<float>(c.in.at("c"), "c");
  const Array<double> d = npy_as_double(c.expected.at("d"));
  CHECK(d.shape == Shape{4, 24, 40});
  for (int64_t j = 0; j < 40; ++j) CHECK(d.data[(1 * 24 + 5) * 40 + j] == acc.data[(1 * 24 + 5) * 40 + j]);  // ks[1] = 0
  double want = acc.data[(2 * 24 + 3) * 40 + 7];  // group 2: rows 256 .. 383
  for (int64_t r = 256; r < 384; ++r) want += static_cast<double>(a.data[r * 24 + 3]) * b.data[r * 40 + 7];
  CHECK(d.data[(2 * 24 + 3) * 40 + 7] == doctest::Approx(want).epsilon(1e-13));
}

TEST_CASE("deepgemm k_grouped: another summation order passes; a boundary shifted by a row and c ignored fail") {
  for (const bool accumulate : {true, false}) {
    const Case c = make(accumulate);
    const CheckReport ok = judge(c, deepgemm_k_grouped_run(c.in, c.params).at("d"));
    INFO(ok.text);
    CHECK(ok.pass);
    CHECK(ok.metrics.at("deepgemm_calc_diff") < 1e-9);
    for (const int shift : {1, -1}) {
      const CheckReport r = judge(c, deepgemm_k_grouped_run(c.in, c.params, shift).at("d"));
      INFO(shift, ": ", r.text);
      CHECK_FALSE(r.pass);
    }
  }
  const Case c = make(true);
  Tensors no_c = c.in;
  no_c.erase("c");
  const CheckReport r = judge(c, deepgemm_k_grouped_run(no_c, c.params).at("d"));
  CHECK_FALSE(r.pass);
}

TEST_CASE("deepgemm k_grouped: ks must be aligned and sum to the rows of a") {
  const Case c = make();
  Tensors bad = c.in;
  bad["ks"] = to_npy(Array<int32_t>({4}, 192));
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepGemmKGrouped), bad, c.params),
                       doctest::Contains("input ks[0] = 192 violates >= 0 and a multiple of k_alignment = 128"), Error);
  nlohmann::json p = c.params;
  p["k_alignment"] = 64;
  Array<int32_t> ks({4});
  ks.data = {256, 64, 128, 384};
  bad["ks"] = to_npy(ks);
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepGemmKGrouped), bad, p), doctest::Contains("input ks sums to 832"), Error);
}
