// tests/01-softmax/test_softmax_cuda.cpp -- stage 01 CUDA rungs (run on the CPU through SIMT) vs the fp64
// oracle under the tolerance rule, on every golden case and on awkward random shapes. CTest runs this
// binary under SIMT_SCHEDULE=forward, reverse and random:1, and once more in the TSan build, so a
// missing __syncthreads in cuda/src/01-softmax/softmax.cu fails at least one of them.
// The oracle is the committed y.npy, or the reference's fp64 safe softmax, and the float baseline the
// reference's safe rung, both from lab_oracle.hpp: never the lab student's softmax.hpp.
#include <doctest/doctest.h>

#include <cmath>

#include "golden_util.hpp"
#include "lab_check.hpp"
#include "lab_oracle.hpp"
#include "special_rows.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/01-softmax/softmax.hpp"
#include "ladder/01-softmax/golden_cases.hpp"
#include "ladder/01-softmax/softmax.hpp"

using namespace ladder;
namespace fs = std::filesystem;

namespace {
const std::string kStage = "01-softmax";
// CUDA rungs call the device's expf (2 ulp, not correctly rounded): the rule adds that documented bound
// (ladder/core/device_math.hpp). Without it v1_naive failed len_1025 on an H100.
const Tolerance kCudaTol = [] {
  Tolerance t = contract("01-softmax").tolerance("y", DType::F4);
  t.device_rel = contract("01-softmax").output("y").device_rel;  // as `ladder check --device`
  return t;
}();
Coverage coverage;

Array<float> run(const Rung& r, const Array<float>& x) {
  coverage.mark(r);
  Array<float> y(x.shape, -7.0f);
  r.fn<softmax::RowsFns>().f32(x.data.data(), y.data.data(), x.rows(), x.cols());
  return y;
}
// The reference's rows function (lab_oracle.hpp): the judge's baselines and fp64 oracle.
template <class T>
Array<T> reference(const std::string& rung, const Array<T>& x) {
  Array<T> y(x.shape);
  lab_oracle::softmax_rows(rung, x.data.data(), y.data.data(), x.rows(), x.cols());
  return y;
}
// The contract's rule for y (elementwise, with the softmax row's structural facts), as `ladder check
// --device` applies it to a GPU's output: plus CUDA's expf allowance.
void check_against_oracle(const Rung& r, const Array<float>& x, const Array<double>& oracle, const std::string& what) {
  const Array<double> mask = x.cast<double>();
  test::check_elementwise({r.id, "float32", "y", what, {"row", "col"}}, oracle, run(r, x), reference("safe", x),
                          kCudaTol, &mask);
}
}  // namespace

TEST_CASE("the registry holds the four CUDA rungs") {
  const auto rungs = registry().stage(kStage, "cuda");
  REQUIRE(rungs.size() == 4);
  CHECK(rungs[0]->id == "v1_naive");
  CHECK(rungs[3]->id == "v4_online_warp");
}

TEST_CASE("every CUDA rung vs the fp64 oracle on every golden case") {
  for (const std::string& name : softmax::golden_case_names()) {
    CAPTURE(name);
    const fs::path dir = test::golden_dir(kStage) / name;
    const nlohmann::json j = read_json(dir / "case.json");
    const bool sampled = j["stored"] == "sample";
    const Array<float> x = sampled ? softmax::golden_case_input(name) : load_npy<float>(dir / "x.npy");
    for (const Rung* r : registry().stage(kStage, "cuda")) {
      CAPTURE(r->key());
      if (r->id == "v1_naive" && j["naive_float32"] != "ok") {
        const Array<float> y = run(*r, x);
        bool nonfinite = false;
        for (float v : y.data) nonfinite = nonfinite || !std::isfinite(v);
        CHECK_MESSAGE(nonfinite, "rung v1_naive (float32), output y, case " << name  // the lesson holds on the GPU too
                                 << ": expected an overflow (inf/NaN), got finite values everywhere");
        continue;
      }
      // A sampled case on its whole row: the reference's fp64 oracle (test_softmax.cpp checks the
      // committed sample equals it).
      check_against_oracle(*r, x, sampled ? reference("safe", x.cast<double>()) : load_npy<double>(dir / "y.npy"),
                           name);
    }
  }
}

