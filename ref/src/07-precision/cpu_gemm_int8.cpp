// ref/src/07-precision/cpu_gemm_int8.cpp -- the int8 GEMM's CPU paths (ladder/07-precision/cpu_gemm.hpp):
// AVX512-VNNI and AVX-VNNI kernels behind function attributes, chosen at run time, and the portable loop.
//
// Packing (Goto and van de Geijn, "Anatomy of high-performance matrix multiplication", ACM TOMS 34(3),
// 2008): b in panels of NR columns, each k-group of 4 rows stored as NR dwords (column c's 4 bytes
// b[4g..4g+3][c], the operand VPDPBUSD multiplies per lane), zero past k and n; a in panels of MR rows,
// k-group g of row r as one dword of a + 128 (128, i.e. a = 0, past k and m). The micro-kernel keeps an
// MR x NR tile of int32 sums in registers: per k-group, NR/lanes loads of b, MR broadcasts of a, MR NR/lanes
// VPDPBUSDs. The first k-block starts from -128 colsum_j (the offset's correction), later ones add to c.
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
  std::vector<uint8_t> a;                  // [mp][kg][MR][4]
  std::vector<int8_t> b;                   // [np][kg][NR][4]
  std::vector<int32_t> corr;               // [np NR]: -128 colsum_j
};

// Into the calling thread's buffers, kept from call to call (no fresh pages to fault in on every call).
const PackedInt8& pack(const int8_t* a, const int8_t* b, int64_t m, int64_t k, int64_t n, int64_t nr) {
  thread_local PackedInt8 tls;
  PackedInt8& p = tls;  // shared by the OpenMP threads below (each has its own thread_local)
  p.nr = nr;
  p.kg = (k + 3) / 4;
  p.mp = (m + kMR - 1) / kMR;
  p.np = (n + nr - 1) / nr;
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

// One MR x 64 tile over kg k-groups: c (row stride ldc) = init (first block) or c, plus the products.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void kernel_avx512(const uint8_t* ap, const int8_t* bp,
    int64_t kg, int32_t* c, int64_t ldc, const int32_t* init) {
#define LADDER_LOAD(r) __m512i c##r##0 = _mm512_loadu_si512(init ? init : c + r * ldc),              \
                               c##r##1 = _mm512_loadu_si512(init ? init + 16 : c + r * ldc + 16),    \
                               c##r##2 = _mm512_loadu_si512(init ? init + 32 : c + r * ldc + 32),    \
                               c##r##3 = _mm512_loadu_si512(init ? init + 48 : c + r * ldc + 48);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
  for (int64_t g = 0; g < kg; ++g) {
    const __m512i b0 = _mm512_loadu_si512(bp + g * 256), b1 = _mm512_loadu_si512(bp + g * 256 + 64),
                  b2 = _mm512_loadu_si512(bp + g * 256 + 128), b3 = _mm512_loadu_si512(bp + g * 256 + 192);
    const uint8_t* ag = ap + g * kMR * 4;
#define LADDER_STEP(r)                                                  \
  {                                                                     \
    const __m512i x = _mm512_set1_epi32(load_dword(ag + 4 * r));       \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x, b0);                      \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x, b1);                      \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, x, b2);                      \
    c##r##3 = _mm512_dpbusd_epi32(c##r##3, x, b3);                      \
  }
    LADDER_ROWS(LADDER_STEP)
#undef LADDER_STEP
  }
#define LADDER_STORE(r)                            \
  _mm512_storeu_si512(c + r * ldc, c##r##0);       \
  _mm512_storeu_si512(c + r * ldc + 16, c##r##1);  \
  _mm512_storeu_si512(c + r * ldc + 32, c##r##2);  \
  _mm512_storeu_si512(c + r * ldc + 48, c##r##3);
  LADDER_ROWS(LADDER_STORE)
#undef LADDER_STORE
}

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
#undef LADDER_ROWS

using Kernel = void (*)(const uint8_t*, const int8_t*, int64_t, int32_t*, int64_t, const int32_t*);

void run_packed(const PackedInt8& p, int32_t* c, int64_t m, int64_t n, Kernel kernel) {
  const int64_t nr = p.nr, kc = 128;  // k-groups per block: 512 values of k (b's micro-panel: 512 NR bytes)
  // Row blocks of at most 64 panels (384 rows: a's block, 384 x 512 bytes, stays in L2), evenly split, so b
  // streams from memory ceil(m / 384) times; column blocks of 512 columns.
  const int64_t mb = (p.mp + 63) / 64, mc = (p.mp + mb - 1) / mb, nc = std::max<int64_t>(1, 512 / nr);
  const int64_t nb = (p.np + nc - 1) / nc;
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
          const int8_t* bp = p.b.data() + (jp * p.kg + g0) * nr * 4;
          const int32_t* init = g0 == 0 ? p.corr.data() + jp * nr : nullptr;
          for (int64_t ip = ib * mc; ip < std::min(p.mp, (ib + 1) * mc); ++ip) {
            const uint8_t* ap = p.a.data() + (ip * p.kg + g0) * kMR * 4;
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
    case CpuPath::avx512:
      return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    case CpuPath::avx:
      return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2");
    default:
      return true;
  }
}

CpuPath int8_path() {
  static const CpuPath best = detail::best_path(int8_path_available, {CpuPath::avx512, CpuPath::avx});
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
  const bool wide = path == CpuPath::avx512;
  run_packed(pack(a, b, m, k, n, wide ? 64 : 16), c, m, n, wide ? kernel_avx512 : kernel_avx);
}

}  // namespace ladder::precision

const char* ladder::precision::cpu_path_name(CpuPath p) {
  switch (p) {
    case CpuPath::automatic: return "automatic";
    case CpuPath::avx512: return "avx512";
    case CpuPath::avx: return "avx";
    case CpuPath::portable: return "portable";
  }
  return "?";
}
