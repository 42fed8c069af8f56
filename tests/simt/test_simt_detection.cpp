// tests/simt/test_simt_detection.cpp -- the harness can fail: planted barrier bugs are caught, and
// broken CUDA rules stop the run with "simt: error" and the source line.
//
// Everything here runs in child processes (child_process.hpp) that set their own schedule, so the
// catch matrix below is asserted whichever schedule this test binary was registered with. The TSan
// column is asserted in the TSan build (LADDER_TSAN=ON), where the children are TSan binaries too.
#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "kernels.hpp"

namespace simt_tests {
namespace {

struct Catch {
  const char* bug;
  bool forward, reverse, random;  // caught (wrong result) under that schedule, one worker
};

// Measured, and explained: forward runs warp 0 first, so it reads the partials before later warps
// wrote them, while reverse runs it last; neighbour_read is the mirror image (thread i-1 runs before
// thread i only in forward order); a tile overwritten early is wrong in any order. Random order
// catches all three. TSan reports all three in every order, since it does not depend on timing.
const Catch matrix[] = {
    {"warp_partials", true, false, true},
    {"tile_overwrite", true, true, true},
    {"neighbour_read", false, true, true},
};

bool caught_under(const Catch& c, const std::string& schedule) {
  return schedule == "forward" ? c.forward : schedule == "reverse" ? c.reverse : c.random;
}

}  // namespace

TEST_CASE("planted bugs: each removed __syncthreads is caught by the schedules that should catch it") {
  for (const Catch& c : matrix) {
    CHECK_MESSAGE((c.forward || c.reverse || c.random), c.bug << " must be caught by some schedule");
    for (const std::string& schedule : child_schedules()) {
      const std::vector<std::string> env = {"SIMT_SCHEDULE=" + schedule, "SIMT_THREADS=1"};
      const ChildResult fixed = run_child(std::string(c.bug) + ":fixed", env);
      const ChildResult planted = run_child(std::string(c.bug) + ":planted", env);
      INFO(c.bug << " under " << schedule << "\n--- fixed:\n" << fixed.output << "--- planted:\n" << planted.output);
      CHECK(fixed.contains("simt-child: result=correct"));
      CHECK(planted.contains(caught_under(c, schedule) ? "simt-child: result=wrong" : "simt-child: result=correct"));
#if defined(SIMT_TSAN)
      CHECK(fixed.exit_code == 0);
      CHECK_FALSE(fixed.contains("ThreadSanitizer"));
      CHECK(planted.contains("WARNING: ThreadSanitizer: data race"));
      CHECK(planted.contains("kernels_planted.cu"));  // the report points into the kernel
      CHECK(planted.exit_code == 66);
#else
      CHECK(fixed.exit_code == 0);
      CHECK(planted.exit_code == 0);  // a wrong result is the test's verdict, not a crash
#endif
    }
  }
}

TEST_CASE("diagnostics: broken CUDA rules abort with \"simt: error\" and the line, in every schedule") {
  struct Diagnostic {
    const char* scenario;
    const char* says;
    std::vector<int> lines;
  };
  const Diagnostic diagnostics[] = {
      {"divergent_barrier", "divergent __syncthreads",
       {divergent_barrier_lines[0], divergent_barrier_lines[1]}},
      {"partial_mask_shuffle", "__shfl_xor_sync at ", {partial_mask_shuffle_line}},
      {"partial_warp_shuffle", "which do not exist (the block has 48 threads", {partial_warp_shuffle_line}},
      {"deadlock", "deadlock in block (0,0,0)", {deadlock_lines[0], deadlock_lines[1]}},
  };
  for (const Diagnostic& d : diagnostics)
    for (const std::string& schedule : child_schedules()) {
      const ChildResult r = run_child(d.scenario, {"SIMT_SCHEDULE=" + schedule});
      INFO(d.scenario << " under " << schedule << ":\n" << r.output);
      CHECK(r.signal == SIGABRT);
      CHECK(r.contains("simt: error: "));
      CHECK(r.contains(d.says));
      for (int line : d.lines) CHECK(r.contains("kernels_diagnostics.cu:" + std::to_string(line)));
      CHECK_FALSE(r.contains("simt-child: returned"));
    }
}

TEST_CASE("a bad SIMT_SCHEDULE is an error, not a silent default") {
  const ChildResult r = run_child("warp_partials:fixed", {"SIMT_SCHEDULE=sideways"});
  INFO(r.output);
  CHECK(r.signal == SIGABRT);
  CHECK(r.contains("simt: error: SIMT_SCHEDULE=sideways is not one of forward, reverse, random, random:SEED"));
}

TEST_CASE("fiber stacks: a guard page stops an overflow; SIMT_STACK_KB makes room") {
  const ChildResult small = run_child("big_locals", {"SIMT_STACK_KB=128"});
  const ChildResult large = run_child("big_locals", {"SIMT_STACK_KB=1024"});
  INFO("128 KiB:\n" << small.output << "\n1024 KiB:\n" << large.output);
  CHECK_FALSE(small.contains("simt-child: returned"));
  CHECK((small.signal != 0 || small.exit_code != 0));
  CHECK(large.exit_code == 0);
  CHECK(large.contains("simt-child: big_locals=196603.000000"));  // sum of i % 7 over 65536 values
}

}  // namespace simt_tests
