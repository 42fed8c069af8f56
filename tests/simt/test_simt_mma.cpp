// tests/simt/test_simt_mma.cpp -- what the emulator adds to tensor_core.hpp: the fragment tables against
// its register form element by element, cp.async's poisoned destinations, and the planted mistakes and
// broken rules caught in every schedule (child processes, as in test_simt_detection.cpp). What the PTX
// ISA defines (ldmatrix, mma arithmetic, cp.async after its waits) is test_tensor_core.cpp's, which runs
// on a device too.
#include <doctest/doctest.h>

#include <simt.hpp>
#include <tensor_core.hpp>

#include <csignal>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "kernels_mma.hpp"

namespace simt_tests {
namespace {

namespace emu = simt::detail;

bool same(Cell a, emu::Position b) { return a.row == b.row && a.col == b.col; }

// Each table must name every element of its matrix exactly once over the 32 lanes.
template <class F>
bool covers(int rows, int cols, int per_lane, F cell) {
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < per_lane; ++i) {
      const Cell c = cell(lane, i);
      if (c.row < 0 || c.row >= rows || c.col < 0 || c.col >= cols || !seen.insert({c.row, c.col}).second) return false;
    }
  return static_cast<int>(seen.size()) == rows * cols;
}

}  // namespace

TEST_CASE("fragment tables: the emulation holds, per lane and register, the elements the PTX ISA names") {
  CHECK(covers(16, 16, 8, k16_a));
  CHECK(covers(16, 8, 4, k16_b));
  CHECK(covers(16, 8, 4, c16x8));
  CHECK(covers(16, 32, 16, k32_a));
  CHECK(covers(32, 8, 8, k32_b));
  for (int lane = 0; lane < 32; ++lane) {
    CAPTURE(lane);
    for (int i = 0; i < 8; ++i) CHECK(same(k16_a(lane, i), emu::m16n8k16_a(lane, i / 2, i % 2)));
    for (int i = 0; i < 4; ++i) CHECK(same(k16_b(lane, i), emu::m16n8k16_b(lane, i / 2, i % 2)));
    for (int i = 0; i < 4; ++i) CHECK(same(c16x8(lane, i), emu::m16n8_c(lane, i)));
    for (int i = 0; i < 16; ++i) CHECK(same(k32_a(lane, i), emu::m16n8k32_a(lane, i / 4, i % 4)));
    for (int i = 0; i < 8; ++i) CHECK(same(k32_b(lane, i), emu::m16n8k32_b(lane, i / 4, i % 4)));
  }
}

TEST_CASE("cp.async: deferred to its wait_group, the destination poisoned until then") {
  // After the waits the values are the ISA's (test_tensor_core.cpp, which runs on a device too); before
  // them the emulator shows 0xFF bytes, where a GPU may show either.
  const std::vector<std::int32_t> got = cp_async_probe(true);
  for (int t = 0; t < 32; ++t) {
    CAPTURE(t);
    const std::int32_t* o = got.data() + t * cp_async_outputs;
    for (int i = 0; i < 4; ++i) CHECK(o[i] == -1);      // in flight: 0xFF bytes
    for (int i = 0; i < 6; ++i) CHECK(o[8 + i] == -1);  // group 1 still in flight after wait_group<1>
    CHECK(o[4] == 1000 + t * 4);                        // group 0 done by wait_group<1>
  }
}

TEST_CASE("planted tensor-core mistakes are caught in every schedule (and the missing barrier by TSan)") {
  struct Planted {
    const char* bug;
    bool race;  // a data race TSan must report (the others are wrong results, not races)
  };
  const Planted bugs[] = {{"mma_lane_map", false},
                          {"cp_async_missing_wait", false},
                          {"cp_async_early_read", false},
                          {"cp_async_missing_barrier", true}};
  for (const Planted& p : bugs)
    for (const std::string& schedule : child_schedules()) {
      const std::vector<std::string> env = {"SIMT_SCHEDULE=" + schedule, "SIMT_THREADS=1"};
      const ChildResult fixed = run_child(std::string(p.bug) + ":fixed", env);
      const ChildResult planted = run_child(std::string(p.bug) + ":planted", env);
      INFO(std::string(p.bug) << " under " << schedule << "\n--- fixed:\n" << fixed.output << "--- planted:\n"
                              << planted.output);
      CHECK(fixed.contains("simt-child: result=correct"));
      CHECK(planted.contains("simt-child: result=wrong"));
      CHECK(fixed.exit_code == 0);
      CHECK_FALSE(fixed.contains("ThreadSanitizer"));
#if defined(SIMT_TSAN)
      if (p.race) {
        CHECK(planted.contains("WARNING: ThreadSanitizer: data race"));
        CHECK(planted.contains("kernels_mma.cu"));
        CHECK(planted.exit_code == 66);
        continue;
      }
#endif
      CHECK(planted.exit_code == 0);  // a wrong result, not a race or a crash
      CHECK_FALSE(planted.contains("ThreadSanitizer"));
    }
}

TEST_CASE("broken tensor-core rules abort with \"simt: error\" and the line(s), in every schedule") {
  struct Diagnostic {
    const char* scenario;
    const char* says;
    std::vector<int> lines;
  };
  const Diagnostic diagnostics[] = {
      {"mma_missing_lane", "exited", {mma_missing_lane_line}},
      {"mma_missing_lane", "need all 32 lanes of the warp", {mma_missing_lane_line}},
      {"ldmatrix_mixed_shapes", "waits in a different collective, ldmatrix.x",
       {ldmatrix_mixed_shapes_lines[0], ldmatrix_mixed_shapes_lines[1]}},
      {"ldmatrix_before_wait", "is still copying", {ldmatrix_before_wait_lines[0], ldmatrix_before_wait_lines[1]}},
      {"cp_async_misaligned", "is not 16-byte aligned", {bad_operands_lines[0]}},
      {"cp_async_src_bytes", "src_bytes = 20 violates 0 <= src_bytes <= 16", {bad_operands_lines[1]}},
      {"ldmatrix_misaligned", "is not 16-byte aligned", {bad_operands_lines[2]}},
      {"mma_partial_warp", "which do not exist (the block has 48 threads", {mma_partial_warp_line}},
      {"mma_partial_warp", "need all 32 lanes of the warp", {mma_partial_warp_line}},
  };
  for (const Diagnostic& d : diagnostics)
    for (const std::string& schedule : child_schedules()) {
      const ChildResult r = run_child(d.scenario, {"SIMT_SCHEDULE=" + schedule});
      INFO(d.scenario << " under " << schedule << ":\n" << r.output);
      CHECK(r.signal == SIGABRT);
      CHECK(r.contains("simt: error: "));
      CHECK(r.contains(d.says));
      for (int line : d.lines) CHECK(r.contains("kernels_mma.cu:" + std::to_string(line)));
      CHECK_FALSE(r.contains("simt-child: returned"));
    }
}

}  // namespace simt_tests
