// ref/src/07-precision/cpu_gemm_bf16.cpp -- the bf16 GEMM's CPU paths (ladder/07-precision/cpu_gemm.hpp): an
// AVX2 + FMA kernel behind a function attribute, chosen at run time, the portable loop that reproduces
// VDPBF16PS's arithmetic bit for bit (the contract in the header), and the dispatch to the AVX512_BF16 path
// (VDPBF16PS itself, cpu_gemm_bf16_avx512.cpp).
//
// Packing as the int8 GEMM's AVX2 path (cpu_gemm_int8.cpp), with pairs of k for groups of 4: b in panels of
// 16 columns, a in panels of MR rows, zero past k, m and n. A zero pad element adds fma(+-0, y, acc) to the
// chain, which the portable loop adds too (it can turn an accumulated -0 into +0).
//
// AVX2 + FMA: the contract's steps as VFMADD231PS, whose arithmetic MXCSR controls (Intel SDM vol. 1,
// 10.2.3 "MXCSR control and status register"), so the kernel runs under MXCSR = 0x9F80 (all exceptions
// masked, round to nearest even, FZ set), restored afterwards, on each OpenMP thread:
//   DAZ: done at packing (a bf16 subnormal becomes the float32 zero of its sign), so no operand the kernel
//        sees is subnormal (inputs DAZ'd, the accumulator FTZ'd) and MXCSR.DAZ is not needed;
//   fma32 with RNE: one VFMADD231PS, rounded as MXCSR.RC = nearest;
//   FTZ: MXCSR.FZ with underflow masked returns tiny results as the zero of the true result's sign (SDM
//        vol. 1, 10.2.3.3 and 11.5.2.5), tiny meaning "the magnitude of the rounded result, with unbounded
//        exponent, is less than the smallest normalized" value (11.5.2.5): tininess after rounding, the
//        contract's rule. That exact subnormal results are flushed too, and the 2^-126 boundary, are checked
//        on the machine by test_cpu_gemm.cpp's corner cases (a CPU that differed would fail them).
// The two steps per pair are two FMAs, odd element first, on float32 operands packed from the bf16 codes
// (code << 16, exact): a [mp][kp][MR][2] (odd, even), b [np][kp][2][16] (16 odd, then 16 even), as bits.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "cpu_gemm_util.hpp"
#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/core/formats.hpp"

