// tests/simt/test_simt_mma.cpp -- tensor_core.hpp under SIMT: the fragment tables element by element,
// ldmatrix against the ISA's rule and against plain loads, mma tiles against a scalar reference in the
// stated order, cp.async with its waits, and the planted mistakes and broken rules caught in every
// schedule (child processes, as in test_simt_detection.cpp).
#include <doctest/doctest.h>

#include <simt.hpp>
#include <tensor_core.hpp>

#include <bit>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "child_process.hpp"
#include "ladder/core/formats.hpp"
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

TEST_CASE("ldmatrix x1 / x2 / x4 and .trans: each lane's registers as the PTX ISA's ldmatrix section says") {
  // Matrix m is the 8 x 8 block at rows 8 (m % 2), columns 8 (m / 2) of the 16 x 16 tile (the rows
  // lanes 8m..8m+7 address); lane l gets (l/4, 2(l%4)), (l/4, 2(l%4)+1), or transposed with .trans.
  const auto tag = [](int m, int r, int c) { return 0x100u + 16u * (8 * (m % 2) + r) + 8 * (m / 2) + c; };
  for (int variant = 0; variant < ldmatrix_variants; ++variant) {
    const int n = variant % 3 == 0 ? 1 : variant % 3 == 1 ? 2 : 4;
    const bool trans = variant >= 3;
    const std::vector<std::uint32_t> got = ldmatrix_probe(variant);
    for (int lane = 0; lane < 32; ++lane)
      for (int m = 0; m < 4; ++m) {
        const int g = lane / 4, t = lane % 4;
        std::uint32_t expect = 0;
        if (m < n)
          expect = trans ? tag(m, 2 * t, g) | tag(m, 2 * t + 1, g) << 16  // rows 2t, 2t + 1 of column g
                         : tag(m, g, 2 * t) | tag(m, g, 2 * t + 1) << 16;
        CAPTURE(variant);
        CAPTURE(lane);
        CAPTURE(m);
        CHECK(got[lane * 4 + m] == expect);
      }
  }
}

TEST_CASE("ldmatrix_x4 (A) and ldmatrix_x2_trans (B) give the registers the mma tables give") {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> a(256), b(128);
  for (auto& x : a) x = rng() & 0xFFFFu;
  for (auto& x : b) x = rng() & 0xFFFFu;
  const std::vector<std::uint32_t> got = fragments_both_ways(a, b);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 6; ++r) {
      CAPTURE(lane);
      CAPTURE(r);
      CHECK(got[lane * 12 + r] == got[lane * 12 + 6 + r]);
    }
}

namespace {

struct Tile {
  std::vector<std::uint32_t> a, b, c;
};

Tile random_tile(MmaKind kind, std::mt19937& rng) {
  const int k = kind == MmaKind::bf16 || kind == MmaKind::fp16 ? 16 : 32;
  Tile t{std::vector<std::uint32_t>(16 * k), std::vector<std::uint32_t>(k * 8), std::vector<std::uint32_t>(128)};
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const auto element = [&]() -> std::uint32_t {
    switch (kind) {
      case MmaKind::bf16: return ladder::formats::to_bf16(u(rng));
      case MmaKind::fp16: return (rng() & 0x8000u) | (8u + rng() % 14u) << 10 | (rng() & 0x3FFu);  // normal, no inf
      case MmaKind::e4m3: { const std::uint32_t q = rng() & 0xFFu; return (q & 0x7Fu) == 0x7Fu ? 0x3Fu : q; }
      default: return rng() & 0xFFu;  // s8
    }
  };
  for (auto& x : t.a) x = element();
  for (auto& x : t.b) x = element();
  for (auto& x : t.c)
    x = kind == MmaKind::s8 ? static_cast<std::uint32_t>(static_cast<int>(rng() % 20001) - 10000)
                            : std::bit_cast<std::uint32_t>(u(rng));
  return t;
}

// D in the emulation's stated order: c first, then k = 0..K-1, each sum rounded to fp32.
std::vector<std::uint32_t> reference(MmaKind kind, const Tile& t) {
  const int k = kind == MmaKind::bf16 || kind == MmaKind::fp16 ? 16 : 32;
  std::vector<std::uint32_t> d(128);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      if (kind == MmaKind::s8) {
        std::int64_t s = static_cast<std::int32_t>(t.c[i * 8 + j]);
        for (int x = 0; x < k; ++x)
          s += static_cast<std::int8_t>(t.a[i * k + x]) * static_cast<std::int8_t>(t.b[x * 8 + j]);
        d[i * 8 + j] = static_cast<std::uint32_t>(s);
        continue;
      }
      namespace f = ladder::formats;
      const auto value = [&](std::uint32_t bits) {
        return kind == MmaKind::bf16   ? f::from_bf16(static_cast<std::uint16_t>(bits))
               : kind == MmaKind::fp16 ? f::from_fp16(static_cast<std::uint16_t>(bits))
                                       : f::from_e4m3(static_cast<std::uint8_t>(bits));
      };
      float s = std::bit_cast<float>(t.c[i * 8 + j]);
      for (int x = 0; x < k; ++x) {
        const double p = static_cast<double>(value(t.a[i * k + x])) * value(t.b[x * 8 + j]);
        REQUIRE(static_cast<double>(static_cast<float>(p)) == p);  // the product is exact in fp32
        s += static_cast<float>(p);
      }
      d[i * 8 + j] = std::bit_cast<std::uint32_t>(s);
    }
  return d;
}

}  // namespace

