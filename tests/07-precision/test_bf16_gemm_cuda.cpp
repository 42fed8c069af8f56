// tests/07-precision/test_bf16_gemm_cuda.cpp -- the bf16 tensor-core GEMM (cuda::precision::bf16_gemm,
// cuda/src/07-precision/bf16_gemm.cuh) against the fp64 oracle within the derived bound of bf16_gemm_check.hpp:
// one whole 128 x 128 tile, a ragged 77 x 45 x 40 (masks on every edge, a half-filled last K step), K = 8 (one
// chunk per row), and 2 x 2 tiles with K = 160 (five steps: the 3-stage ring wraps). Every output is judged
// (C starts as NaN, so a cell never written fails) and C's guard past M x N must stay untouched. Bad K,
// misaligned operands and oversized M are refused naming the parameter. Under SIMT in three schedules and
// under TSan (the ragged shape alone there); on the device in the GPU build. Every tile configuration
// (cp::Bf16GemmConfig: the larger ones on dynamic shared memory with the opt-in) the same way, on those shapes and
// on edges where M, N are not multiples of any block tile and K % 8 == 0 is not a multiple of any k step (32,
// 64), over several blocks both ways; a value that is no configuration is refused naming `config`. The planted
// mistakes (and a big configuration launched without the opt-in): test_bf16_gemm_cuda_planted.cu. And the CUDA
// rung cuda/bf16_gemm (cuda/src/07-precision/registry.cpp) on every bf16_gemm golden through stage 07's contract:
// xq, wq exactly, y within the recipe's bound (bf16_gemm.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bf16_gemm_check.hpp"
#include "golden_util.hpp"
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"
#include "precision_cuda_util.hpp"

using namespace ladder;
namespace cp = ladder::cuda::precision;

namespace {
#if defined(SIMT_TSAN)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

struct GemmShape {
  int64_t M, N, K;
};

// C = A B^T of random bf16 operands in `config`: C starts as NaN (a cell never written fails), its guard past
// M x N must stay untouched, and every output must lie within the derived bound (bf16_gemm_check.hpp).
void check_shape(Rng& rng, const GemmShape& s, cp::Bf16GemmConfig config) {
  CAPTURE(s.M);
  CAPTURE(s.N);
  CAPTURE(s.K);
  const std::vector<uint16_t> a = test_bf16::random_bf16(rng, s.M, s.K), b = test_bf16::random_bf16(rng, s.N, s.K);
  const size_t cells = static_cast<size_t>(s.M * s.N), guard = static_cast<size_t>(s.N + 64);
  const std::vector<float> nan(cells + guard, std::numeric_limits<float>::quiet_NaN());
  cuda::DeviceBuffer<uint16_t> da(a), db(b);
  cuda::DeviceBuffer<float> dc(nan);
  cp::bf16_gemm(da.data(), db.data(), s.M, s.N, s.K, dc.data(), config);
  cuda::sync();
  std::vector<float> c = dc.to_host();
  CHECK(std::memcmp(c.data() + cells, nan.data() + cells, guard * sizeof(float)) == 0);  // nothing past C
  c.resize(cells);
  const test_bf16::Judged j = test_bf16::judge(a, b, c, s.M, s.N, s.K);
  INFO("worst |c - exact| / bound = " << j.worst);
  CHECK(j.outside == 0);
}
}  // namespace

TEST_CASE("07 CUDA: the bf16 tensor-core GEMM is within its derived bound of the fp64 oracle, masks included") {
  const std::vector<GemmShape> shapes =
      kTsan ? std::vector<GemmShape>{{77, 45, 40}}
            : std::vector<GemmShape>{{128, 128, 64}, {77, 45, 40}, {130, 140, 8}, {200, 136, 160}};
  Rng rng(4005);
  for (const GemmShape& s : shapes) check_shape(rng, s, cp::Bf16GemmConfig::tile128x128);
}