namespace ladder::precision {
namespace {

constexpr int64_t kMR = 6;
constexpr unsigned kMxcsrFtz = 0x9F80;  // exception masks (0x1F80), RC = nearest (0), FZ (0x8000), no DAZ

inline uint16_t daz_code(uint16_t x) { return (x & 0x7F80u) == 0 ? static_cast<uint16_t>(x & 0x8000u) : x; }

inline float daz(uint16_t x) { return formats::from_bf16(daz_code(x)); }

// FTZ(fma32(x, y, acc)) for DAZ'd float32 values x, y (the contract's step).
inline float step(float acc, float x, float y) {
  const float r = std::fma(x, y, acc);
  const float ar = std::fabs(r);
  if (!(ar <= FLT_MIN)) return r;                        // normal, infinite or NaN
  if (ar < FLT_MIN) return std::copysign(0.0f, r);      // subnormal (tiny after any rounding) or zero
  // r = +-2^-126: tiny iff the exact x y + acc rounded to 24 bits with an unbounded exponent is below 2^-126,
  // i.e. iff |x y + acc| < 2^-126 - 2^-151 (the midpoint to 2^-126 - 2^-150, which ties to 2^-126: even).
  // x y is exact in double (8-bit significands); TwoSum (Knuth, TAOCP vol. 2, 4.2.2) gives the sum as s + e.
  const double p = static_cast<double>(x) * static_cast<double>(y), a = acc;
  double s = p + a;
  const double bv = s - p;
  double e = (p - (s - bv)) + (a - bv);
  if (r < 0) s = -s, e = -e;
  constexpr double kT = 0x1p-126 - 0x1p-151;
  return (s < kT || (s == kT && e < 0)) ? std::copysign(0.0f, r) : r;
}

struct PackedBf16 {
  int64_t nr = 0, kp = 0, mp = 0, np = 0;  // NR, k-pairs, row panels, column panels
  std::vector<uint32_t> a, b;              // [mp][kp][MR][2], [np][kp][2][NR]: float32 bits
};

// AVX2's operands: float32 bits of the DAZ'd codes, zero past k, m and n.
void pack_f32(PackedBf16& p, const uint16_t* a, const uint16_t* b, int64_t m, int64_t k, int64_t n) {
  const int64_t nr = p.nr;
  p.a.resize(static_cast<size_t>(p.mp * p.kp * kMR * 2));
  p.b.resize(static_cast<size_t>(p.np * p.kp * 2 * nr));
  auto at = [](const uint16_t* x, int64_t rows, int64_t cols, int64_t r, int64_t c) -> uint32_t {
    return r < rows && c < cols ? static_cast<uint32_t>(daz_code(x[r * cols + c])) << 16 : 0;
  };
#pragma omp parallel for schedule(static)
  for (int64_t ip = 0; ip < p.mp; ++ip) {
    uint32_t* dst = p.a.data() + ip * p.kp * kMR * 2;
    for (int64_t g = 0; g < p.kp; ++g)
      for (int64_t r = 0; r < kMR; ++r) {
        const int64_t i = ip * kMR + r;
        *dst++ = at(a, m, k, i, 2 * g + 1);
        *dst++ = at(a, m, k, i, 2 * g);
      }
  }
#pragma omp parallel for schedule(static)
  for (int64_t jp = 0; jp < p.np; ++jp) {
    uint32_t* dst = p.b.data() + jp * p.kp * 2 * nr;
    const int64_t j0 = jp * nr;
    for (int64_t g = 0; g < p.kp; ++g)
      for (int64_t t : {1, 0})
        for (int64_t c = 0; c < nr; ++c) *dst++ = at(b, k, n, 2 * g + t, j0 + c);
  }
}

// Into the calling thread's buffers, kept from call to call (no fresh pages to fault in on every call).
const PackedBf16& pack(const uint16_t* a, const uint16_t* b, int64_t m, int64_t k, int64_t n) {
  thread_local PackedBf16 tls;
  PackedBf16& p = tls;  // shared by the OpenMP threads below (each has its own thread_local)
  const int64_t nr = 16;
  p.nr = nr;
  p.kp = (k + 1) / 2;
  p.mp = (m + kMR - 1) / kMR;
  p.np = (n + nr - 1) / nr;
  pack_f32(p, a, b, m, k, n);
  return p;
}

// The kernel names its MR x 4 sums one by one (an array of vectors is spilled to the stack by GCC).
#define LADDER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static_assert(kMR == 6, "LADDER_ROWS names kMR rows");

// One MR x 16 tile over kp k-pairs, AVX2 + FMA, under kMxcsrFtz (run_packed sets it); float32 operands
// (the layout above; 15 registers: 12 sums, 2 of b, 1 of a). Every sum takes its pair's odd step, then its
// even step. noinline: the caller's MXCSR writes stay outside every FMA.
__attribute__((target("avx2,fma"), noinline)) void kernel_avx2(const uint32_t* ap, const uint32_t* bp, int64_t kp,
                                                               float* c, int64_t ldc, bool first) {
#define LADDER_F(q) _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)))
#define LADDER_LD(at) (first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + (at)))
#define LADDER_LOAD(r) __m256 c##r##0 = LADDER_LD(r * ldc), c##r##1 = LADDER_LD(r * ldc + 8);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
#undef LADDER_LD
  for (int64_t g = 0; g < kp; ++g) {
    const uint32_t* ag = ap + g * kMR * 2;
#define LADDER_STEP(r, t)                                                                   \
  {                                                                                         \
    const __m256 x = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(ag[2 * r + t]))); \
    c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0);                                              \
    c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);                                              \
  }
#define LADDER_ODD(r) LADDER_STEP(r, 0)
#define LADDER_EVEN(r) LADDER_STEP(r, 1)
    {
      const __m256 b0 = LADDER_F(bp + g * 32), b1 = LADDER_F(bp + g * 32 + 8);  // the odd elements
      LADDER_ROWS(LADDER_ODD)
    }
    {
      const __m256 b0 = LADDER_F(bp + g * 32 + 16), b1 = LADDER_F(bp + g * 32 + 24);  // the even ones
      LADDER_ROWS(LADDER_EVEN)
    }
#undef LADDER_ODD
#undef LADDER_EVEN
#undef LADDER_STEP
  }
