// tests/simt/child_process.hpp -- run one scenario in a fresh copy of this test binary.
//
// Planted bugs, races and SIMT diagnostics end or taint the process that runs them (a "simt: error"
// aborts, TSan changes the exit code), so the tests run them in a child: the same executable,
// restricted to the "simt child" test case, with the scenario and schedule in its environment.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace simt_tests {

struct ChildResult {
  int exit_code = -1;  // when the child exited normally
  int signal = 0;      // when a signal ended it (SIGABRT for "simt: error")
  std::string output;  // stdout and stderr, interleaved

  bool contains(std::string_view text) const { return output.find(text) != std::string::npos; }
};

// `env` entries are NAME=VALUE and replace inherited variables of the same name.
ChildResult run_child(const std::string& scenario, const std::vector<std::string>& env = {});

}  // namespace simt_tests
