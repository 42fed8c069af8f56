// ref/src/07-precision/cpu_gemm_int8_amx.cpp -- the int8 GEMM's AMX path (ladder/07-precision/cpu_gemm.hpp):
// TDPBSSD on tiles (Intel SDM vol. 1 ch. 18, "Intel Advanced Matrix Extensions"; vol. 2, TDPBSSD). A tile is
// up to 16 rows x 64 bytes; TDPBSSD(C, A, B) adds to each int32 C[i][j] (16 x 16) the sum over the tile's
// 64 bytes of signed a x signed b, with A [16 rows][64 k] and B in VNNI layout, [16 k-groups][16 columns][4]
// (column j's 4 bytes b[4g..4g+3][j] in row g). Signed x signed: no +128 offset and no compensation term (the
// VNNI paths need one). The int32 additions wrap modulo 2^32 (TDPBSSD does not saturate) and the exact sum fits
// int32 for k <= kA8W8MaxK, so, as on the other paths, any order gives the exact result.
//   a is read in place (row stride lda = k), except where k is not a multiple of 64 (one copy with rows
//     zero-padded to lda = 64 ceil(k / 64)) and for the last rows of m (a 32-row zero-padded copy);
//   b is packed per thread, one chunk of kNB columns over all of k, by the AVX-512 path's pack_b (layout
//     [k-group][64 columns][4], zero past k and n): the B tile of columns 16 q .. 16 q + 15 at k-step s is 16
//     rows of 64 bytes at stride 256, at (16 s) 256 + 64 q;
//   the micro-kernel keeps a 32 x 32 block of c in 4 tiles (tmm0..3; tmm4, 5: A; tmm6, 7: B) over all of k and
//     stores it once; blocks on the edges of m or n go through a 32 x 32 buffer.
// The CPU must report AMX-TILE and AMX-INT8 (CPUID.(EAX=7,ECX=0):EDX bits 24, 25), the OS must enable the tile
// state (XCR0 bits 17, 18), and Linux must grant this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA; refused: no AMX path). Each OpenMP thread loads the tile configuration before its tiles
// and releases them after.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_gemm_util.hpp"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define LADDER_AMX_X86 1
#endif

namespace ladder::precision::detail {

bool amx_int8_available() {
#ifdef LADDER_AMX_X86
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: XGETBV usable
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 24)) || !(d & (1u << 25))) return false;  // AMX-TILE, AMX-INT8
    unsigned xlo = 0, xhi = 0;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if ((xlo & (3u << 17)) != (3u << 17)) return false;  // XTILECFG, XTILEDATA enabled by the OS
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;  // once per process
  }();
  return ok;
#else
  return false;
#endif
}

#ifdef LADDER_AMX_X86
namespace amx {

constexpr int64_t kNR = 64, kNB = 128, kMB = 32;  // pack_b's panel, a thread's column chunk, the block's rows

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig full_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;  // C: 16 x 16 int32; A, B: 16 x 64 bytes
  return cfg;
}

// A static object, not a local: GCC 12 sees only the first byte of the operand of _tile_loadconfig's asm as
// read and dropped the stores of a local's rows and colsb (LDTILECFG then faulted on the all-zero tiles).
__attribute__((target("amx-tile"))) void configure() {
  static constexpr TileConfig kConfig = full_tiles();
  _tile_loadconfig(&kConfig);
}

__attribute__((target("amx-tile"))) void release() { _tile_release(); }

// c[32 x 32] (row stride ldc) = rows a0 .. a0 + 31 (stride lda) times the packed columns at bp (the first B
// tile's 16 k-groups; the second 16 columns at bp + 64), over `steps` k-steps of 64.
__attribute__((target("amx-tile,amx-int8"))) void kernel(const int8_t* a0, int64_t lda, const int8_t* bp,
                                                          int64_t steps, int32_t* c, int64_t ldc) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int8_t* a1 = a0 + 16 * lda;
  for (int64_t s = 0; s < steps; ++s) {
    const int8_t* bs = bp + s * 16 * kNR * 4;
    _tile_loadd(4, a0 + 64 * s, lda);
    _tile_loadd(6, bs, kNR * 4);
    _tile_loadd(7, bs + 64, kNR * 4);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_loadd(5, a1 + 64 * s, lda);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  const int64_t stride = ldc * 4;
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 16, stride);
  _tile_stored(2, c + 16 * ldc, stride);
  _tile_stored(3, c + 16 * ldc + 16, stride);
}

}  // namespace amx

void gemm_s8s8s32_amx(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
  using namespace amx;
  const int64_t lda = (k + 63) / 64 * 64, kg = lda / 4, steps = lda / 64, chunks = (n + kNB - 1) / kNB;
  if (k == 0) {  // every sum is zero
    std::fill(c, c + m * n, 0);
    return;
  }
  if (lda != k) {  // rows zero-padded to whole k-steps (b is zero there: the pad adds nothing)
    thread_local std::vector<int8_t> padded;
    padded.assign(static_cast<size_t>(m * lda), 0);
    for (int64_t i = 0; i < m; ++i) std::copy_n(a + i * k, k, padded.data() + i * lda);
    a = padded.data();
  }
  const int64_t mfull = m / kMB * kMB;  // rows read in place; the rest through a zero-padded copy
  std::vector<int8_t> tail(static_cast<size_t>(kMB * lda), 0);
  std::copy_n(a + mfull * lda, (m - mfull) * lda, tail.data());
#pragma omp parallel
  {
    thread_local std::vector<int8_t> bbuf;  // the chunk's packed columns over all of k, kept from call to call
    bbuf.resize(static_cast<size_t>(kNB / kNR * kg * kNR * 4));
    int32_t edge[kMB * 32], corr[kNR];
    bool configured = false;
#pragma omp for schedule(dynamic)
    for (int64_t jc = 0; jc < chunks; ++jc) {
      if (!configured) configure(), configured = true;
      const int64_t jc0 = jc * kNB, cols = std::min(kNB, n - jc0), panels = (cols + kNR - 1) / kNR;
      for (int64_t jp = 0; jp < panels; ++jp)
        vnni512::pack_b(b, k, n, 0, kg, jc0 + jp * kNR, bbuf.data() + jp * kg * kNR * 4, corr);
      for (int64_t i0 = 0; i0 < m; i0 += kMB) {
        const int64_t h = std::min(kMB, m - i0);
        const int8_t* ai = i0 < mfull ? a + i0 * lda : tail.data();
        for (int64_t j = 0; j < cols; j += 32) {
          const int64_t w = std::min<int64_t>(32, cols - j), jp = j / kNR;
          const int8_t* bp = bbuf.data() + jp * kg * kNR * 4 + (j % kNR) * 4;
          if (h == kMB && w == 32) {
            kernel(ai, lda, bp, steps, c + i0 * n + jc0 + j, n);
            continue;
          }
          kernel(ai, lda, bp, steps, edge, 32);
          for (int64_t r = 0; r < h; ++r) std::copy_n(edge + r * 32, w, c + (i0 + r) * n + jc0 + j);
        }
      }
    }
    if (configured) release();
  }
}
#else
void gemm_s8s8s32_amx(const int8_t*, const int8_t*, int32_t*, int64_t, int64_t, int64_t) {
  throw Error("gemm_s8s8s32_cpu: the amx path is not built for this target");
}
#endif

}  // namespace ladder::precision::detail
