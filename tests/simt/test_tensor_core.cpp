// tests/simt/test_tensor_core.cpp -- what the PTX ISA defines of tensor_core.hpp, checked wherever the
// operations run: on the emulator (SIMT build, three schedules and TSan) and on the device (the native
// GPU build, scripts/gpu-check). ldmatrix against the ISA's rule and against plain loads through the
// fragment tables, mma tiles against a reference, s8 accumulation wrapping, cp.async after its waits.
// The emulator's own additions (poisoned destinations, diagnostics, planted races) are test_simt_mma.cpp's.
//
// mma tiles are judged two ways. (1) The emulation's stated order: c first, then k = 0..K-1, each sum
// rounded to fp32 (products are exact in fp32 for bf16 / fp16 / e4m3). The emulator must equal it bit for
// bit. (2) The exact sum (in fp64; its own error is 2^-50 of the bound): every run -- emulator or device --
// must lie within (K + 1) 2^-23 sum(|c| + |a_k b_k|) of it: fp32 accumulation of K + 1 terms in any order
// and grouping, each step rounding or truncating (an error of at most 2^-23 of the larger operand). This
// holds for e4m3 too: the limited FP8 accumulation DeepSeek-V3 reports (section 3.3.2, about 14 bits) is
// Hopper's wgmma over long K; one mma.sync m16n8k32 on an H200 measured 3.0e-7 sum|terms| (2026-11-29).
// On a device the test prints how often and by how much the hardware's bits differ from the emulation's,
// and how often they equal the exact sum rounded to nearest or toward zero ("tensor-core bits:");
// gpu-check's report keeps those lines.
#include <doctest/doctest.h>

#include <simt.hpp>
#include <tensor_core.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>

#include "kernels_mma.hpp"
#include "ladder/core/formats.hpp"

