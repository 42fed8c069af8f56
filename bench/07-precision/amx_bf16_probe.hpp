// bench/07-precision/amx_bf16_probe.hpp -- why stage 07's bf16 GEMM has no AMX path: AMX-BF16's TDPBF16PS
// (Intel SDM vol. 2, TDPBF16PS) against the bf16 contract of ladder/07-precision/cpu_gemm.hpp (VDPBF16PS's
// arithmetic: per output, one float32 fused step per product, the pair's odd element first), on random tiles
// (normal bf16 values, no subnormals, no overflow), on the machine running the benchmark:
//   chain: 16 x 16 outputs over one tile of 16 k-pairs, each output's c in the tile starting from a random
//          float32; the share of outputs whose bits differ from the contract's chain (bf16_dot_step), and from
//          its other order (even element first);
//   pair:  the same with one k-pair per tile (the other 15 zero), against c + fl32(p_even + p_odd): the pair's
//          two exact products summed and rounded once, then added.
// A kernel can only reorder whole tiles: if a single tile's arithmetic is not the contract's chain, no
// blocking of TDPBF16PS gives the contract's bits. Printed by bench_07_precision's summary (chapter 07 §10).
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/rng.hpp"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ladder::bench {
namespace amx_probe {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64};  // c: 16 x 16 float32; a: 16 rows x 32 bf16; b: 16 k-pairs x 16 columns x 2
  uint8_t rows[16] = {16, 16, 16};
};
static const TileConfig kConfig{};  // static (GCC 12 drops a local's stores: cpu_gemm_int8_amx.cpp)

inline bool available() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24))) return false;  // BF16, TILE
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17) && syscall(SYS_arch_prctl, 0x1023, 18) == 0;  // ARCH_REQ_XCOMP_PERM
}

__attribute__((target("amx-tile,amx-bf16"))) inline void tile(const uint16_t* a, const uint16_t* b, float* c) {
  _tile_loadconfig(&kConfig);
  _tile_loadd(0, c, 64);
  _tile_loadd(1, a, 64);
  _tile_loadd(2, b, 64);
  _tile_dpbf16ps(0, 1, 2);
  _tile_stored(0, c, 64);
  _tile_release();
}

inline uint16_t code(Rng& r, double scale) { return formats::to_bf16(float(r.normal() * scale)); }

}  // namespace amx_probe

// "" where the CPU, OS or process cannot use AMX-BF16; else one line of the shares above over `tiles` tiles each.
inline std::string amx_bf16_probe(int tiles = 200) {
  using namespace amx_probe;
  if (!available()) return "";
  Rng r(2026);
  int64_t n = 0, chain = 0, even_first = 0, pair = 0;
  for (int one_pair = 0; one_pair < 2; ++one_pair)
    for (int t = 0; t < tiles; ++t) {
      alignas(64) uint16_t a[16 * 32] = {}, b[16 * 32] = {};
      alignas(64) float c[256], c0[256];
      const int pairs = one_pair ? 1 : 16, p0 = one_pair ? t % 16 : 0;
      for (int i = 0; i < 16; ++i)
        for (int p = p0; p < p0 + pairs; ++p)
          for (int e = 0; e < 2; ++e) a[i * 32 + 2 * p + e] = code(r, 1.0), b[p * 32 + 2 * i + e] = code(r, 1.0);
      for (float& x : c) x = float(r.normal() * 4.0);
      std::memcpy(c0, c, sizeof c);
      tile(a, b, c);
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
          float odd = c0[i * 16 + j], even = odd, sum2 = odd;
          for (int p = p0; p < p0 + pairs; ++p) {
            const uint16_t ae = a[i * 32 + 2 * p], ao = a[i * 32 + 2 * p + 1], be = b[p * 32 + 2 * j],
                           bo = b[p * 32 + 2 * j + 1];
            odd = precision::bf16_dot_step(precision::bf16_dot_step(odd, ao, bo), ae, be);
            even = precision::bf16_dot_step(precision::bf16_dot_step(even, ae, be), ao, bo);
            const double pe = double(formats::from_bf16(ae)) * formats::from_bf16(be),
                         po = double(formats::from_bf16(ao)) * formats::from_bf16(bo);
            sum2 = sum2 + float(pe + po);  // float(pe + po): the double sum of two exact products, rounded once
          }
          const float hw = c[i * 16 + j];
          auto differs = [&](float x) { return std::memcmp(&hw, &x, 4) != 0; };
          if (one_pair) {
            pair += differs(sum2);
          } else {
            ++n;
            chain += differs(odd);
            even_first += differs(even);
          }
        }
    }
  const double pct = 100.0 / double(n);
  return fmt::format("TDPBF16PS on {} random 16 x 16 x 32 tiles: {:.1f} % of outputs differ from the contract's chain "
                     "(odd element first), {:.1f} % from the even-first chain; with one k-pair per tile, {:.1f} % "
                     "differ from c + fl32(p_even + p_odd)", tiles, pct * double(chain), pct * double(even_first),
                     pct * double(pair));
}

}  // namespace ladder::bench
#else
namespace ladder::bench {
inline std::string amx_bf16_probe(int = 200) { return ""; }
}  // namespace ladder::bench
#endif
