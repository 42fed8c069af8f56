// tests/simt/child_process.cpp -- both sides of the child-process protocol: run_child() re-executes
// this binary; the "simt child" test case, a no-op unless LADDER_SIMT_CHILD is set, runs the named
// scenario and prints "simt-child: ..." lines for the parent to read.
#include "child_process.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "kernels_mma.hpp"

namespace simt_tests {

ChildResult run_child(const std::string& scenario, const std::vector<std::string>& env) {
  std::vector<std::string> vars = env;
  vars.push_back("LADDER_SIMT_CHILD=" + scenario);
  // Keep TSan's defaults in the child whatever the caller's TSAN_OPTIONS: report, continue, exit 66.
  vars.push_back("TSAN_OPTIONS=halt_on_error=0:exitcode=66");
  auto overridden = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    for (const auto& v : vars)
      if (v.compare(0, name.size(), name) == 0) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(*e)) vars.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--test-case=simt child", quiet = "--no-version=true";
  char* argv[] = {exe.data(), filter.data(), quiet.data(), nullptr};

  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const rlimit no_core{0, 0};  // an expected abort must not leave a core file behind
    setrlimit(RLIMIT_CORE, &no_core);
    execve(exe.c_str(), argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) != 0;)
    if (n > 0) result.output.append(buffer, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

namespace {

const char* verdict(bool correct) { return correct ? "result=correct" : "result=wrong"; }

void say(const std::string& line) {
  std::printf("simt-child: %s\n", line.c_str());
  std::fflush(stdout);
}

const std::map<std::string, std::function<void()>>& scenarios() {
  static const std::map<std::string, std::function<void()>> table = {
      {"warp_partials:planted", [] { say(warp_partials(true) ? "result=correct" : "result=wrong"); }},
      {"warp_partials:fixed", [] { say(warp_partials(false) ? "result=correct" : "result=wrong"); }},
      {"tile_overwrite:planted", [] { say(tile_overwrite(true) ? "result=correct" : "result=wrong"); }},
      {"tile_overwrite:fixed", [] { say(tile_overwrite(false) ? "result=correct" : "result=wrong"); }},
      {"neighbour_read:planted", [] { say(neighbour_read(true) ? "result=correct" : "result=wrong"); }},
      {"neighbour_read:fixed", [] { say(neighbour_read(false) ? "result=correct" : "result=wrong"); }},
      {"divergent_barrier", [] { divergent_barrier(); }},
      {"partial_mask_shuffle", [] { partial_mask_shuffle(); }},
      {"partial_warp_shuffle", [] { partial_warp_shuffle(); }},
      {"deadlock", [] { deadlock(); }},
      {"big_locals", [] { say("big_locals=" + std::to_string(big_locals())); }},
      // tensor cores (kernels_mma.cu)
      {"mma_lane_map:planted", [] { say(mma_lane_map(true) ? "result=correct" : "result=wrong"); }},
      {"mma_lane_map:fixed", [] { say(mma_lane_map(false) ? "result=correct" : "result=wrong"); }},
      {"cp_async_missing_wait:planted", [] { say(cp_async_missing_wait(true) ? "result=correct" : "result=wrong"); }},
      {"cp_async_missing_wait:fixed", [] { say(cp_async_missing_wait(false) ? "result=correct" : "result=wrong"); }},
      {"cp_async_early_read:planted", [] { say(cp_async_early_read(true) ? "result=correct" : "result=wrong"); }},
      {"cp_async_early_read:fixed", [] { say(cp_async_early_read(false) ? "result=correct" : "result=wrong"); }},
      {"cp_async_missing_barrier:planted", [] { say(verdict(cp_async_missing_barrier(true))); }},
      {"cp_async_missing_barrier:fixed", [] { say(verdict(cp_async_missing_barrier(false))); }},
      {"mma_missing_lane", [] { mma_missing_lane(); }},
      {"cp_async_misaligned", [] { bad_operands(0); }},
      {"cp_async_src_bytes", [] { bad_operands(1); }},
      {"ldmatrix_misaligned", [] { bad_operands(2); }},
      {"ldmatrix_mixed_shapes", [] { ldmatrix_mixed_shapes(); }},
      {"ldmatrix_before_wait", [] { ldmatrix_before_wait(); }},
      {"mma_partial_warp", [] { mma_partial_warp(); }},
  };
  return table;
}

}  // namespace

TEST_CASE("simt child") {
  const char* scenario = std::getenv("LADDER_SIMT_CHILD");
  if (!scenario) return;  // run directly: nothing to do
  const auto it = scenarios().find(scenario);
  REQUIRE_MESSAGE(it != scenarios().end(), "unknown scenario " << scenario);
  it->second();
  say("returned");
}

}  // namespace simt_tests
