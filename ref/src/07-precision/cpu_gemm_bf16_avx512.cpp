// ref/src/07-precision/cpu_gemm_bf16_avx512.cpp -- the bf16 GEMM's AVX512_BF16 path (ladder/07-precision/
// cpu_gemm.hpp): VDPBF16PS, whose arithmetic is the contract, in the layout of the int8 GEMM's AVX512-VNNI
// path (cpu_gemm_int8_avx512.cpp; oneDNN's brgemm matmul lays out its bf16 product the same way):
//   a is not packed: the kernel broadcasts row i's k-pair p, the dword a[i][2p..2p+1] (low half the even
//     element, the instruction's first source pair as the contract orders it), straight from a (row stride
//     k; k odd: from a copy with each row padded by a +0 code, the contract's zero pad element);
//   b is packed by each thread for its own columns only, 2 rows x 32 columns at a time with one word
//     permute (VPERMT2W), into [k-pair][column] dwords (b[2p][c] low half, b[2p+1][c] high half; zero past k
//     and n);
//   the threads take column chunks of kNB columns (dynamic schedule): one parallel region, no barrier
//     between packing and the products.
// Per chunk: b's columns packed over all of k (no barrier: per thread), then per row block of at most
// kMaxPanels row panels (384 rows: c's block, 384 x 128 floats, stays in L2 across the k-blocks), per
// k-block of kKC pairs (b's micro-panel, kKC x 64 x 4 bytes = 32 KB, stays in L1 while the MR x 64 tiles of
// the row block use it): each tile's sums start from +0 (first block) or c, and take the block's pairs in
// order. Every c_ij is one chain over the pairs 0, 1, ... in order, as the contract says, whatever the
// blocking; the pad (k odd) and the zero columns past n add the portable path's zero steps.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu_gemm_util.hpp"

