// ref/src/07-precision/cpu_gemm_int8_avx512.cpp -- the int8 GEMM's AVX512-VNNI path (ladder/07-precision/
// cpu_gemm.hpp), laid out as oneDNN's brgemm matmul lays out its s8s8s32 product (oneDNN developer guide,
// "Nuances of int8 computations": s8 sources through VPDPBUSD with a compensation term):
//   a is not packed: the kernel broadcasts row i's k-group g, the dword a[i][4g..4g+3], straight from a (row
//     stride k; k not a multiple of 4: from a copy with the rows zero-padded to a multiple of 4) and flips it
//     to a + 128 (XOR 0x80 per byte) in the register;
//   b is packed by each thread for its own columns only, 4 rows x 64 columns at a time with byte and word
//     unpacks and 128-bit lane shuffles, into [k-group][column][4] (column c's 4 bytes b[4g..4g+3][c], the
//     operand VPDPBUSD multiplies per lane; zero past k and n), and the same pass sums the columns'
//     compensation -128 sum_k b_kj with one VPDPBUSD of 0x80 bytes per group;
//   the threads take column chunks of kNB columns (dynamic schedule): one parallel region, no barrier
//     between packing and the products, and a thread that is descheduled holds up one chunk, not a phase.
// Per chunk: b's columns packed over all of k (no barrier: per thread), then per row block of at most
// kMaxPanels row panels (384 rows: c's block, 384 x 128 int32, stays in L2 across the k-blocks; without row
// blocks the 4096^3 product ran at 0.76-0.80x oneDNN, with them 1.09x in one interleaved run), per k-block of
// kKC groups (b's micro-panel, kKC x 64 x 4 bytes = 32 KB, stays in L1 while the MR x 64 tiles of the row
// block use it; 128 groups ran 0.04-0.05x of oneDNN above 256 at the expert-up shape in three interleaved
// runs, the other shapes alike within the noise): each tile's sums start
// from c, or from the compensation in the first k-block. Tried and not kept: flipping b instead of a (b + 128
// unsigned, a signed, the compensation -128 rowsum_i(a) per row), which saves the XOR per broadcast but was
// no faster in the whole product (interleaved runs, 0.75-0.95x oneDNN either way). Every step is int32
// addition modulo 2^32 and the exact result fits int32 (k <= kA8W8MaxK), so this order gives the same sums
// as every other path (cpu_gemm_int8.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_gemm_util.hpp"