#undef LADDER_F
#define LADDER_STORE(r)                         \
  _mm256_storeu_ps(c + r * ldc, c##r##0);       \
  _mm256_storeu_ps(c + r * ldc + 8, c##r##1);
  LADDER_ROWS(LADDER_STORE)
#undef LADDER_STORE
}
#undef LADDER_ROWS

using Kernel = void (*)(const uint32_t*, const uint32_t*, int64_t, float*, int64_t, bool);

void run_packed(const PackedBf16& p, float* c, int64_t m, int64_t n, Kernel kernel, bool ftz) {
  // k-pairs per block (b's micro-panel: 8 KB), row panels per block (at most 64, evenly
  // split: a's block, 384 rows x 64 pairs, stays in L2, and b streams from memory ceil(m / 384) times),
  // column panels per block (512 columns).
  const int64_t nr = p.nr, aw = 2, kc = 64, mb = (p.mp + 63) / 64, mc = (p.mp + mb - 1) / mb;
  const int64_t nc = 512 / nr, nb = (p.np + nc - 1) / nc;
  if (p.kp == 0) {  // k = 0: every chain is empty, c = +0
    std::fill(c, c + m * n, 0.0f);
    return;
  }
#pragma omp parallel
  {
  const unsigned saved = _mm_getcsr();  // each thread's own MXCSR, restored (flags included) below
  if (ftz) _mm_setcsr(kMxcsrFtz);
#pragma omp for collapse(2) schedule(dynamic)
  for (int64_t ib = 0; ib < mb; ++ib)
    for (int64_t jb = 0; jb < nb; ++jb) {
      std::vector<float> tile(static_cast<size_t>(kMR * nr));
      for (int64_t g0 = 0; g0 < p.kp; g0 += kc) {
        const int64_t gl = std::min(kc, p.kp - g0);
        for (int64_t jp = jb * nc; jp < std::min(p.np, (jb + 1) * nc); ++jp) {
          const uint32_t* bp = p.b.data() + (jp * p.kp + g0) * nr * aw;
          for (int64_t ip = ib * mc; ip < std::min(p.mp, (ib + 1) * mc); ++ip) {
            const uint32_t* ap = p.a.data() + (ip * p.kp + g0) * kMR * aw;
            const int64_t i0 = ip * kMR, j0 = jp * nr, h = std::min(kMR, m - i0), w = std::min(nr, n - j0);
            if (h == kMR && w == nr) {
              kernel(ap, bp, gl, c + i0 * n + j0, n, g0 == 0);
              continue;
            }
            if (g0 > 0)  // an edge tile through a full-size buffer
              for (int64_t r = 0; r < h; ++r) std::copy_n(c + (i0 + r) * n + j0, w, tile.data() + r * nr);
            kernel(ap, bp, gl, tile.data(), nr, g0 == 0);
            for (int64_t r = 0; r < h; ++r) std::copy_n(tile.data() + r * nr, w, c + (i0 + r) * n + j0);
          }
        }
      }
    }
  if (ftz) _mm_setcsr(saved);
  }
}

// The contract's chain, row by row: every c_ij steps through the pairs in order, odd element first.
void portable(const uint16_t* a, const uint16_t* b, float* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * n;
    std::fill(ci, ci + n, 0.0f);
    for (int64_t kk = 0; kk < k; kk += 2) {
      if (kk + 1 < k) {
        const float x = daz(a[i * k + kk + 1]);
        for (int64_t j = 0; j < n; ++j) ci[j] = step(ci[j], x, daz(b[(kk + 1) * n + j]));
      } else {  // the pad: a zero pair element
        for (int64_t j = 0; j < n; ++j) ci[j] = step(ci[j], 0.0f, 0.0f);
      }
      const float x = daz(a[i * k + kk]);
      for (int64_t j = 0; j < n; ++j) ci[j] = step(ci[j], x, daz(b[kk * n + j]));
    }
  }
}

}  // namespace

float bf16_dot_step(float acc, uint16_t x, uint16_t y) { return step(acc, daz(x), daz(y)); }

bool bf16_path_available(CpuPath p) {
  if (p == CpuPath::avx512) return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f");
  if (p == CpuPath::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return p != CpuPath::avx && p != CpuPath::amx;
}

CpuPath bf16_path() {
  static const CpuPath best = detail::best_path(bf16_path_available, {CpuPath::avx512, CpuPath::avx2});
  return best;
}

void gemm_bf16_cpu(const uint16_t* a, const uint16_t* b, float* c, int64_t m, int64_t k, int64_t n, CpuPath path) {
  require(m >= 0 && k >= 0 && n >= 0, "gemm_bf16_cpu: m = {}, k = {}, n = {} violate >= 0", m, k, n);
  if (path == CpuPath::automatic) path = bf16_path();
  require(bf16_path_available(path), "gemm_bf16_cpu: path = {} is not available on this CPU", cpu_path_name(path));
  if (m == 0 || n == 0) return;
  if (path == CpuPath::portable) return portable(a, b, c, m, k, n);
  if (path == CpuPath::avx512) return detail::gemm_bf16_avx512(a, b, c, m, k, n);  // cpu_gemm_bf16_avx512.cpp
  run_packed(pack(a, b, m, k, n), c, m, n, kernel_avx2, true);
}

}  // namespace ladder::precision
