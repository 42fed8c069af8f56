// ref/src/07-precision/cpu_gemm_int8.cpp -- the int8 GEMM's CPU paths (ladder/07-precision/cpu_gemm.hpp):
// AVX-VNNI and AVX2 kernels behind function attributes, chosen at run time, the portable loop, and the
// dispatch to the AVX512-VNNI path (cpu_gemm_int8_avx512.cpp, which packs only b, per thread) and the AMX path
// (cpu_gemm_int8_amx.cpp).
//
// Packing (Goto and van de Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS 34(3),
// 2008): b in panels of NR columns, each k-group of 4 rows stored as NR dwords (column c's 4 bytes
// b[4g..4g+3][c], the operand VPDPBUSD multiplies per lane), zero past k and n; a in panels of MR rows,
// k-group g of row r as one dword of a + 128 (128, i.e. a = 0, past k and m). The micro-kernel keeps an
// MR x NR tile of int32 sums in registers: per k-group, NR/lanes loads of b, MR broadcasts of a, MR NR/lanes
// VPDPBUSDs. The first k-block starts from -128 colsum_j (the offset's correction), later ones add to c.
//
// AVX2 (no VNNI): a and b sign-extended to int16, no offset; k-group g's two pairs (4g, 4g+1), (4g+2, 4g+3)
// each one dword (low word the even k) per row of a and per column of b, and the kernel adds VPMADDWD's
// a_k b_k + a_k+1 b_k+1 to its int32 sums with VPADDD. Why this cannot saturate or overflow (Intel SDM,
// PMADDWD: each dword = the sum of the two signed 16 x 16 -> 32 products, wrapping only when all four
// words are -32768): every word is an int8 value in [-128, 127], so each product lies in [-16256, 16384]
// and the pair's sum in [-32512, 32768], exact in int32; VPADDD then adds modulo 2^32 and the exact sum
// fits int32 (k <= kA8W8MaxK), so, as above, any order ends at the exact result. The usual AVX2 int8 route,
// VPMADDUBSW (unsigned x signed bytes, the pair's sum SATURATED to int16), is not exact here: with a + 128
// in [0, 255] a pair reaches 2 255 127 = 64770 > 32767, and the |a| x sign(b, a) variant turns a run of
// (-128)(-128) into 128 (-128) (VPSIGNB cannot negate -128); test_cpu_gemm.cpp keeps that candidate failing.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_gemm_util.hpp"
#include "ladder/07-precision/a8w8.hpp"
#include "ladder/07-precision/cpu_gemm.hpp"

namespace ladder::precision {
namespace {

constexpr int64_t kMR = 6;  // rows per micro-tile (both kernels)

struct PackedInt8 {
  int64_t nr = 0, kg = 0, mp = 0, np = 0;  // NR, k-groups of 4, row panels, column panels
  bool i16 = false;                        // AVX2's int16 operands (a16, b16) instead of a, b
  std::vector<uint8_t> a;                  // [mp][kg][MR][4]
  std::vector<int8_t> b;                   // [np][kg][NR][4]
  std::vector<int16_t> a16, b16;           // [mp][2 kg][MR][2], [np][2 kg][NR][2]
  std::vector<int32_t> corr;               // [np NR]: -128 colsum_j (0 for int16 operands: no offset)
};

// AVX2's operands, int16 and without offset (the layout above), into p's a16, b16; corr = 0.
void pack_i16(PackedInt8& p, const int8_t* a, const int8_t* b, int64_t m, int64_t k, int64_t n) {
  const int64_t nr = p.nr, pairs = 2 * p.kg;
  p.a16.resize(static_cast<size_t>(p.mp * pairs * kMR * 2));
  p.b16.resize(static_cast<size_t>(p.np * pairs * nr * 2));
  p.corr.assign(static_cast<size_t>(p.np * nr), 0);
#pragma omp parallel for schedule(static)
  for (int64_t ip = 0; ip < p.mp; ++ip) {
    int16_t* dst = p.a16.data() + ip * pairs * kMR * 2;
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t r = 0; r < kMR; ++r)
        for (int64_t t = 0; t < 2; ++t) {
          const int64_t i = ip * kMR + r, kk = 2 * q + t;
          *dst++ = i < m && kk < k ? a[i * k + kk] : 0;
        }
  }
#pragma omp parallel for schedule(static)
  for (int64_t jp = 0; jp < p.np; ++jp) {
    int16_t* dst = p.b16.data() + jp * pairs * nr * 2;
    const int64_t j0 = jp * nr, w = std::min(nr, n - j0);
    for (int64_t q = 0; q < pairs; ++q, dst += nr * 2)
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t kk = 2 * q + t;
        for (int64_t c = 0; c < nr; ++c) dst[c * 2 + t] = kk < k && c < w ? b[kk * n + j0 + c] : 0;
      }
  }
}

