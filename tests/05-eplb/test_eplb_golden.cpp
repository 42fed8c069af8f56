// tests/05-eplb/test_eplb_golden.cpp -- stage 05 goldens (data/golden/05-eplb/<case>/): regenerating each
// case reproduces the committed files exactly (drift fails), running the case's registered rung on
// the committed weight.npy reproduces the committed outputs, and every registered rung has a case.
#include <doctest/doctest.h>

#include <set>

#include "golden_util.hpp"
#include "lab_check.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "ladder/05-eplb/golden_cases.hpp"

using namespace ladder;
using namespace ladder::eplb;

namespace {

const Registry& eplb_registry() {
  static const Registry reg = [] {
    Registry r;
    register_eplb(r);
    return r;
  }();
  return reg;
}

Config config_of(const nlohmann::json& j) {
  const auto& p = j.at("params");
  return Config{p.at("num_replicas").get<Index>(), p.at("num_groups").get<Index>(), p.at("num_nodes").get<Index>(),
                p.at("num_gpus").get<Index>(), p.at("num_packs").get<Index>()};
}

}  // namespace

// A test of the oracle itself: not part of the lab (scripts/lab leaves the suite "judge" out).
TEST_CASE("every 05-eplb golden case regenerates exactly (drift fails)" * doctest::test_suite("judge")) {
  const auto names = golden_case_names();
  REQUIRE(names.size() >= 8);
  test::TempDir tmp;
  for (const auto& name : names) {
    CAPTURE(name);
    const auto committed = test::golden_dir(kStage) / name;
    REQUIRE_MESSAGE(std::filesystem::exists(committed / "case.json"),
                    "missing golden case; run `ladder golden --regenerate 05-eplb`");
    write_golden_case(name, tmp.path / name);
    const nlohmann::json j = read_json(committed / "case.json");
    CHECK(read_json(tmp.path / name / "case.json") == j);
    for (const auto& [out, rule] : j.at("tolerance").items())  // every output exact, as the contract says
      if (out != "baseline") CHECK_MESSAGE(rule.at("rule") == "exact", out);
    CHECK(load_npy<double>(tmp.path / name / "weight.npy").data == load_npy<double>(committed / "weight.npy").data);
    for (const auto& out : j.at("outputs")) {
      const std::string file = out.get<std::string>() + ".npy";
      CAPTURE(file);
      const ExactReport r =
          compare_exact(load_npy<int64_t>(committed / file), load_npy<int64_t>(tmp.path / name / file));
      CHECK_MESSAGE(r.pass, r.text());
    }
  }
}

TEST_CASE("the registered rung on a committed weight.npy reproduces the committed outputs") {
  Coverage cov;
  for (const auto& name : golden_case_names()) {
    CAPTURE(name);
    const auto dir = test::golden_dir(kStage) / name;
    const nlohmann::json j = read_json(dir / "case.json");
    const Rung& rung = eplb_registry().find(kStage, "ref", j.at("rungs").at(0).get<std::string>());
    cov.mark(rung);
    const Array<double> weight = load_npy<double>(dir / "weight.npy");
    const Outputs outs = rung.fn<RungFn>()(Mat<double>(weight.mat()), config_of(j));
    REQUIRE(outs.size() == j.at("outputs").size());
    for (const auto& [out_name, arr] : outs) {
      // A failure names the rung, the output and the first differing [row, col] (tests/lab_check.hpp).
      const Array<int64_t> want = load_npy<int64_t>(dir / (out_name + ".npy"));
      const std::vector<std::string> dims = want.shape.size() == 2 ? std::vector<std::string>{"row", "col"}
                                                                   : std::vector<std::string>{};
      test::check_exact({rung.id, "float64", out_name, name, dims}, want.data, arr.data, want.shape);
      CHECK(arr.shape == want.shape);
    }
    // A deliberately wrong candidate -- the first output with one element changed -- must fail.
    Array<Index> wrong = outs.front().second;
    wrong.data[wrong.data.size() / 2] += 1;
    CHECK_FALSE(compare_exact(load_npy<int64_t>(dir / (outs.front().first + ".npy")), wrong).pass);
  }
  CHECK(cov.missing(eplb_registry(), kStage, "ref").empty());
}

TEST_CASE("registry: four ref rungs with docs and cost formulas") {
  const auto rungs = eplb_registry().stage(kStage, "ref");
  std::set<std::string> ids;
  for (const Rung* r : rungs) {
    ids.insert(r->id);
    CHECK_FALSE(r->doc.empty());
    CHECK_FALSE(r->cost_doc.empty());
  }
  CHECK(ids == std::set<std::string>{"balanced_packing", "replicate_experts", "hierarchical", "global"});
  const Registry& reg = eplb_registry();
  // V3 prefill: L = 58, n = 256, R = 288, 8 groups, 4 nodes.
  const Cost h = reg.find(kStage, "ref", "hierarchical").cost({58, 256, 288, 8, 4});
  CHECK(h.bytes_read == 8.0 * 58 * 256);
  CHECK(h.bytes_written == 8.0 * (2 * 58 * 288 + 58 * 256));
  CHECK(h.flops == 58.0 * 256 + 58 * 8 + 58.0 * 32 * 256 / 4 + 2.0 * 58 * 288);
  CHECK(reg.find(kStage, "ref", "global").cost({58, 256, 288}) ==
        reg.find(kStage, "ref", "hierarchical").cost({58, 256, 288, 1, 1}));
  CHECK(reg.find(kStage, "ref", "replicate_experts").cost({2, 12, 16}).flops == 2.0 * 4 * 12);
  CHECK_THROWS_AS(reg.find(kStage, "ref", "hierarchical").cost({58, 256}), ladder::Error);
}
