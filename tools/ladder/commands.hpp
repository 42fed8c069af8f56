// tools/ladder/commands.hpp -- the generic subcommands (list, golden, check, oracle, describe, run, reproduce).
#pragma once
#include <CLI/CLI.hpp>

namespace ladder::cli {

void add_list_command(CLI::App& app);
void add_golden_command(CLI::App& app);
void add_check_command(CLI::App& app, int& exit_code);  // exit_code: 0 pass, 1 fail
void add_reproduce_command(CLI::App& app);
void add_oracle_command(CLI::App& app);    // check.cpp
void add_describe_command(CLI::App& app);  // check.cpp
void add_run_command(CLI::App& app);       // run.cpp
void add_mutants_command(CLI::App& app, int& exit_code);  // mutants.cpp: exit_code 1 if a mutant is missed

}  // namespace ladder::cli
