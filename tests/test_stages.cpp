// tests/test_stages.cpp -- a stage is one declaration (ladder/core/stage.hpp): every stage folder in the
// repository belongs to a registered stage, and every registered stage has every part its record
// promises (contract, rungs, goldens, chapter, lab, notebook, reproduce section, CUDA rungs, benchmarks).
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "ladder/core/stage.hpp"
#include "source_dir.hpp"

namespace fs = std::filesystem;
using namespace ladder;

namespace {

const fs::path kRoot = ladder::source_dir();

// Where a stage has a folder or file named by its id. Anything there that looks like a stage id
// (two digits, '-' or '_', a word) must be the id of a registered stage, spelled as registered, or
// <id>-<part> for a stage's second file there.
struct Place {
  std::string dir;        // relative to the root
  std::string suffix;     // "" for folders, ".ipynb" / ".json" for files named <id><suffix>
};
const std::vector<Place> kPlaces = {
    {"ref/src", ""},      {"cuda/src", ""},     {"tools/ladder", ""},  {"chapters", ""},
    {"data/golden", ""},  {"data/papers", ".json"}, {"notebooks", ".ipynb"},
    {"ref/include/ladder", ""}, {"cuda/include/ladder/cuda", ""}, {"tests", ""}, {"bench", ""},
};
// Folders whose stage files live in the stage's own subfolder: a file directly in them whose name
// carries a stage's id in either spelling (tests/test_04_moe.cpp, bench/04-moe.cpp) is misplaced.
const std::vector<std::string> kFoldered = {"ref/src", "cuda/src", "tools/ladder", "ref/include/ladder",
                                            "cuda/include/ladder/cuda", "tests", "bench"};

// One line per folder or file in `root` that looks like a stage's but names no registered stage.
std::vector<std::string> unregistered_stage_folders(const fs::path& root, const std::set<std::string>& ids) {
  static const std::regex looks_like_stage(R"(^[0-9][0-9][-_][A-Za-z]+.*)");
  std::vector<std::string> problems;
  for (const Place& p : kPlaces) {
    if (!fs::is_directory(root / p.dir)) continue;
    for (const auto& e : fs::directory_iterator(root / p.dir)) {
      std::string name = e.path().filename().string();
      if (!std::regex_match(name, looks_like_stage)) continue;
      if (p.suffix.empty() != e.is_directory()) continue;
      if (!p.suffix.empty()) {
        if (!name.ends_with(p.suffix)) continue;
        name = name.substr(0, name.size() - p.suffix.size());
      }
      // The stage's own folder, or a part of it named <id>-<part> (data/papers/06-disagg-deploy.json).
      const bool belongs = std::any_of(ids.begin(), ids.end(), [&](const std::string& id) {
        return name == id || name.starts_with(id + "-");
      });
      if (!belongs) problems.push_back(p.dir + "/" + e.path().filename().string());
    }
  }
  for (const std::string& dir : kFoldered) {
    if (!fs::is_directory(root / dir)) continue;
    for (const auto& e : fs::directory_iterator(root / dir)) {
      if (e.is_directory()) continue;
      const std::string name = e.path().filename().string();
      for (const std::string& id : ids) {
        std::string snake = id;
        std::replace(snake.begin(), snake.end(), '-', '_');
        if (name.find(id) != std::string::npos || name.find(snake) != std::string::npos) {
          problems.push_back(dir + "/" + name + ": belongs in " + dir + "/" + id + "/");
          break;
        }
      }
    }
  }
  return problems;
}

std::set<std::string> registered_ids() {
  std::set<std::string> ids;
  for (const Stage& s : stages()) ids.insert(s.id);
  return ids;
}

}  // namespace

TEST_CASE("stages: ids are NN-name, unique, in ladder order; the list is not empty") {
  REQUIRE(!stages().empty());
  std::string prev;
  for (const Stage& s : stages()) {
    INFO("stage " << s.id);
    CHECK(std::regex_match(s.id, std::regex(R"([0-9][0-9]-[a-z]+)")));
    CHECK(s.id > prev);
    prev = s.id;
    CHECK(!s.title.empty());
    CHECK(&stage(s.id) == &s);
  }
  CHECK_THROWS_WITH_AS(stage("04_moe"), doctest::Contains("did you mean '04-moe'"), Error);
}

TEST_CASE("stages: every stage folder in the repository is a registered stage") {
  const auto problems = unregistered_stage_folders(kRoot, registered_ids());
  for (const auto& p : problems) FAIL_CHECK(p << ": named like a stage, but no stage has this id");
}

