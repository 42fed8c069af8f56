// tests/07-precision/test_attn_bf16_cuda.cpp -- stage 07's CUDA rung attn_bf16 (stage 02's tensor-core forward
// tiled_bf16 running the bf16 attention recipe; cuda/src/07-precision/attn_bf16_rung.cpp) judged by the stage's
// contract, as the reference rung is: o and lse within the bound of ladder/07-precision/attn_bound.hpp on every
// attn_bf16 golden case (d 4, 8, 59 padded to 64; dv 17 != d; bc 32 and 64; softmax_scale 1 and the default).
// The params it cannot honour are refused naming them. A planted wrong candidate (the kernel's padded head dim's
// 1/sqrt(64) as the softmax scale, where the recipe says 1/sqrt(d) or params.softmax_scale: the mistake the
// padding invites) must fail the judge on every case. CTest runs this binary under SIMT_SCHEDULE=forward, reverse
// and random:1, and once in the TSan build.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "golden_util.hpp"
#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/07-precision/attn_bf16.hpp"

using namespace ladder;
namespace lp = ladder::precision;

namespace {

// The golden cases of recipe attn_bf16, by name.
std::vector<std::string> attn_cases(const Contract& c) {
  std::vector<std::string> r;
  for (const auto& e : std::filesystem::directory_iterator(test::golden_dir("07-precision"))) {
    const CaseFolder cf = read_case(c, e.path());
    if (cf.params.value("recipe", "") == "attn_bf16") r.push_back(e.path().filename().string());
  }
  std::sort(r.begin(), r.end());
  return r;
}

// Planted: the rung with the scale of the kernel's padded head dim, 1/sqrt(64), whatever the case declares.
Tensors padded_scale(const lp::Recipe& r, const Tensors& in) {
  const lp::AttnOperands a = lp::attn_operands(in, r);
  cuda::precision::AttnBf16Out o = cuda::precision::attn_bf16_tiled(a, 0.125f);
  return Tensors{{"o", lp::npy_of(std::move(o.o), {a.Lq, a.dv})}, {"lse", lp::npy_of(std::move(o.lse), {a.Lq})}};
}

// Whether every output of `rung` passes the judge on case `name`; the reports in the test log.
bool passes(const Contract& c, const Rung& rung, const std::string& name) {
  const CaseFolder cf = read_case(c, test::golden_dir("07-precision") / name);
  const Tensors out = run_rung(c, rung, cf.inputs, cf.params, DType::F4);
  REQUIRE(out.size() == 2);
  bool all = true;
  for (const auto& [k, v] : out) {
    const CheckReport r = check(c, cf.inputs, cf.params, cf.expected, k, v);
    MESSAGE(rung.key() << " on " << name << ", " << k << ": " << r.text);
    all = all && r.pass;
  }
  return all;
}

}  // namespace

TEST_CASE("07 CUDA: the attn_bf16 rung (tiled_bf16) passes every attn_bf16 golden through the contract") {
  const Contract& c = contract("07-precision");
  const Rung& rung = registry().find("07-precision", "cuda", "attn_bf16");
  const std::vector<std::string> names = attn_cases(c);
  REQUIRE(names.size() >= 3);  // attn_bf16_k1024, attn_bf16_ptrunc, attn_bf16_q5_k113
  for (const std::string& name : names) {
    CAPTURE(name);
    CHECK(passes(c, rung, name));
  }
  const CaseFolder cf = read_case(c, test::golden_dir("07-precision") / names.front());
  CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F8), doctest::Contains("no float64 function"),
                       Error);
  // A case of another recipe is refused, naming both.
  const CaseFolder a8 = read_case(c, test::golden_dir("07-precision") / "a8w8_outliers");
  CHECK_THROWS_WITH_AS(run_rung(c, rung, a8.inputs, a8.params, DType::F4), doctest::Contains("params.recipe is"),
                       Error);
}

TEST_CASE("07 CUDA: the planted attn_bf16 candidate (softmax scale 1/sqrt(64) of the padded head dim) is rejected") {
  const Contract& c = contract("07-precision");
  const Rung planted{"07-precision", "attn_bf16_padded_scale", "planted", "planted", "cuda",
                     lp::RecipeFns{"attn_bf16", nullptr, &padded_scale}, nullptr, ""};
  for (const std::string& name : attn_cases(c)) {
    CAPTURE(name);
    CHECK_FALSE(passes(c, planted, name));
  }
}

TEST_CASE("07 CUDA: the attn_bf16 rung refuses the params tiled_bf16 cannot honour, naming them") {
  const Contract& c = contract("07-precision");
  const Rung& rung = registry().find("07-precision", "cuda", "attn_bf16");
  CaseFolder cf = read_case(c, test::golden_dir("07-precision") / "attn_bf16_ptrunc");  // Lk = 200
  cf.params["bc"] = 128;  // 2 tiles declared, the kernel runs 4: outside the bound
  CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F4),
                       doctest::Contains("params.bc = 128 violates ceil(Lk / bc) >= ceil(Lk / 64) = 4"), Error);
  cf.params["bc"] = 200;  // one tile declared: the same
  CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F4), doctest::Contains("params.bc = 200"),
                       Error);
  cf.params["bc"] = 1;  // 200 tiles declared, the kernel runs 4: inside
  const Tensors out = run_rung(c, rung, cf.inputs, cf.params, DType::F4);
  for (const auto& [k, v] : out) CHECK(check(c, cf.inputs, cf.params, cf.expected, k, v).pass);
  cf.params["softmax_scale"] = 1e30;
  CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F4),
                       doctest::Contains("softmax_scale = 1e+30 times max |q_i| |k_j|"), Error);
  lp::AttnOperands a;  // head dims past the kernel's
  a.Lq = 1, a.Lk = 1, a.d = 129, a.dv = 1, a.sigma = 1;
  a.q.assign(129, 0.0f), a.k.assign(129, 0.0f), a.v.assign(1, 0.0f);
  CHECK_THROWS_WITH_AS(cuda::precision::attn_bf16_tiled(a, 1.0f), doctest::Contains("d = 129 violates d <= 128"),
                       Error);
  a.d = 1, a.dv = 200, a.q.assign(1, 0.0f), a.k.assign(1, 0.0f), a.v.assign(200, 0.0f);
  CHECK_THROWS_WITH_AS(cuda::precision::attn_bf16_tiled(a, 1.0f), doctest::Contains("dv = 200 violates dv <= 128"),
                       Error);
}
