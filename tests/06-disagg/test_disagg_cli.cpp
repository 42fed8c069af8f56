// tests/06-disagg/test_disagg_cli.cpp -- `ladder simulate` and `ladder reproduce 06-disagg` through their entry
// points (tools/ladder/06-disagg/simulate.cpp, 06-disagg/reproduce.cpp): a config runs and prints its goodput,
// bad configs raise ladder::Error naming the key (main.cpp: one line, exit 2), and the reproduce
// section prints every identity and the Fig. 1 comparison.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "golden_util.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/json.hpp"
#include "source_dir.hpp"

namespace {

const std::filesystem::path kConfigs = ladder::source_dir() / "data" / "disagg";

void run_simulate(std::vector<std::string> args) {
  CLI::App app{"ladder"};
  ladder::cli::add_stage_commands(app, "06-disagg");  // simulate and plan
  args.insert(args.begin(), "simulate");
  std::vector<const char*> argv{"ladder"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("ladder simulate: the example configs run; bad configs name the key") {
  CHECK_NOTHROW(run_simulate({"--config", (kConfigs / "distserve-fig1.json").string(), "--requests", "300"}));
  CHECK_NOTHROW(run_simulate({"--config", (kConfigs / "roofline-deepseek-v3-h800.json").string(), "--requests", "200",
                              "--no-goodput"}));
  CHECK_NOTHROW(run_simulate({"--config", (kConfigs / "table-example.json").string(), "--requests", "200", "--no-goodput"}));
  ladder::test::TempDir tmp;
  const nlohmann::json good = ladder::read_json(kConfigs / "distserve-fig1.json");
  const auto fails = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& msg) {
    nlohmann::json j = good;
    edit(j);
    const auto p = (tmp.path / "c.json").string();
    std::ofstream(p) << j.dump();
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(run_simulate({"--config", p, "--no-goodput"}), doctest::Contains(msg.c_str()), ladder::Error);
  };
  fails([](auto& j) { j["workload"]["sead"] = 1; }, "unknown key 'workload.sead'");
  fails([](auto& j) { j["workload"]["rate"] = -2; }, "workload.rate = -2 violates rate > 0");
  fails([](auto& j) { j["slo"]["tpot_s"] = 0; }, "slo.tpot_s = 0 violates > 0");
  fails([](auto& j) { j["placements"] = nlohmann::json::array({{{"prefill", 1}}}); }, "decode = 0 violates decode >= 1");
  fails([](auto& j) { j["workload"]["input"] = 70000; }, "cannot hold the longest request");
  CHECK_THROWS_WITH_AS(run_simulate({"--config", (tmp.path / "none.json").string()}), doctest::Contains("no such file"),
                       ladder::Error);
}

TEST_CASE("ladder reproduce 06-disagg: Fig. 1, M/D/1, identities and the roofline table, computed") {
  ladder::test::TempDir tmp;
  const std::string md = ladder::cli::stage_cli("06-disagg").reproduce({tmp.path, true});
  for (const char* s : {"| colocated |", "| 2P1D |", "M/D/1", "| 0.5 |", "Huawei A2 prefill", "DeepSeek day-6 nodes",
                        "JAX v5e-64", "| decode B 32, ctx 544 |", "Chunked prefill (Sarathi-Serve",
                        // the serving deployments end to end (serving.cpp): both, beside the report's figures
                        "| huawei-a2 (1P1D) |", "| huawei-cm384 (32P1D) |", "| 723 |", "| 1920 |", "| 1622 |"})
    CHECK(md.find(s) != std::string::npos);
}
