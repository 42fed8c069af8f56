// tests/05-eplb/test_eplb_cli.cpp -- `ladder eplb` and `ladder reproduce 05-eplb` through their CLI entry
// points (tools/ladder/05-eplb/commands.cpp, 05-eplb/reproduce.cpp): good input prints the placement, bad
// input raises ladder::Error (main.cpp turns it into one line and exit 2), and every number the
// reproduce section compares with the sources matches exactly.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "golden_util.hpp"
#include "ladder/core/error.hpp"

namespace {

// Parses `ladder eplb ARGS...` with only stage 05's subcommand registered.
void run_eplb(std::vector<std::string> args) {
  CLI::App app{"ladder"};
  ladder::cli::add_stage_commands(app, "05-eplb");
  args.insert(args.begin(), "eplb");
  std::vector<const char*> argv{"ladder"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

void write(const std::filesystem::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST_CASE("ladder eplb: JSON and .npy loads run; bad input raises ladder::Error with one clear message") {
  ladder::test::TempDir tmp;
  const auto good = (tmp.path / "w.json").string();
  write(good, "[[90,132,40,61,104,165,39,4,73,56,183,86],[20,107,104,64,19,197,187,157,172,86,16,27]]");
  CHECK_NOTHROW(run_eplb({"--weights", good, "--replicas", "16", "--groups", "4", "--nodes", "2", "--gpus", "8",
                          "--out", (tmp.path / "out").string()}));
  CHECK(std::filesystem::exists(tmp.path / "out" / "log2phy.npy"));
  const auto npy = (ladder::test::golden_dir("05-eplb") / "v3_decode" / "weight.npy").string();
  CHECK_NOTHROW(run_eplb({"--weights", npy, "--replicas", "288", "--groups", "8", "--nodes", "18", "--gpus", "144",
                          "--layer", "0"}));

  const auto fails = [&](std::vector<std::string> args, const std::string& msg) {
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(run_eplb(args), doctest::Contains(msg.c_str()), ladder::Error);
  };
  fails({"--weights", good, "--replicas", "10", "--gpus", "4"}, "num_replicas = 10 violates num_replicas % num_gpus");
  fails({"--weights", good, "--replicas", "16", "--gpus", "8", "--layer", "2"}, "--layer 2 violates");
  fails({"--weights", (tmp.path / "w.txt").string(), "--replicas", "16", "--gpus", "8"}, "violates .npy or .json");
  fails({"--weights", (tmp.path / "none.json").string(), "--replicas", "16", "--gpus", "8"}, "no such file");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"[[1,2],[3]]", "row 1 has 1 entries"},
      {"{\"x\": 1}", "under \"weight\""},
      {"[[1,\"a\"]]", "violates weight is a number"},
      {"[[1,2", "not valid JSON"},
      {"[[1,-2]]", "weight(0, 1) = -2 violates weight finite and >= 0"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    const auto f = (tmp.path / ("bad" + std::to_string(i) + ".json")).string();
    write(f, bad[i].first);
    fails({"--weights", f, "--replicas", "2", "--gpus", "1"}, bad[i].second);
  }
  const auto truncated = (tmp.path / "cut.npy").string();
  write(truncated, std::string("\x93NUMPY\x01\x00", 8));
  fails({"--weights", truncated, "--replicas", "2", "--gpus", "1"}, "cut.npy");
  CHECK_THROWS_AS(run_eplb({"--weights", good, "--replicas", "x", "--gpus", "8"}), CLI::ParseError);
}

TEST_CASE("ladder reproduce 05-eplb: the README and code-reading numbers match exactly") {
  ladder::test::TempDir tmp;
  const std::string md = ladder::cli::stage_cli("05-eplb").reproduce({tmp.path, true});
  CHECK(md.find("DIFFERS") == std::string::npos);
  CHECK(md.find("MISMATCH") == std::string::npos);
  for (const char* line : {"phy2log: exact match with the README (32 of 32 entries)",
                           "phy2log: exact match with eplb.py's output (the README prints only the hierarchical "
                           "example) (32 of 32 entries)",
                           "per-GPU totals: exact match with the code reading's printout (8 of 8 entries)",
                           "step 3 pphy2phy (tie-order dependent): exact match with the code reading",
                           "| 18 nodes x 8 GPUs, 288 slots | global |"}) {
    CAPTURE(line);
    CHECK(md.find(line) != std::string::npos);
  }
}