// Into the calling thread's buffers, kept from call to call (no fresh pages to fault in on every call).
const PackedInt8& pack(const int8_t* a, const int8_t* b, int64_t m, int64_t k, int64_t n, int64_t nr, bool i16) {
  thread_local PackedInt8 tls;
  PackedInt8& p = tls;  // shared by the OpenMP threads below (each has its own thread_local)
  p.nr = nr;
  p.kg = (k + 3) / 4;
  p.mp = (m + kMR - 1) / kMR;
  p.np = (n + nr - 1) / nr;
  p.i16 = i16;
  if (i16) {
    pack_i16(p, a, b, m, k, n);
    return p;
  }
  // Every byte is written below, padding included: resize, not assign (no pass over the buffers first).
  p.a.resize(static_cast<size_t>(p.mp * p.kg * kMR * 4));
  p.b.resize(static_cast<size_t>(p.np * p.kg * nr * 4));
  p.corr.resize(static_cast<size_t>(p.np * nr));
#pragma omp parallel for schedule(static)
  for (int64_t ip = 0; ip < p.mp; ++ip) {
    uint8_t* dst = p.a.data() + ip * p.kg * kMR * 4;
    for (int64_t g = 0; g < p.kg; ++g)
      for (int64_t r = 0; r < kMR; ++r)
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t i = ip * kMR + r, kk = 4 * g + t;
          *dst++ = i < m && kk < k ? static_cast<uint8_t>(static_cast<uint8_t>(a[i * k + kk]) ^ 0x80u) : 0x80;
        }
  }
#pragma omp parallel for schedule(static)
  for (int64_t jp = 0; jp < p.np; ++jp) {
    int8_t* dst = p.b.data() + jp * p.kg * nr * 4;
    const int64_t j0 = jp * nr, w = std::min(nr, n - j0);
    int32_t* corr = p.corr.data() + j0;  // -128 colsum_j (exact: |128 colsum| <= 128 K 128 < 2^31)
    std::fill(corr, corr + nr, 0);
    for (int64_t g = 0; g < p.kg; ++g, dst += nr * 4)
      for (int64_t t = 0; t < 4; ++t) {
        const int64_t kk = 4 * g + t;
        if (kk >= k) {
          for (int64_t c = 0; c < nr; ++c) dst[c * 4 + t] = 0;
          continue;
        }
        const int8_t* src = b + kk * n + j0;
        for (int64_t c = 0; c < w; ++c) dst[c * 4 + t] = src[c], corr[c] -= 128 * src[c];
        for (int64_t c = w; c < nr; ++c) dst[c * 4 + t] = 0;
      }
  }
  return p;
}

inline int32_t load_dword(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The kernels name their MR x NR/lanes sums one by one (an array of vectors is spilled to the stack by GCC).
#define LADDER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static_assert(kMR == 6, "LADDER_ROWS names kMR rows");

// One MR x 16 tile, AVX-VNNI (VEX-encoded VPDPBUSD on ymm; 16 registers: 12 sums, 2 of b, 1 of a).
__attribute__((target("avx2,avxvnni"))) void kernel_avx(const uint8_t* ap, const int8_t* bp, int64_t kg,
                                                          int32_t* c, int64_t ldc, const int32_t* init) {
  // (no lambdas here: a lambda does not inherit the target attribute)
#define LADDER_LD(q) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))
#define LADDER_LOAD(r) \
  __m256i c##r##0 = LADDER_LD(init ? init : c + r * ldc), c##r##1 = LADDER_LD(init ? init + 8 : c + r * ldc + 8);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
#undef LADDER_LD
  for (int64_t g = 0; g < kg; ++g) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + g * 64)),
                  b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + g * 64 + 32));
    const uint8_t* ag = ap + g * kMR * 4;
