// tests/04-moe/test_moe_golden.cpp -- stage 04 goldens: regenerating every case (and the model) from its
// seed reproduces the committed files byte for byte (drift fails), a case written alone with --case
// carries its model and loads back, and every case's files are the ones case.json lists.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "golden_util.hpp"
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