namespace simt_tests {
namespace {

#if defined(LADDER_GPU)
constexpr bool on_device = true;
constexpr int default_tiles = 400;  // a launch each (compute-sanitizer runs the binary too)
#else
constexpr bool on_device = false;
constexpr int default_tiles = 12;  // each a full warp collective under the emulator
#endif
// LADDER_TC_TILES=N: N tiles of each kind instead (gpu-check's tensor-core step runs 20000 on the device).
int tiles_per_kind() {
  const char* n = std::getenv("LADDER_TC_TILES");
  return n && std::atoi(n) > 0 ? std::atoi(n) : default_tiles;
}

int k_of(MmaKind kind) { return kind == MmaKind::bf16 || kind == MmaKind::fp16 ? 16 : 32; }

struct Tile {
  std::vector<std::uint32_t> a, b, c;
};

// Element bits; `wide` spreads exponents over 2^-8 .. 2^8 so the accumulation must align terms of
// different magnitude (where truncating and rounding adders part).
Tile random_tile(MmaKind kind, std::mt19937& rng, bool wide) {
  const int k = k_of(kind);
  Tile t{std::vector<std::uint32_t>(16 * k), std::vector<std::uint32_t>(k * 8), std::vector<std::uint32_t>(128)};
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int> e(-8, 8);
  const auto real = [&] { return wide ? std::ldexp(u(rng), e(rng)) : u(rng); };
  const auto element = [&]() -> std::uint32_t {
    switch (kind) {
      case MmaKind::bf16: return ladder::formats::to_bf16(real());
      case MmaKind::fp16: return (rng() & 0x8000u) | (8u + rng() % 14u) << 10 | (rng() & 0x3FFu);  // normal, no inf
      case MmaKind::e4m3: { const std::uint32_t q = rng() & 0xFFu; return (q & 0x7Fu) == 0x7Fu ? 0x3Fu : q; }
      default: return rng() & 0xFFu;  // s8
    }
  };
  for (auto& x : t.a) x = element();
  for (auto& x : t.b) x = element();
  for (auto& x : t.c)
    x = kind == MmaKind::s8 ? static_cast<std::uint32_t>(static_cast<int>(rng() % 20001) - 10000)
                            : std::bit_cast<std::uint32_t>(real());
  return t;
}

double value(MmaKind kind, std::uint32_t bits) {
  namespace f = ladder::formats;
  return kind == MmaKind::bf16   ? f::from_bf16(static_cast<std::uint16_t>(bits))
         : kind == MmaKind::fp16 ? f::from_fp16(static_cast<std::uint16_t>(bits))
                                 : f::from_e4m3(static_cast<std::uint8_t>(bits));
}

struct Reference {
  std::vector<std::uint32_t> stated;  // the emulation's order, fp32 (s8: exact, wrapped to 32 bits)
  std::vector<double> exact, magnitude;  // sum and sum of |terms|, fp64
};

Reference reference(MmaKind kind, const Tile& t) {
  const int k = k_of(kind);
  Reference r{std::vector<std::uint32_t>(128), std::vector<double>(128), std::vector<double>(128)};
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      const int o = i * 8 + j;
      if (kind == MmaKind::s8) {
        std::int64_t s = static_cast<std::int32_t>(t.c[o]);
        for (int x = 0; x < k; ++x)
          s += static_cast<std::int8_t>(t.a[i * k + x]) * static_cast<std::int8_t>(t.b[x * 8 + j]);
        r.stated[o] = static_cast<std::uint32_t>(s);
        continue;
      }
      float s = std::bit_cast<float>(t.c[o]);
      double e = s, m = std::fabs(e);
      for (int x = 0; x < k; ++x) {
        const double p = value(kind, t.a[i * k + x]) * value(kind, t.b[x * 8 + j]);
        REQUIRE(static_cast<double>(static_cast<float>(p)) == p);  // the product is exact in fp32
        s += static_cast<float>(p);
        e += p;  // fp64: within about 2^-50 sum|terms| of the exact sum, nothing beside the bounds
        m += std::fabs(p);
      }
      r.stated[o] = std::bit_cast<std::uint32_t>(s);
      r.exact[o] = e;
      r.magnitude[o] = m;
    }
  return r;
}

// Distance in units of the last place between two finite floats of any sign.
std::int64_t ulps(std::uint32_t x, std::uint32_t y) {
  const auto key = [](std::uint32_t b) -> std::int64_t {
    return b & 0x80000000u ? -static_cast<std::int64_t>(b & 0x7FFFFFFFu) : static_cast<std::int64_t>(b);
  };
  return std::llabs(key(x) - key(y));
}

}  // namespace

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

TEST_CASE("mma through the fragment tables: a tile of small integers is exact; swapped registers are not") {
  CHECK(mma_lane_map(false));
  CHECK_FALSE(mma_lane_map(true));
}