namespace ladder::precision::detail {
namespace vnni512 {

constexpr int64_t kMR = 6, kNR = 64, kKC = 128, kNB = 128;  // tile rows, tile columns, k-groups per block, chunk
constexpr int64_t kMaxPanels = 64;  // row panels per row block: c's block, 384 x kNB int32, stays in L2

// VSHUFI32X4 (the masked form with every lane kept: the unmasked intrinsic trips GCC 12's -Wmaybe-uninitialized).
#define LADDER_SHUF(x, y, imm) _mm512_maskz_shuffle_i32x4(__mmask16(0xFFFF), x, y, imm)

// b's rows [4 g0, 4 (g0 + gl)) x columns [j0, j0 + 64) into dst [gl][64][4]; corr[64] = -128 sum of them.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void pack_b(const int8_t* b, int64_t k, int64_t n, int64_t g0,
                                                                    int64_t gl, int64_t j0, int8_t* dst,
                                                                    int32_t* corr) {
  const int64_t w = std::min(kNR, n - j0);
  const __mmask64 mask = w == kNR ? ~__mmask64(0) : (__mmask64(1) << w) - 1;
  const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t g = 0; g < gl; ++g) {
    const int64_t kk = 4 * (g0 + g);
#define LADDER_ROW(t) (kk + (t) < k ? _mm512_maskz_loadu_epi8(mask, b + (kk + (t)) * n + j0) : _mm512_setzero_si512())
    const __m512i r0 = LADDER_ROW(0), r1 = LADDER_ROW(1), r2 = LADDER_ROW(2), r3 = LADDER_ROW(3);
#undef LADDER_ROW
    // per 128-bit lane L (columns 16 L .. 16 L + 15): t* pair rows 0/1 and 2/3 byte by byte, u* make dwords
    const __m512i t0 = _mm512_unpacklo_epi8(r0, r1), t1 = _mm512_unpackhi_epi8(r0, r1),
                  t2 = _mm512_unpacklo_epi8(r2, r3), t3 = _mm512_unpackhi_epi8(r2, r3);
    const __m512i u0 = _mm512_unpacklo_epi16(t0, t2), u1 = _mm512_unpackhi_epi16(t0, t2),  // columns +0, +4
                  u2 = _mm512_unpacklo_epi16(t1, t3), u3 = _mm512_unpackhi_epi16(t1, t3);  // columns +8, +12
    // transpose the 4 x 4 lanes: output q = lane q of u0, u1, u2, u3 (columns 16 q .. 16 q + 15)
    const __m512i v0 = LADDER_SHUF(u0, u1, 0x44), v1 = LADDER_SHUF(u0, u1, 0xEE),
                  v2 = LADDER_SHUF(u2, u3, 0x44), v3 = LADDER_SHUF(u2, u3, 0xEE);
    const __m512i o0 = LADDER_SHUF(v0, v2, 0x88), o1 = LADDER_SHUF(v0, v2, 0xDD),
                  o2 = LADDER_SHUF(v1, v3, 0x88), o3 = LADDER_SHUF(v1, v3, 0xDD);
    int8_t* d = dst + g * kNR * 4;
    _mm512_storeu_si512(d, o0), _mm512_storeu_si512(d + 64, o1);
    _mm512_storeu_si512(d + 128, o2), _mm512_storeu_si512(d + 192, o3);
    s0 = _mm512_dpbusd_epi32(s0, k80, o0), s1 = _mm512_dpbusd_epi32(s1, k80, o1);  // 128 sum b, per column
    s2 = _mm512_dpbusd_epi32(s2, k80, o2), s3 = _mm512_dpbusd_epi32(s3, k80, o3);
  }
  const __m512i z = _mm512_setzero_si512();
  _mm512_storeu_si512(corr, _mm512_sub_epi32(z, s0)), _mm512_storeu_si512(corr + 16, _mm512_sub_epi32(z, s1));
  _mm512_storeu_si512(corr + 32, _mm512_sub_epi32(z, s2)), _mm512_storeu_si512(corr + 48, _mm512_sub_epi32(z, s3));
}

#undef LADDER_SHUF