#define LADDER_STEP(r)                                             \
  {                                                                \
    const __m256i x = _mm256_set1_epi32(load_dword(ag + 4 * r));  \
    c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, x, b0);             \
    c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, x, b1);             \
  }
    LADDER_ROWS(LADDER_STEP)
#undef LADDER_STEP
  }
#define LADDER_STORE(r)                                                        \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), c##r##0);       \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), c##r##1);
  LADDER_ROWS(LADDER_STORE)
#undef LADDER_STORE
}
// One MR x 16 tile, AVX2 on int16 operands (the layout above; 16 registers: 12 sums, 2 of b, 1 of a, 1
// product): per pair, 2 loads of b, MR broadcasts of a's dword, 2 MR VPMADDWD + VPADDD.
__attribute__((target("avx2"))) void kernel_avx2(const uint8_t* ap, const int8_t* bp, int64_t kg, int32_t* c,
                                                 int64_t ldc, const int32_t* init) {
#define LADDER_LD(q) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))
#define LADDER_LOAD(r) \
  __m256i c##r##0 = LADDER_LD(init ? init : c + r * ldc), c##r##1 = LADDER_LD(init ? init + 8 : c + r * ldc + 8);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
  for (int64_t q = 0; q < 2 * kg; ++q) {  // pairs of k: 16 dwords of b (64 bytes), MR dwords of a
    const __m256i b0 = LADDER_LD(bp + q * 64), b1 = LADDER_LD(bp + q * 64 + 32);
    const uint8_t* aq = ap + q * kMR * 4;
#define LADDER_STEP(r)                                                         \
  {                                                                            \
    const __m256i x = _mm256_set1_epi32(load_dword(aq + 4 * r));              \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(x, b0));            \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(x, b1));            \
  }
    LADDER_ROWS(LADDER_STEP)
#undef LADDER_STEP
  }
#undef LADDER_LD
#define LADDER_STORE(r)                                                        \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc), c##r##0);       \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * ldc + 8), c##r##1);
  LADDER_ROWS(LADDER_STORE)
#undef LADDER_STORE
}
#undef LADDER_ROWS

using Kernel = void (*)(const uint8_t*, const int8_t*, int64_t, int32_t*, int64_t, const int32_t*);