TEST_CASE("mma tiles: bf16, fp16, e4m3 (fp32 accumulate) and s8 (s32) against the stated order and the exact sum") {
  struct Kind {
    MmaKind kind;
    const char* name;
    double u_acc;  // see the file's comment
  };
  const Kind kinds[] = {{MmaKind::bf16, "bf16", 0x1p-23},
                        {MmaKind::fp16, "fp16", 0x1p-23},
                        {MmaKind::s8, "s8", 0.0},
                        {MmaKind::e4m3, "e4m3", 0x1p-23}};
  std::mt19937 rng(2024);
  for (const Kind& kd : kinds) {
    CAPTURE(kd.name);
    const int k = k_of(kd.kind);
    long elements = 0, differ = 0, planted_caught = 0, nearest = 0, toward_zero = 0;
    std::int64_t max_ulps = 0;
    double worst = 0.0, worst_stated = 0.0;  // max |d - exact| / sum |terms|
    const int tiles = tiles_per_kind();
    for (int trial = 0; trial < tiles; ++trial) {
      const Tile t = random_tile(kd.kind, rng, trial % 2 == 1);
      const Reference ref = reference(kd.kind, t);
      const std::vector<std::uint32_t> d = mma_tile(kd.kind, t.a, t.b, t.c);
      if (trial < 4) planted_caught += mma_tile(kd.kind, t.a, t.b, t.c, true) != ref.stated;
      for (int o = 0; o < 128; ++o) {
        ++elements;
        if (kd.kind == MmaKind::s8) {
          differ += d[o] != ref.stated[o];
          continue;
        }
        REQUIRE(std::isfinite(std::bit_cast<float>(d[o])));
        if (d[o] != ref.stated[o]) {
          ++differ;
          max_ulps = std::max(max_ulps, ulps(d[o], ref.stated[o]));
        }
        const float rn = static_cast<float>(ref.exact[o]);  // fp64 -> fp32 rounds to nearest even
        const float rz = std::fabs(rn) > std::fabs(ref.exact[o]) ? std::nextafter(rn, 0.0f) : rn;
        nearest += std::bit_cast<float>(d[o]) == rn;
        toward_zero += std::bit_cast<float>(d[o]) == rz;
        const double scale = ref.magnitude[o] > 0 ? ref.magnitude[o] : 1.0;
        worst = std::max(worst, std::fabs(std::bit_cast<float>(d[o]) - ref.exact[o]) / scale);
        worst_stated = std::max(worst_stated, std::fabs(std::bit_cast<float>(ref.stated[o]) - ref.exact[o]) / scale);
      }
    }
    if (kd.kind == MmaKind::s8)
      std::printf("tensor-core bits: s8   %s: %ld elements of %d tiles (k = 32), %ld differ from the exact sum "
                  "wrapped to 32 bits\n", on_device ? "device" : "emulator", elements, tiles, differ);
    else
      std::printf("tensor-core bits: %-4s %s: %ld elements of %d tiles (k = %d), %ld differ from the emulation's "
                  "order (max %lld ulp); %ld equal the exact sum rounded to nearest, %ld rounded toward zero; "
                  "max |d - exact| / sum|terms| = %.3g (emulation's order %.3g, bound %.3g)\n",
                  kd.name, on_device ? "device" : "emulator", elements, tiles, k, differ,
                  static_cast<long long>(max_ulps), nearest, toward_zero, worst, worst_stated, (k + 1) * kd.u_acc);
    CHECK(planted_caught == 4);  // the swapped A registers change every tile
    if (kd.kind == MmaKind::s8 || !on_device) CHECK(differ == 0);  // integers are exact; the emulator is the order
    CHECK(worst <= (k + 1) * kd.u_acc);
  }
}

TEST_CASE("s8 mma accumulates in wrapping 32-bit two's complement") {
  std::vector<std::uint32_t> a(16 * 32, 0x80u), b(32 * 8, 0x80u), c(128, 0x7FFFFFFFu);  // -128 * -128 * 32 = 2^19
  const std::vector<std::uint32_t> d = mma_tile(MmaKind::s8, a, b, c);
  for (std::uint32_t x : d) CHECK(x == 0x7FFFFFFFu + (1u << 19));
}

TEST_CASE("cp.async: every copy complete after the wait_group that covers it; src_bytes zero-fills") {
  const std::vector<std::int32_t> got = cp_async_probe(false);  // no racing reads
  for (int t = 0; t < 32; ++t) {
    CAPTURE(t);
    const std::int32_t* o = got.data() + t * cp_async_outputs;
    for (int i = 0; i < 4; ++i) CHECK(o[4 + i] == 1000 + t * 4 + i);  // group 0 done by wait_group<1>
    CHECK(o[14] == 1000 + 192 + t * 4);                                // group 1 done by wait_group<0>
    CHECK(o[15] == 1000 + 193 + t * 4);
    CHECK(o[16] == 0);  // past src_bytes = 8
    CHECK(o[17] == 0);
    CHECK(o[18] == 1000 + 128 + t * 2);
    CHECK(o[19] == 1000 + 129 + t * 2);
    CHECK(o[20] == 1000 + 320 + t);
  }
}

TEST_CASE("cp.async rows: waited for and behind a barrier, a neighbour's row reads right") {
  CHECK(cp_async_missing_wait(false));  // the correct variant of the planted kernels
}

}  // namespace simt_tests
