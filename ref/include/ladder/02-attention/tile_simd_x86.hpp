// ladder/02-attention/tile_simd_x86.hpp -- the AVX-512 and AVX2 + FMA kernels of tile_simd.hpp (included by
// it on x86 with GCC or Clang; not a header to include alone). Same order and same bits as its portable loops.
//
// Register blocking: an MR x NV-vector block of C lives in registers for a kKc-long stretch of k; per k step
// NV loads of B's row, MR broadcasts of A, MR NV fused multiply-adds. AVX-512 (32 registers): 6 x 4 vectors
// = 6 x 64 floats, 24 accumulators; AVX2 (16): 6 x 2 vectors = 6 x 16 floats, 12 accumulators. A ragged last
// column vector is loaded and stored under a mask; a ragged last row block takes a smaller MR.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ladder/02-attention/tile_simd.hpp"

// GCC 12 flags the `__m512i __Y = __Y;` of _mm512_undefined_epi32 inside the AVX-512 intrinsics as maybe
// uninitialised when the unit itself is not compiled for AVX-512 (a target attribute, -march below v4).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ladder::attention::tile::simd::x86 {

// ---- AVX-512 -----------------------------------------------------------------------------------------
template <int MR, int NV>
LADDER_T512 inline void mk512(int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
                              float* C, int64_t ldc, bool load, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = !load ? _mm512_setzero_ps()
                  : v + 1 < NV ? _mm512_loadu_ps(C + r * ldc + 16 * v)
                               : _mm512_maskz_loadu_ps(last, C + r * ldc + 16 * v);
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const float* a = A + k * aks;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = v + 1 < NV ? _mm512_loadu_ps(b + 16 * v) : _mm512_maskz_loadu_ps(last, b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v + 1 < NV)
        _mm512_storeu_ps(C + r * ldc + 16 * v, acc[r][v]);
      else
        _mm512_mask_storeu_ps(C + r * ldc + 16 * v, last, acc[r][v]);
    }
}

template <int MR>
LADDER_T512 inline void cols512(int nv, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
                                int64_t ldb, float* C, int64_t ldc, bool load, __mmask16 last) {
  switch (nv) {
    case 4: return mk512<MR, 4>(K, A, ars, aks, B, ldb, C, ldc, load, last);
    case 3: return mk512<MR, 3>(K, A, ars, aks, B, ldb, C, ldc, load, last);
    case 2: return mk512<MR, 2>(K, A, ars, aks, B, ldb, C, ldc, load, last);
    default: return mk512<MR, 1>(K, A, ars, aks, B, ldb, C, ldc, load, last);
  }
}

LADDER_T512 inline void gemm512(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks,
                                const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  constexpr int64_t MR = 6, NC = 64;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = std::min(kKc, K - k0);
    const bool load = accumulate || k0 > 0;
    for (int64_t c0 = 0; c0 < N; c0 += NC) {
      const int64_t nc = std::min(NC, N - c0);
      const int nv = static_cast<int>((nc + 15) / 16);
      const __mmask16 last = nc % 16 ? static_cast<__mmask16>((1u << (nc % 16)) - 1) : static_cast<__mmask16>(0xFFFF);
      for (int64_t r0 = 0; r0 < M; r0 += MR) {
        const float* a = A + r0 * ars + k0 * aks;
        const float* b = B + k0 * ldb + c0;
        float* c = C + r0 * ldc + c0;
        switch (std::min(MR, M - r0)) {
          case 6: cols512<6>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 5: cols512<5>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 4: cols512<4>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 3: cols512<3>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 2: cols512<2>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          default: cols512<1>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
        }
      }
    }
  }
}

LADDER_T512 inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(kExpLo);
  const __mmask16 zero = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_max_ps(lo, x);  // a NaN x (the second operand) passes, as in exp_scalar
  x = _mm512_min_ps(_mm512_set1_ps(kExpHi), x);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kC1), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kC2), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP[i]));
  y = _mm512_fmadd_ps(y, z, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~zero), _mm512_mul_ps(y, _mm512_castsi512_ps(e)));
}

LADDER_T512 inline float exp_sum512(float* s, int64_t n, float m) {
  const __m512 mm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), mm));
    _mm512_storeu_ps(s + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + j), mm));
    _mm512_mask_storeu_ps(s + j, mask, e);
    acc = _mm512_mask_add_ps(acc, mask, acc, e);
  }
  alignas(64) float lane[16];
  _mm512_store_ps(lane, acc);
  return reduce16(lane);
}

