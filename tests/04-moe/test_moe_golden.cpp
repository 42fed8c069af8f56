// tests/04-moe/test_moe_golden.cpp -- stage 04 goldens: regenerating every case (and the model) from its
// seed reproduces the committed files byte for byte (drift fails), a case written alone with --case
// carries its model and loads back, and every case's files are the ones case.json lists; the layer
// without a shared expert through the case contract.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "golden_util.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/04-moe/golden_cases.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/04-moe/golden.hpp"

using namespace ladder;

namespace {
std::string bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("every 04-moe golden case regenerates byte for byte (drift fails)") {
  const auto names = moe::golden_case_names();
  REQUIRE(names.size() >= 14);
  test::TempDir tmp;
  for (const auto& name : names) {
    CAPTURE(name);
    const auto committed = test::golden_dir(moe::kStage) / name;
    REQUIRE_MESSAGE(std::filesystem::exists(committed / "case.json"),
                    "missing golden case; run `ladder golden --regenerate --root data/golden` for 04-moe");
    moe::write_golden_case(name, tmp.path / name, false);
    size_t files = 0;
    for (const auto& f : std::filesystem::directory_iterator(committed)) {
      CAPTURE(f.path().filename().string());
      CHECK(bytes(f.path()) == bytes(tmp.path / name / f.path().filename()));
      ++files;
    }
    size_t written = 0;
    for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(tmp.path / name)) ++written;
    CHECK(files == written);
  }
}

TEST_CASE("a case written alone (--case) carries its model and loads back") {
  test::TempDir tmp;
  moe::write_golden_case("e8_T7", tmp.path / "c", true);
  const moe::GoldenCase alone = moe::load_case(tmp.path / "c");
  const moe::GoldenCase committed = moe::load_case(test::golden_dir(moe::kStage) / "e8_T7");
  CHECK(alone.weights.w2 == committed.weights.w2);
  CHECK(alone.x == committed.x);
  CHECK_THROWS_AS(moe::load_case(test::golden_dir(moe::kStage) / "model"), Error);
}

// No shared expert (issue 38): the committed case holds s1, s3 [D, 0] and s2 [0, D]; leaving the three out
// is the other spelling. The oracle's float32 rounding passes, a candidate that adds the model's shared
// expert (which this layer does not have) fails, and one of the three left out is named.
TEST_CASE("04-moe without a shared expert: [D, 0] or absent, through the contract") {
  const Contract& c = contract(moe::kStage);
  const CaseFolder cf = read_case(c, test::golden_dir(moe::kStage) / "e8_no_shared");
  REQUIRE(cf.inputs.at("s1").shape == Shape{97, 0});
  REQUIRE(cf.inputs.at("s2").shape == Shape{0, 97});
  Tensors absent = cf.inputs;
  absent.erase("s1"), absent.erase("s3"), absent.erase("s2");
  CHECK(run_oracle(c, cf.inputs, cf.params).at("y").bytes == cf.expected.at("y").bytes);
  CHECK(run_oracle(c, absent, cf.params).at("y").bytes == cf.expected.at("y").bytes);
  const Array<double> y = from_npy<double>(cf.expected.at("y"), "y");
  CHECK(check(c, cf.inputs, cf.params, cf.expected, "y", to_npy(y.cast<float>())).pass);
  CHECK(check(c, absent, cf.params, cf.expected, "y", to_npy(y.cast<float>())).pass);

  const moe::GoldenCase shared = moe::load_case(test::golden_dir(moe::kStage) / "e8_T7");  // the model's Fs = 61
  REQUIRE(shared.weights.cfg.shared_inter == 61);
  const Mat<double> x = from_npy<float>(cf.inputs.at("x"), "x").mat().cast<double>();
  Mat<double> plus = y.mat();
  moe::add_shared(shared.weights, x, plus);
  const CheckReport r = check(c, cf.inputs, cf.params, cf.expected, "y", to_npy(Array<float>::from(plus.cast<float>())));
  CHECK_FALSE(r.pass);

  Tensors partial = cf.inputs;
  partial.erase("s2");
  CHECK_THROWS_WITH_AS(run_oracle(c, partial, cf.params), doctest::Contains("s1, s3, s2 given yes, yes, no"), Error);
  // Fs = 0 with s1 [D, 0] is a layer without a shared expert; a width that is not 0 under Fs = 0 is named.
  moe::Weights<double> w = shared.weights;
  w.cfg.shared_inter = 0;
  w.s1.resize(97, 0), w.s3.resize(97, 0), w.s2.resize(0, 97);
  CHECK_NOTHROW(moe::check_weights(w));
  w.s1.resize(97, 3);
  CHECK_THROWS_WITH_AS(moe::check_weights(w), doctest::Contains("s1 [97, 3]"), Error);
}