TEST_CASE("stages: a misspelled or unregistered stage folder is caught (planted in a scratch tree)") {
  const fs::path root = fs::temp_directory_path() / fmt::format("ladder_test_stages_{}", ::getpid());
  fs::remove_all(root);
  fs::create_directories(root / "ref/src/04-moe");
  fs::create_directories(root / "cuda/src/04_moe");       // the other spelling
  fs::create_directories(root / "chapters/07-precision");  // a stage with no record
  fs::create_directories(root / "notebooks");
  std::ofstream(root / "notebooks/04-moe.ipynb") << "{}";
  std::ofstream(root / "notebooks/08-x.ipynb") << "{}";
  fs::create_directories(root / "tests/04-moe");
  std::ofstream(root / "tests/04-moe/test_moe.cpp") << "";  // in its folder: fine
  std::ofstream(root / "tests/test_04_moe_cuda.cpp") << "";  // a stage's test outside its folder
  fs::create_directories(root / "bench");
  std::ofstream(root / "bench/00_bounds.cpp") << "";         // no stage's: fine
  std::ofstream(root / "bench/04-moe.cpp") << "";
  const auto problems = unregistered_stage_folders(root, {"04-moe"});
  fs::remove_all(root);
  CHECK(problems == std::vector<std::string>{"cuda/src/04_moe", "chapters/07-precision", "notebooks/08-x.ipynb",
                                             "tests/test_04_moe_cuda.cpp: belongs in tests/04-moe/",
                                             "bench/04-moe.cpp: belongs in bench/04-moe/"});
}

TEST_CASE("stages: every record has the parts it promises") {
  for (const Stage& s : stages()) {
    INFO("stage " << s.id);
    // The contract, declared for this stage.
    REQUIRE(s.contract);
    CHECK(s.contract().stage == s.id);
    CHECK(static_cast<bool>(s.contract().run_rung));  // `ladder run` and Python's ladder.run reach every rung
    // Reference rungs, all of this stage; CUDA rungs exactly where the record says so.
    REQUIRE(s.ref_rungs);
    Registry own;
    s.ref_rungs(own);
    CHECK(!own.all().empty());
    for (const Rung& r : own.all()) {
      const bool own_stage_ref = r.stage == s.id && r.backend == "ref";
      CHECK_MESSAGE(own_stage_ref, r.key());
    }
    CHECK(registry().stage(s.id, "ref").size() == own.all().size());
    CHECK(!registry().stage(s.id, "cuda").empty() == s.cuda_rungs);
    CHECK(fs::exists(kRoot / "cuda/src" / s.id / "registry.cpp") == s.cuda_rungs);
    // Golden cases: the committed folders are exactly the names the stage declares.
    REQUIRE(s.golden_cases);
    REQUIRE(s.write_golden_case);
    std::set<std::string> declared, committed;
    for (const auto& c : s.golden_cases()) declared.insert(c);
    for (const auto& e : fs::directory_iterator(kRoot / "data/golden" / s.id))
      if (e.is_directory()) committed.insert(e.path().filename().string());
    CHECK(!declared.empty());
    CHECK(declared == committed);
    // The course and the CLI.
    CHECK(fs::is_regular_file(kRoot / "chapters" / s.id / "README.md"));
    CHECK(fs::is_regular_file(kRoot / "notebooks" / (s.id + ".ipynb")));
    CHECK(fs::is_regular_file(kRoot / "tools/ladder" / s.id / "reproduce.cpp"));
    CHECK(fs::is_directory(kRoot / "ref/src" / s.id));
    const fs::path lab = kRoot / "chapters" / s.id / "lab/lab.json";
    CHECK(fs::is_regular_file(lab) == s.lab);
    if (s.lab && fs::is_regular_file(lab)) {
      std::ifstream f(lab);
      CHECK(nlohmann::json::parse(f).at("stage").get<std::string>() == s.id);
    }
    CHECK(fs::is_regular_file(kRoot / "bench" / s.id / "bench.cpp") == s.bench);
    // Its tests and headers, in its own folders.
    CHECK(fs::is_regular_file(kRoot / "tests" / s.id / "tests.cmake"));
    CHECK(fs::is_directory(kRoot / "ref/include/ladder" / s.id));
    if (s.cuda_rungs) CHECK(fs::is_directory(kRoot / "cuda/include/ladder/cuda" / s.id));  // 05's kernels have no rungs
  }
}