inline int32_t dword(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#define LADDER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static_assert(kMR == 6, "LADDER_ROWS names kMR rows");

// One MR x 64 tile over gl k-groups: c (row stride ldc) = (first ? 0 : c) + corr + the products; row r's
// k-group g is the dword at rows[r] + 4 g.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void kernel(const int8_t* const* rows, const int8_t* bp,
                                                                    int64_t gl, int32_t* c, int64_t ldc,
                                                                    const int32_t* corr, bool first) {
  const __m512i k0 = _mm512_loadu_si512(corr), k1 = _mm512_loadu_si512(corr + 16),
                k2 = _mm512_loadu_si512(corr + 32), k3 = _mm512_loadu_si512(corr + 48);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#define LADDER_LD(r, q) (first ? k##q : _mm512_add_epi32(k##q, _mm512_loadu_si512(c + (r) * ldc + 16 * (q))))
#define LADDER_LOAD(r) \
  __m512i c##r##0 = LADDER_LD(r, 0), c##r##1 = LADDER_LD(r, 1), c##r##2 = LADDER_LD(r, 2), c##r##3 = LADDER_LD(r, 3);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
#undef LADDER_LD
#define LADDER_PTR(r) const int8_t* a##r = rows[r];
  LADDER_ROWS(LADDER_PTR)
#undef LADDER_PTR
  for (int64_t g = 0; g < gl; ++g) {
    const int8_t* bg = bp + g * kNR * 4;
    const __m512i b0 = _mm512_loadu_si512(bg), b1 = _mm512_loadu_si512(bg + 64), b2 = _mm512_loadu_si512(bg + 128),
                  b3 = _mm512_loadu_si512(bg + 192);
#define LADDER_STEP(r)                                                                  \
  {                                                                                     \
    const __m512i x = _mm512_xor_si512(_mm512_set1_epi32(dword(a##r + 4 * g)), flip);   \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x, b0);                                      \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x, b1);                                      \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, x, b2);                                      \
    c##r##3 = _mm512_dpbusd_epi32(c##r##3, x, b3);                                      \
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
#undef LADDER_ROWS

}  // namespace vnni512

void gemm_s8s8s32_avx512(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n) {
  using namespace vnni512;
  const int64_t kg = (k + 3) / 4, lda = 4 * kg, mp = (m + kMR - 1) / kMR, chunks = (n + kNB - 1) / kNB;
  const int64_t mb = (mp + kMaxPanels - 1) / kMaxPanels, mc = (mp + mb - 1) / mb;  // row blocks, even
  if (kg == 0) {  // k = 0: every sum is zero
    std::fill(c, c + m * n, 0);
    return;
  }
  if (lda != k) {  // rows zero-padded to whole k-groups (b is zero there: the pad adds nothing)
    thread_local std::vector<int8_t> padded;
    padded.assign(static_cast<size_t>(m * lda), 0);
    for (int64_t i = 0; i < m; ++i) std::copy_n(a + i * k, k, padded.data() + i * lda);
    a = padded.data();
  }
#pragma omp parallel
  {
    thread_local std::vector<int8_t> bbuf;  // the chunk's packed columns over all of k, kept from call to call
    thread_local std::vector<int32_t> tile;
    bbuf.resize(static_cast<size_t>(kNB / kNR * kg * kNR * 4));
    tile.resize(static_cast<size_t>(kMR * kNR));
    int32_t corr[kNB / kNR][kNR];
    const int32_t none[kNR] = {};
#pragma omp for schedule(dynamic)
    for (int64_t jc = 0; jc < chunks; ++jc) {
      const int64_t jc0 = jc * kNB, panels = (std::min(kNB, n - jc0) + kNR - 1) / kNR;
      for (int64_t jp = 0; jp < panels; ++jp)
        pack_b(b, k, n, 0, kg, jc0 + jp * kNR, bbuf.data() + jp * kg * kNR * 4, corr[jp]);
      for (int64_t ib = 0; ib < mb; ++ib)
        for (int64_t g0 = 0; g0 < kg; g0 += kKC) {
          const int64_t gl = std::min(kKC, kg - g0);
          for (int64_t jp = 0; jp < panels; ++jp) {
            const int64_t j0 = jc0 + jp * kNR, w = std::min(kNR, n - j0);
            const int8_t* bp = bbuf.data() + (jp * kg + g0) * kNR * 4;
            const int32_t* init = g0 == 0 ? corr[jp] : none;  // the compensation once, with the first block
            for (int64_t ip = ib * mc; ip < std::min(mp, (ib + 1) * mc); ++ip) {
              const int64_t i0 = ip * kMR, h = std::min(kMR, m - i0);
              const int8_t* rows[kMR];
              for (int64_t r = 0; r < kMR; ++r) rows[r] = a + (i0 + std::min(r, h - 1)) * lda + 4 * g0;
              if (h == kMR && w == kNR) {
                kernel(rows, bp, gl, c + i0 * n + j0, n, init, g0 == 0);
                continue;
              }
              if (g0 > 0)  // an edge tile through a full-size buffer (rows past m repeat row m - 1: dropped)
                for (int64_t r = 0; r < h; ++r) std::copy_n(c + (i0 + r) * n + j0, w, tile.data() + r * kNR);
              kernel(rows, bp, gl, tile.data(), kNR, init, g0 == 0);
              for (int64_t r = 0; r < h; ++r) std::copy_n(tile.data() + r * kNR, w, c + (i0 + r) * n + j0);
            }
          }
        }
    }
  }
}

}  // namespace ladder::precision::detail