TEST_CASE("every CUDA rung on awkward shapes: cols in {1, 31, 32, 33, 97, 1023, 4097}") {
  Rng rng(11);
  for (int64_t rows : {1, 5, 9}) {
    for (int64_t cols : {1, 31, 32, 33, 97, 1023, 4097}) {
      CAPTURE(rows);
      CAPTURE(cols);
      Array<float> x({rows, cols});
      for (int64_t r = 0; r < rows; ++r)  // rows of different scales and offsets (stale state shows; naive stays below exp overflow)
        for (int64_t c = 0; c < cols; ++c)
          x.data[r * cols + c] = static_cast<float>((1 + r) * 0.5 * rng.normal() + 2.0 * static_cast<double>(r));
      const Array<double> oracle = reference("safe", x.cast<double>());
      const std::string what = "random " + std::to_string(rows) + "x" + std::to_string(cols);
      for (const Rung* r : registry().stage(kStage, "cuda")) check_against_oracle(*r, x, oracle, what);
    }
  }
}

TEST_CASE("NaN and inf rows: every CUDA rung follows the semantics (all -inf -> zeros, NaN or +inf -> the row NaN)") {
  // The rows of special_rows.hpp at lengths that take each launch path of v2/v3 (a warp, float4 and
  // scalar slices of every kPer, and 16387 unaligned: the strided fallback) and v4's lanes holding one
  // or two elements; the golden case nan_inf as committed. v1_naive keeps its lesson on the all -inf row.
  namespace sp = test::softmax_special;
  std::vector<std::pair<std::string, Array<float>>> cases;
  for (int64_t V : {1, 5, 37, 300, 1025, 4100, 16387})
    cases.emplace_back("special rows of length " + std::to_string(V), sp::rows(V));
  cases.emplace_back("nan_inf", load_npy<float>(test::golden_dir(kStage) / "nan_inf" / "x.npy"));
  for (const auto& [what, x] : cases)
    for (const Rung* r : registry().stage(kStage, "cuda"))
      sp::check(r->id, "float32", what, x, run(*r, x), r->id == "v1_naive");
}

TEST_CASE("a wrong kernel result is caught: v3 applied to a row-shifted input fails the rule") {
  const Array<float> x = load_npy<float>(test::golden_dir(kStage) / "len_97" / "x.npy");
  const Array<double> oracle = load_npy<double>(test::golden_dir(kStage) / "len_97" / "y.npy");
  Array<float> shifted = x;
  std::rotate(shifted.data.begin(), shifted.data.begin() + 1, shifted.data.end());  // off-by-one column
  const Array<float> y = run(registry().find(kStage, "cuda", "v3_online"), shifted);
  CHECK_FALSE(compare(oracle, y, reference("safe", x), Tolerance{}).pass);
}

TEST_CASE("bad shapes raise ladder::Error naming the parameter") {
  CHECK_THROWS_WITH_AS(cuda::softmax::v2_safe(nullptr, nullptr, 2, 0), doctest::Contains("cols = 0"), Error);
  CHECK_THROWS_WITH_AS(cuda::softmax::v3_online(nullptr, nullptr, -1, 4), doctest::Contains("rows = -1"), Error);
  CHECK_THROWS_WITH_AS(cuda::softmax::v1_naive(nullptr, nullptr, 1, 4), doctest::Contains("null"), Error);
}

TEST_CASE("every registered CUDA rung of stage 01 was exercised") {
  CHECK(coverage.missing(registry(), kStage, "cuda").empty());
}
