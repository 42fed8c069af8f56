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

// The schedules a scenario is run under: all three in the schedules' build. In the TSan build one
// (random, which catches every planted barrier bug by its result too): a race report and a "simt: error"
// do not depend on the order, and each child is a TSan process (the four child-process tests took 100 s
// of TSan time with three schedules). The schedules' build asserts the per-schedule results.
inline std::vector<std::string> child_schedules() {
#if defined(SIMT_TSAN)
  return {"random:1"};
#else
  return {"forward", "reverse", "random:1"};
#endif
}

}  // namespace simt_tests
