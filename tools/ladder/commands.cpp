// tools/ladder/commands.cpp -- list, golden and reproduce.
#include "commands.hpp"

#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/registry.hpp"
#include "source_dir.hpp"

namespace ladder::cli {
namespace fs = std::filesystem;

void add_list_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("list", "print the registry: every rung of every stage");
  auto stage = std::make_shared<std::string>();
  cmd->add_option("stage", *stage, "only this stage (an id of `ladder list`)");
  cmd->callback([stage] {
    const Registry& reg = registry();
    if (!stage->empty()) require(!reg.stage(*stage).empty(), "list: no stage '{}'", *stage);
    size_t wid = 2, wname = 4;
    for (const Rung& r : reg.all()) wid = std::max(wid, r.id.size()), wname = std::max(wname, r.name.size());
    fmt::print("{:<12} {:<8} {:<{}} {:<{}}  {}\n", "stage", "backend", "id", wid, "name", wname, "one-line doc");
    std::vector<const Rung*> rows;  // grouped by stage in ladder order, references before kernels
    for (const Rung& r : reg.all()) rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(), [](const Rung* a, const Rung* b) { return a->stage < b->stage; });
    for (const Rung* rp : rows) {
      const Rung& r = *rp;
      if (!stage->empty() && r.stage != *stage) continue;
      fmt::print("{:<12} {:<8} {:<{}} {:<{}}  {}\n", r.stage, r.backend, r.id, wid, r.name, wname, r.doc);
      fmt::print("{:<12} {:<8} {:<{}} {:<{}}  cost: {}\n", "", "", "", wid, "", wname, r.cost_doc);
    }
  });
}

void add_golden_command(CLI::App& app) {
  struct Opts {
    std::string stage, case_name, out;
    std::string root = ladder::source_dir().string() + "/data/golden";
    bool regenerate = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("golden", "write golden cases (inputs + expected outputs as .npy, case.json)");
  cmd->add_option("stage", o->stage, "stage (an id of `ladder list`)");
  cmd->add_option("--case", o->case_name, "case name (see `ladder golden STAGE`)");
  cmd->add_option("--out", o->out, "folder to write the case into");
  cmd->add_flag("--regenerate", o->regenerate, "rewrite every committed case under --root");
  cmd->add_option("--root", o->root, "golden root for --regenerate")->capture_default_str();
  cmd->callback([o] {
    if (o->regenerate) {
      require(o->case_name.empty() && o->out.empty(), "golden: --regenerate takes no --case or --out");
      for (const GoldenStage& s : golden_stages()) {
        if (!o->stage.empty() && s.stage != o->stage) continue;
        for (const std::string& c : s.case_names()) {
          const fs::path dir = fs::path(o->root) / s.stage / c;
          fs::remove_all(dir);
          s.write_case(c, dir, false);
          fmt::print("wrote {}\n", (fs::path(s.stage) / c).string());
        }
      }
      return;
    }
    require(!o->stage.empty(), "golden: a STAGE (or --regenerate) is required");
    const GoldenStage& s = golden_stage(o->stage);
    const auto names = s.case_names();
    if (o->case_name.empty()) {
      require(o->out.empty(), "golden: --out needs --case");
      for (const auto& n : names) fmt::print("{}\n", n);
      return;
    }
    require(std::find(names.begin(), names.end(), o->case_name) != names.end(),
            "golden: --case '{}' is not a case of {} (see `ladder golden {}`)", o->case_name, o->stage, o->stage);
    require(!o->out.empty(), "golden: --out DIR is required with --case");
    s.write_case(o->case_name, o->out, true);
    fmt::print("wrote {} case {} to {}\n", o->stage, o->case_name, o->out);
  });
}

const StageCli& stage_cli(const std::string& stage) {
  std::string known;
  for (const StageCli& s : stage_clis()) {
    if (s.stage == stage) return s;
    known += (known.empty() ? "" : ", ") + s.stage;
  }
  throw Error(fmt::format("no stage '{}' in the CLI (stages: {})", stage, known));
}

void add_stage_commands(CLI::App& app, const std::string& stage) {
  const StageCli& s = stage_cli(stage);
  require(s.commands != nullptr, "stage {} has no subcommands of its own", stage);
  s.commands(app);
}

void add_reproduce_command(CLI::App& app) {
  struct Opts {
    std::string stage, out = "reproduce";
    bool quick = false, large = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("reproduce", "the papers' numbers beside ours; writes a Markdown report");
  cmd->add_option("stage", o->stage, "one stage (default: all)");
  cmd->add_option("--out", o->out, "output folder for the report and plots")->capture_default_str();
  cmd->add_flag("--quick", o->quick, "smaller measured sizes (seconds instead of minutes)");
  cmd->add_flag("--large", o->large, "the sizes that need more than 1 GB of memory (03-mla timed at DeepSeek-V2 "
                "shapes: 5-7 GB); without it the whole run stays under 1 GB");
  cmd->callback([o] {
    std::string known;
    for (const StageCli& s : stage_clis()) known += (known.empty() ? "" : ", ") + s.stage;
    bool found = o->stage.empty();
    for (const StageCli& s : stage_clis()) found = found || s.stage == o->stage;
    require(found, "reproduce: no stage '{}' (stages: {})", o->stage, known);
    fs::create_directories(o->out);
    ReproduceContext ctx{o->out, o->quick, o->large && !o->quick};
    std::string md = "# ladder reproduce\n\n";
    size_t n = 0, i = 0;
    for (const StageCli& s : stage_clis()) n += o->stage.empty() || s.stage == o->stage;
    for (const StageCli& s : stage_clis()) {
      if (!o->stage.empty() && s.stage != o->stage) continue;
      fmt::print("== {} ==\n", s.stage);
      std::fflush(stdout);
      const auto t0 = std::chrono::steady_clock::now();
      md += s.reproduce(ctx) + "\n";
      fmt::print("\n");
      std::fflush(stdout);
      // One progress line per stage on stderr (`make reproduce` sends the tables to a file): its time and the
      // process's peak resident memory so far (getrusage: the high-water mark, not the current size).
      struct rusage ru {};
      getrusage(RUSAGE_SELF, &ru);
      fmt::print(stderr, "reproduce [{}/{}] {}: {:.1f} s, peak memory so far {:.0f} MB\n", ++i, n, s.stage,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 static_cast<double>(ru.ru_maxrss) / 1024.0);
    }
    const fs::path report = fs::path(o->out) / (o->stage.empty() ? "REPORT.md" : o->stage + ".md");
    std::ofstream(report) << md;
    fmt::print("report: {}\n", report.string());
  });
}

}  // namespace ladder::cli