TEST_CASE("mma tiles: bf16, fp16, e4m3 (fp32 accumulate) and s8 (s32) against the scalar reference, bit for bit") {
  std::mt19937 rng(2024);
  const std::pair<MmaKind, const char*> kinds[] = {
      {MmaKind::bf16, "bf16"}, {MmaKind::fp16, "fp16"}, {MmaKind::s8, "s8"}, {MmaKind::e4m3, "e4m3"}};
  for (const auto& [kind, name] : kinds)
    for (int trial = 0; trial < 3; ++trial) {
      CAPTURE(name);
      CAPTURE(trial);
      const Tile t = random_tile(kind, rng);
      const std::vector<std::uint32_t> expect = reference(kind, t);
      CHECK(mma_tile(kind, t.a, t.b, t.c) == expect);
      // The planted lane mapping (a1 and a2 swapped) must change the result.
      CHECK(mma_tile(kind, t.a, t.b, t.c, true) != expect);
    }
}

TEST_CASE("s8 mma accumulates in wrapping 32-bit two's complement") {
  std::vector<std::uint32_t> a(16 * 32, 0x80u), b(32 * 8, 0x80u), c(128, 0x7FFFFFFFu);  // -128 * -128 * 32 = 2^19
  const std::vector<std::uint32_t> d = mma_tile(MmaKind::s8, a, b, c);
  for (std::uint32_t x : d) CHECK(x == 0x7FFFFFFFu + (1u << 19));
}

TEST_CASE("cp.async: deferred to its wait_group, poisoned until then, src_bytes zero-fills") {
  const std::vector<std::int32_t> got = cp_async_probe();
  for (int t = 0; t < 32; ++t) {
    CAPTURE(t);
    const std::int32_t* o = got.data() + t * cp_async_outputs;
    for (int i = 0; i < 4; ++i) CHECK(o[i] == -1);                    // in flight: 0xFF bytes
    for (int i = 0; i < 4; ++i) CHECK(o[4 + i] == 1000 + t * 4 + i);  // group 0 done by wait_group<1>
    for (int i = 0; i < 6; ++i) CHECK(o[8 + i] == -1);                // group 1 still in flight
    CHECK(o[14] == 1000 + 192 + t * 4);
    CHECK(o[15] == 1000 + 193 + t * 4);
    CHECK(o[16] == 0);  // past src_bytes = 8
    CHECK(o[17] == 0);
    CHECK(o[18] == 1000 + 128 + t * 2);
    CHECK(o[19] == 1000 + 129 + t * 2);
    CHECK(o[20] == 1000 + 320 + t);
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
