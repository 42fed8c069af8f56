// tools/ladder/06-disagg/commands.cpp -- stage 06's subcommands: `ladder simulate` (simulate.cpp) and
// `ladder plan` (plan.cpp),
// `ladder deploy` (serving.cpp).
#include "cli.hpp"

namespace ladder::cli {

void add_simulate_command(CLI::App& app);  // simulate.cpp
void add_plan_command(CLI::App& app);      // plan.cpp
void add_deploy_command(CLI::App& app);    // serving.cpp

void commands_06_disagg(CLI::App& app) {
  add_simulate_command(app);
  add_plan_command(app);
  add_deploy_command(app);
}

}  // namespace ladder::cli