namespace ladder::precision::detail {
namespace bf16x512 {

constexpr int64_t kMR = 6, kNR = 64, kKC = 128, kNB = 128;  // tile rows, tile columns, k-pairs per block, chunk
constexpr int64_t kMaxPanels = 64;  // row panels per row block: c's block, 384 x kNB floats, stays in L2

// b's rows [2 p0, 2 (p0 + pl)) x columns [j0, j0 + 64) into dst [pl][64] dwords (even row low, odd row high).
__attribute__((target("avx512f,avx512bw"))) void pack_b(const uint16_t* b, int64_t k, int64_t n, int64_t p0,
                                                       int64_t pl, int64_t j0, uint32_t* dst) {
  const int64_t w = std::min(kNR, n - j0);
  const __mmask32 m0 = w >= 32 ? ~__mmask32(0) : (__mmask32(1) << w) - 1,
                  m1 = w >= 64 ? ~__mmask32(0) : w <= 32 ? 0 : (__mmask32(1) << (w - 32)) - 1;
  // word 2 c of output half h = column 16 h + c of the even row (source 0), word 2 c + 1 the odd row's (source 1)
  alignas(64) int16_t lo[32], hi[32];
  for (int c = 0; c < 16; ++c) lo[2 * c] = int16_t(c), lo[2 * c + 1] = int16_t(32 + c), hi[2 * c] = int16_t(16 + c),
                               hi[2 * c + 1] = int16_t(48 + c);
  const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
  for (int64_t p = 0; p < pl; ++p) {
    const int64_t kk = 2 * (p0 + p);
    const uint16_t* e = b + kk * n + j0;
    const uint16_t* o = b + (kk + 1) * n + j0;
    const bool odd = kk + 1 < k;
    const __m512i e0 = _mm512_maskz_loadu_epi16(m0, e), e1 = _mm512_maskz_loadu_epi16(m1, e + 32),
                  o0 = odd ? _mm512_maskz_loadu_epi16(m0, o) : _mm512_setzero_si512(),
                  o1 = odd ? _mm512_maskz_loadu_epi16(m1, o + 32) : _mm512_setzero_si512();
    uint32_t* d = dst + p * kNR;
    _mm512_storeu_si512(d, _mm512_permutex2var_epi16(e0, ilo, o0));
    _mm512_storeu_si512(d + 16, _mm512_permutex2var_epi16(e0, ihi, o0));
    _mm512_storeu_si512(d + 32, _mm512_permutex2var_epi16(e1, ilo, o1));
    _mm512_storeu_si512(d + 48, _mm512_permutex2var_epi16(e1, ihi, o1));
  }
}

inline int32_t dword(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#define LADDER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
static_assert(kMR == 6, "LADDER_ROWS names kMR rows");

// One MR x 64 tile over pl k-pairs: c (row stride ldc) = +0 (first block) or c, then the chain of pairs; row
// r's pair p is the dword at rows[r] + 2 p.
__attribute__((target("avx512f,avx512bf16"))) void kernel(const uint16_t* const* rows, const uint32_t* bp, int64_t pl,
                                                          float* c, int64_t ldc, bool first) {
#define LADDER_LD(r, q) (first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + (r) * ldc + 16 * (q)))
#define LADDER_LOAD(r) \
  __m512 c##r##0 = LADDER_LD(r, 0), c##r##1 = LADDER_LD(r, 1), c##r##2 = LADDER_LD(r, 2), c##r##3 = LADDER_LD(r, 3);
  LADDER_ROWS(LADDER_LOAD)
#undef LADDER_LOAD
#undef LADDER_LD
#define LADDER_PTR(r) const uint16_t* a##r = rows[r];
  LADDER_ROWS(LADDER_PTR)
#undef LADDER_PTR
  for (int64_t p = 0; p < pl; ++p) {
    const uint32_t* bg = bp + p * kNR;
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bg), b1 = (__m512bh)_mm512_loadu_si512(bg + 16),
                   b2 = (__m512bh)_mm512_loadu_si512(bg + 32), b3 = (__m512bh)_mm512_loadu_si512(bg + 48);
#define LADDER_STEP(r)                                                          \
  {                                                                             \
    const __m512bh x = (__m512bh)_mm512_set1_epi32(dword(a##r + 2 * p));        \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, x, b0);                                 \
    c##r##1 = _mm512_dpbf16_ps(c##r##1, x, b1);                                 \
    c##r##2 = _mm512_dpbf16_ps(c##r##2, x, b2);                                 \
    c##r##3 = _mm512_dpbf16_ps(c##r##3, x, b3);                                 \
  }
    LADDER_ROWS(LADDER_STEP)
#undef LADDER_STEP
  }
#define LADDER_STORE(r)                         \
  _mm512_storeu_ps(c + r * ldc, c##r##0);       \
  _mm512_storeu_ps(c + r * ldc + 16, c##r##1);  \
  _mm512_storeu_ps(c + r * ldc + 32, c##r##2);  \
  _mm512_storeu_ps(c + r * ldc + 48, c##r##3);
  LADDER_ROWS(LADDER_STORE)
#undef LADDER_STORE
}
#undef LADDER_ROWS

}  // namespace bf16x512

void gemm_bf16_avx512(const uint16_t* a, const uint16_t* b, float* c, int64_t m, int64_t k, int64_t n) {
  using namespace bf16x512;
  const int64_t kp = (k + 1) / 2, lda = 2 * kp, mp = (m + kMR - 1) / kMR, chunks = (n + kNB - 1) / kNB;
  const int64_t mb = (mp + kMaxPanels - 1) / kMaxPanels, mc = (mp + mb - 1) / mb;  // row blocks, even
  if (kp == 0) {  // k = 0: every chain is empty, c = +0
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  if (lda != k) {  // k odd: each row padded by a +0 code (b's pad row is +0 too: the contract's zero pair element)
    thread_local std::vector<uint16_t> padded;
    padded.assign(static_cast<size_t>(m * lda), 0);
    for (int64_t i = 0; i < m; ++i) std::copy_n(a + i * k, k, padded.data() + i * lda);
    a = padded.data();
  }
#pragma omp parallel
  {
    thread_local std::vector<uint32_t> bbuf;  // the chunk's packed columns over all of k, kept from call to call
    thread_local std::vector<float> tile;
    bbuf.resize(static_cast<size_t>(kNB / kNR * kp * kNR));
    tile.resize(static_cast<size_t>(kMR * kNR));
#pragma omp for schedule(dynamic)
    for (int64_t jc = 0; jc < chunks; ++jc) {
      const int64_t jc0 = jc * kNB, panels = (std::min(kNB, n - jc0) + kNR - 1) / kNR;
      for (int64_t jp = 0; jp < panels; ++jp) pack_b(b, k, n, 0, kp, jc0 + jp * kNR, bbuf.data() + jp * kp * kNR);
      for (int64_t ib = 0; ib < mb; ++ib)
        for (int64_t p0 = 0; p0 < kp; p0 += kKC) {
          const int64_t pl = std::min(kKC, kp - p0);
          for (int64_t jp = 0; jp < panels; ++jp) {
            const int64_t j0 = jc0 + jp * kNR, w = std::min(kNR, n - j0);
            const uint32_t* bp = bbuf.data() + (jp * kp + p0) * kNR;
            for (int64_t ip = ib * mc; ip < std::min(mp, (ib + 1) * mc); ++ip) {
              const int64_t i0 = ip * kMR, h = std::min(kMR, m - i0);
              const uint16_t* rows[kMR];
              for (int64_t r = 0; r < kMR; ++r) rows[r] = a + (i0 + std::min(r, h - 1)) * lda + 2 * p0;
              if (h == kMR && w == kNR) {
                kernel(rows, bp, pl, c + i0 * n + j0, n, p0 == 0);
                continue;
              }
              if (p0 > 0)  // an edge tile through a full-size buffer (rows past m repeat row m - 1: dropped)
                for (int64_t r = 0; r < h; ++r) std::copy_n(c + (i0 + r) * n + j0, w, tile.data() + r * kNR);
              kernel(rows, bp, pl, tile.data(), kNR, p0 == 0);
              for (int64_t r = 0; r < h; ++r) std::copy_n(tile.data() + r * kNR, w, c + (i0 + r) * n + j0);
            }
          }
        }
    }
  }
}

}  // namespace ladder::precision::detail