void run_packed(const PackedInt8& p, int32_t* c, int64_t m, int64_t n, Kernel kernel) {
  const int64_t nr = p.nr, kc = 128;  // k-groups per block: 512 values of k (b's micro-panel: 512 NR bytes)
  // Row blocks of at most 64 panels (384 rows: a's block, 384 x 512 bytes, stays in L2), evenly split, so b
  // streams from memory ceil(m / 384) times; column blocks of 512 columns.
  const int64_t mb = (p.mp + 63) / 64, mc = (p.mp + mb - 1) / mb, nc = std::max<int64_t>(1, 512 / nr);
  const int64_t nb = (p.np + nc - 1) / nc;
  const int64_t w = p.i16 ? 2 : 1;  // bytes per operand (the kernels take byte pointers)
  const uint8_t* a = p.i16 ? reinterpret_cast<const uint8_t*>(p.a16.data()) : p.a.data();
  const int8_t* b = p.i16 ? reinterpret_cast<const int8_t*>(p.b16.data()) : p.b.data();
  if (p.kg == 0) {  // k = 0: every sum is zero
    std::fill(c, c + m * n, 0);
    return;
  }
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t ib = 0; ib < mb; ++ib)
    for (int64_t jb = 0; jb < nb; ++jb) {
      std::vector<int32_t> tile(static_cast<size_t>(kMR * nr));
      for (int64_t g0 = 0; g0 < p.kg; g0 += kc) {
        const int64_t gl = std::min(kc, p.kg - g0);
        for (int64_t jp = jb * nc; jp < std::min(p.np, (jb + 1) * nc); ++jp) {
          const int8_t* bp = b + (jp * p.kg + g0) * nr * 4 * w;
          const int32_t* init = g0 == 0 ? p.corr.data() + jp * nr : nullptr;
          for (int64_t ip = ib * mc; ip < std::min(p.mp, (ib + 1) * mc); ++ip) {
            const uint8_t* ap = a + (ip * p.kg + g0) * kMR * 4 * w;
            const int64_t i0 = ip * kMR, j0 = jp * nr, h = std::min(kMR, m - i0), w = std::min(nr, n - j0);
            if (h == kMR && w == nr) {
              kernel(ap, bp, gl, c + i0 * n + j0, n, init);
              continue;
            }
            if (!init)  // an edge tile through a full-size buffer
              for (int64_t r = 0; r < h; ++r) std::copy_n(c + (i0 + r) * n + j0, w, tile.data() + r * nr);
            kernel(ap, bp, gl, tile.data(), nr, init);
            for (int64_t r = 0; r < h; ++r) std::copy_n(tile.data() + r * nr, w, c + (i0 + r) * n + j0);
          }
        }
      }
    }
}

void portable(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    int32_t* ci = c + i * n;
    std::fill(ci, ci + n, 0);
    for (int64_t kk = 0; kk < k; ++kk) {
      const int32_t av = a[i * k + kk];
      const int8_t* bk = b + kk * n;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * static_cast<int32_t>(bk[j]);
    }
  }
}

}  // namespace

bool int8_path_available(CpuPath p) {
  switch (p) {
    case CpuPath::amx:  // pack_b (AVX-512) and the tiles; every AMX CPU so far has both
      return int8_path_available(CpuPath::avx512) && detail::amx_int8_available();
    case CpuPath::avx512:
      return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    case CpuPath::avx:
      return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2");
    case CpuPath::avx2:
      return __builtin_cpu_supports("avx2");
    default:
      return true;
  }
}

CpuPath int8_path() {
  static const CpuPath best =
      detail::best_path(int8_path_available, {CpuPath::amx, CpuPath::avx512, CpuPath::avx, CpuPath::avx2});
  return best;
}

void gemm_s8s8s32_cpu(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n, CpuPath path) {
  require(m >= 0 && n >= 0, "gemm_s8s8s32_cpu: m = {}, n = {} violate >= 0", m, n);
  require(k >= 0 && k <= kA8W8MaxK,
          "gemm_s8s8s32_cpu: K = {} violates 0 <= K <= {} (a sum of K int8 x int8 products must fit int32)", k,
          kA8W8MaxK);
  if (path == CpuPath::automatic) path = int8_path();
  require(int8_path_available(path), "gemm_s8s8s32_cpu: path = {} is not available on this CPU", cpu_path_name(path));
  if (m == 0 || n == 0) return;
  if (path == CpuPath::portable) return portable(a, b, c, m, k, n);
  if (path == CpuPath::avx512) return detail::gemm_s8s8s32_avx512(a, b, c, m, k, n);  // cpu_gemm_int8_avx512.cpp
  if (path == CpuPath::amx) return detail::gemm_s8s8s32_amx(a, b, c, m, k, n);  // cpu_gemm_int8_amx.cpp
  const bool i16 = path == CpuPath::avx2;
  run_packed(pack(a, b, m, k, n, 16, i16), c, m, n, i16 ? kernel_avx2 : kernel_avx);
}

}  // namespace ladder::precision

const char* ladder::precision::cpu_path_name(CpuPath p) {
  switch (p) {
    case CpuPath::automatic: return "automatic";
    case CpuPath::amx: return "amx";
    case CpuPath::avx512: return "avx512";
    case CpuPath::avx: return "avx";
    case CpuPath::avx2: return "avx2";
    case CpuPath::portable: return "portable";
  }
  return "?";
}
