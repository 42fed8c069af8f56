// tools/ladder/cli.hpp -- the pieces of the `ladder` CLI each stage contributes.
//
// main.cpp owns parsing and exit codes (0 ok, 1 check failed, 2 bad input: one line on stderr).
// Each stage contributes a reproduce section (prints its table to stdout and returns the same table
// as Markdown for the report under --out) and, where it has one, its own subcommand.
#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

namespace ladder::cli {

struct ReproduceContext {
  std::filesystem::path out_dir;  // Markdown report and PNGs go here
  bool quick = false;             // smaller sizes (used by the tests)
};

// One section of `ladder reproduce`: prints to stdout, returns Markdown.
std::string reproduce_01_softmax(const ReproduceContext& ctx);
std::string reproduce_02_attention(const ReproduceContext& ctx);
std::string reproduce_03_mla(const ReproduceContext& ctx);
std::string reproduce_04_moe(const ReproduceContext& ctx);
std::string reproduce_05_eplb(const ReproduceContext& ctx);
std::string reproduce_06_disagg(const ReproduceContext& ctx);

// `ladder eplb ...` (stage 05): adds the subcommand; its callback throws ladder::Error on bad input.
void add_eplb_command(CLI::App& app);
// `ladder simulate --config FILE` (stage 06): the event simulator and the goodput search.
void add_simulate_command(CLI::App& app);
// `ladder plan FILE` (stage 06, part 2): per-card memory, traffic and step time of a deployment layout.
void add_plan_command(CLI::App& app);

}  // namespace ladder::cli
