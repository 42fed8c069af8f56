// tools/ladder/main.cpp -- the `ladder` CLI.
//
//   ladder list [STAGE]                              the registry
//   ladder golden --regenerate [STAGE]               rewrite data/golden from the fp64 references
//   ladder golden STAGE [--case NAME --out DIR]      list a stage's cases / write one case whole
//   ladder check STAGE CASE_DIR CANDIDATE.npy        the contract's rule; exit 0 pass, 1 fail, 2 bad input
//   ladder oracle STAGE --inputs DIR --out DIR       fp64 expected outputs of your own inputs
//   ladder describe [STAGE]                          the case contract of a stage
//   ladder run STAGE RUNG --case DIR --out DIR       one rung on a case's inputs; its outputs as .npy
//   ladder reproduce [STAGE] [--out DIR]             papers' numbers beside ours; Markdown report
//   ladder mutants                                   the mutation score: real bug classes, each caught
//   ladder eplb --weights FILE ...                   stage 05 placement
//   ladder simulate --config FILE.json               stage 06 event simulator and goodput
//   ladder plan FILE.json                            stage 06 deployment layout: memory, traffic, step time
// Bad input (ladder::Error, a parse error) prints one line on stderr and exits 2.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <exception>

#include "cli.hpp"
#include "commands.hpp"
#include "ladder/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ladder: reference implementation and test oracle for LLM-inference kernels"};
  app.require_subcommand(1);
  int rc = 0;
  ladder::cli::add_list_command(app);
  ladder::cli::add_golden_command(app);
  ladder::cli::add_check_command(app, rc);
  ladder::cli::add_oracle_command(app);
  ladder::cli::add_describe_command(app);
  ladder::cli::add_run_command(app);
  ladder::cli::add_reproduce_command(app);
  ladder::cli::add_mutants_command(app, rc);
  for (const ladder::cli::StageCli& s : ladder::cli::stage_clis())  // each stage's own subcommands
    if (s.commands) s.commands(app);
  // An unknown first word is named (CLI11 would only say that a subcommand is required).
  if (argc > 1 && argv[1][0] != '-' && app.get_subcommands([&](CLI::App* s) { return s->get_name() == argv[1]; }).empty()) {
    std::string names;
    for (const CLI::App* s : app.get_subcommands([](CLI::App*) { return true; })) names += (names.empty() ? "" : ", ") + s->get_name();
    std::fprintf(stderr, "ladder: error: unknown command '%s' (commands: %s)\n", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ladder: error: %s (see ladder --help)\n", e.what());
    return 2;
  } catch (const ladder::Error& e) {
    std::fprintf(stderr, "ladder: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ladder: error: %s\n", e.what());
    return 2;
  }
  return rc;
}
