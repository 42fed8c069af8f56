// tools/ladder/cli.hpp -- the pieces of the `ladder` CLI each stage contributes.
//
// main.cpp owns parsing and exit codes (0 ok, 1 check failed, 2 bad input: one line on stderr).
// Each stage contributes a reproduce section (prints its table to stdout and returns the same table
// as Markdown for the report under --out) and, where it has one, its own subcommand.
#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ladder::cli {

struct ReproduceContext {
  std::filesystem::path out_dir;  // Markdown report and PNGs go here
  bool quick = false;             // smaller sizes (used by the tests)
  bool large = false;             // the sizes that need more than 1 GB of memory (03-mla: DeepSeek-V2 shapes)
};

// Each stage's part of the CLI lives in tools/ladder/<id>/ and is found from the folders (the list
// tools/ladder/CMakeLists.txt generates, cmake/stages.cmake): reproduce.cpp defines the stage's section of
// `ladder reproduce`, std::string reproduce_NN_name(const ReproduceContext&) -- it prints to stdout and
// returns the same table as Markdown -- and commands.cpp, where the stage has subcommands of its own,
// void commands_NN_name(CLI::App&), whose callbacks throw ladder::Error on bad input.
struct StageCli {
  std::string stage;                                         // "NN-name"
  std::string (*reproduce)(const ReproduceContext&) = nullptr;
  void (*commands)(CLI::App&) = nullptr;                     // nullptr: no subcommands of its own
};
// Every stage's CLI part, in ladder order (generated).
const std::vector<StageCli>& stage_clis();
// One stage's part (Error naming the stages if `stage` is none of them).
const StageCli& stage_cli(const std::string& stage);
// Adds the subcommands of one stage; Error if it has none.
void add_stage_commands(CLI::App& app, const std::string& stage);

}  // namespace ladder::cli