// ---- AVX2 + FMA --------------------------------------------------------------------------------------
LADDER_T256 inline __m256i mask256(int64_t n) {  // lanes < n (n in 0..8)
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <int MR, int NV>
LADDER_T256 inline void mk256(int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
                              float* C, int64_t ldc, bool load, __m256i last) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = !load ? _mm256_setzero_ps()
                  : v + 1 < NV ? _mm256_loadu_ps(C + r * ldc + 8 * v)
                               : _mm256_maskload_ps(C + r * ldc + 8 * v, last);
  for (int64_t k = 0; k < K; ++k) {
    const float* b = B + k * ldb;
    const float* a = A + k * aks;
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = v + 1 < NV ? _mm256_loadu_ps(b + 8 * v) : _mm256_maskload_ps(b + 8 * v, last);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * ars);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (v + 1 < NV)
        _mm256_storeu_ps(C + r * ldc + 8 * v, acc[r][v]);
      else
        _mm256_maskstore_ps(C + r * ldc + 8 * v, last, acc[r][v]);
    }
}

template <int MR>
LADDER_T256 inline void cols256(int nv, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
                                int64_t ldb, float* C, int64_t ldc, bool load, __m256i last) {
  if (nv == 2) return mk256<MR, 2>(K, A, ars, aks, B, ldb, C, ldc, load, last);
  return mk256<MR, 1>(K, A, ars, aks, B, ldb, C, ldc, load, last);
}

LADDER_T256 inline void gemm256(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks,
                                const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  constexpr int64_t MR = 6, NC = 16;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = std::min(kKc, K - k0);
    const bool load = accumulate || k0 > 0;
    for (int64_t c0 = 0; c0 < N; c0 += NC) {
      const int64_t nc = std::min(NC, N - c0);
      const int nv = static_cast<int>((nc + 7) / 8);
      const __m256i last = mask256(nc % 8 ? nc % 8 : 8);
      for (int64_t r0 = 0; r0 < M; r0 += MR) {
        const float* a = A + r0 * ars + k0 * aks;
        const float* b = B + k0 * ldb + c0;
        float* c = C + r0 * ldc + c0;
        switch (std::min(MR, M - r0)) {
          case 6: cols256<6>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 5: cols256<5>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 4: cols256<4>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 3: cols256<3>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          case 2: cols256<2>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
          default: cols256<1>(nv, kc, a, ars, aks, b, ldb, c, ldc, load, last); break;
        }
      }
    }
  }
}

LADDER_T256 inline __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo);
  const __m256 zero = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(lo, x);  // a NaN x (the second operand) passes, as in exp_scalar
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kC1), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kC2), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP[i]));
  y = _mm256_fmadd_ps(y, z, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(zero, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

// Lanes 0-7 of the 16 in a0, 8-15 in a1 (exp_sum512's lanes, summed in the same order).
LADDER_T256 inline float exp_sum256(float* s, int64_t n, float m) {
  const __m256 mm = _mm256_set1_ps(m);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 e0 = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), mm));
    const __m256 e1 = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j + 8), mm));
    _mm256_storeu_ps(s + j, e0);
    _mm256_storeu_ps(s + j + 8, e1);
    a0 = _mm256_add_ps(a0, e0);
    a1 = _mm256_add_ps(a1, e1);
  }
  if (j < n) {  // 1..15 left: lanes past n add +0 (the sums are >= +0, so that changes no bit)
    const int64_t rest = n - j;
    const __m256i k0 = mask256(std::min<int64_t>(rest, 8)), k1 = mask256(std::max<int64_t>(rest - 8, 0));
    const __m256 e0 = _mm256_and_ps(_mm256_castsi256_ps(k0), exp256(_mm256_sub_ps(_mm256_maskload_ps(s + j, k0), mm)));
    const __m256 e1 =
        _mm256_and_ps(_mm256_castsi256_ps(k1), exp256(_mm256_sub_ps(_mm256_maskload_ps(s + j + 8, k1), mm)));
    _mm256_maskstore_ps(s + j, k0, e0);
    _mm256_maskstore_ps(s + j + 8, k1, e1);
    a0 = _mm256_add_ps(a0, e0);
    a1 = _mm256_add_ps(a1, e1);
  }
  alignas(32) float lane[16];
  _mm256_store_ps(lane, a0);
  _mm256_store_ps(lane + 8, a1);
  return reduce16(lane);
}

// Bt [K, N] = B^T (B [N, K]) in 8 x 8 blocks (unpack, shuffle, permute2f128), the edges element by element.
LADDER_T256 inline void transpose8(int64_t N, int64_t K, const float* B, int64_t ldb, float* Bt, int64_t ldt) {
  const int64_t N8 = N / 8 * 8, K8 = K / 8 * 8;
  for (int64_t j = 0; j < N8; j += 8) {
    for (int64_t k = 0; k < K8; k += 8) {
      __m256 r[8], t[8], u[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(B + (j + i) * ldb + k);
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(Bt + (k + i) * ldt + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(Bt + (k + i + 4) * ldt + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
      }
    }
    for (int64_t k = K8; k < K; ++k)
      for (int64_t i = 0; i < 8; ++i) Bt[k * ldt + j + i] = B[(j + i) * ldb + k];
  }
  for (int64_t j = N8; j < N; ++j)
    for (int64_t k = 0; k < K; ++k) Bt[k * ldt + j] = B[j * ldb + k];
}

}  // namespace ladder::attention::tile::simd::x86

#pragma GCC diagnostic pop