TEST_CASE("07 CUDA: every bf16 GEMM tile configuration is within the same bound, on ragged shapes and edges") {
  const std::vector<GemmShape> shapes =
      kTsan ? std::vector<GemmShape>{{77, 45, 40}}
            : std::vector<GemmShape>{{128, 128, 64}, {77, 45, 40},   {130, 140, 8},
                                     {200, 136, 160}, {300, 270, 200}, {257, 129, 72}};
  for (int ci = 0; ci < cp::kBf16GemmConfigs; ++ci) {
    const auto config = static_cast<cp::Bf16GemmConfig>(ci);
    const std::string name = cp::bf16_gemm_config_name(config);
    CAPTURE(name);
    Rng rng(4007 + static_cast<uint64_t>(ci));
    for (const GemmShape& s : shapes) check_shape(rng, s, config);
  }
}

TEST_CASE("07 CUDA: bf16_gemm refuses a config that is none of Bf16GemmConfig's, and M past its grid, naming them") {
  cuda::DeviceBuffer<uint16_t> a(std::vector<uint16_t>(64, 0)), b(std::vector<uint16_t>(64, 0));
  cuda::DeviceBuffer<float> c(std::vector<float>(16, 0.0f));
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), 2, 2, 8, c.data(), static_cast<cp::Bf16GemmConfig>(4)),
                       doctest::Contains("bf16_gemm: config = 4 violates 0 <= config < 4"), Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), 2, 2, 8, c.data(), static_cast<cp::Bf16GemmConfig>(-1)),
                       doctest::Contains("config = -1 violates"), Error);
  // 256-row blocks: the grid's 65535 rows of blocks end at M = 65535 * 256.
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), int64_t{65535} * 256 + 1, 2, 8, c.data(),
                                     cp::Bf16GemmConfig::tile256x128),
                       doctest::Contains("M = 16776961 violates 0 <= M <= 16776960 (grid y = ceil(M / 256)"), Error);
}

TEST_CASE("07 CUDA: bf16_gemm refuses K % 8 != 0, misaligned operands and M past the grid, naming them") {
  cuda::DeviceBuffer<uint16_t> a(std::vector<uint16_t>(64, 0)), b(std::vector<uint16_t>(64, 0));
  cuda::DeviceBuffer<float> c(std::vector<float>(16, 0.0f));
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), 2, 2, 12, c.data()),
                       doctest::Contains("K = 12 violates K % 8 == 0"), Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), 2, 2, 0, c.data()), doctest::Contains("K = 0 violates"),
                       Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data() + 1, b.data(), 2, 2, 8, c.data()),
                       doctest::Contains("violates 16-byte alignment"), Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data() + 4, 2, 2, 8, c.data()), doctest::Contains("bf16_gemm: b = "),
                       Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(a.data(), b.data(), int64_t{65535} * 128 + 1, 2, 8, c.data()),
                       doctest::Contains("M = 8388481 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::bf16_gemm(nullptr, b.data(), 2, 2, 8, c.data()), doctest::Contains("null pointer"), Error);
  cp::bf16_gemm(nullptr, nullptr, 0, 5, 8, nullptr);  // nothing to compute: no launch, no pointer needed
}

TEST_CASE("07 CUDA: the bf16_gemm rung passes every bf16_gemm golden case through the contract") {
  const Contract& c = contract("07-precision");
  const Rung& rung = registry().find("07-precision", "cuda", "bf16_gemm");
  std::vector<std::string> cases;
  for (const std::string& n : precision::golden_case_names())
    if (n.rfind("bf16_", 0) == 0 && (!kTsan || n == "bf16_zeros_ties")) cases.push_back(n);
  CHECK(cases.size() == (kTsan ? 1u : 4u));
  for (const std::string& name : cases) {
    CAPTURE(name);
    const CaseFolder cf = test_precision::run_golden(c, rung, name, 3).cf;
    CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F8), doctest::Contains("no float64 function"),
                         Error);
  }
  // A case of another recipe is refused, naming both.
  const CaseFolder a8w8 = read_case(c, test::golden_dir("07-precision") / "a8w8_outliers");
  CHECK_THROWS_WITH_AS(run_rung(c, rung, a8w8.inputs, a8w8.params, DType::F4), doctest::Contains("params.recipe is"),
                       Error);
}
