// ladder/02-attention/tile_simd.hpp -- the float tile products and row exp of the tiled rungs (tile_ops.hpp),
// register-blocked for AVX-512 and AVX2 + FMA, chosen at run time, with the same bits on every path.
//
// Eigen's GEMM, which these replace for float, ran at about half the FMA peak inside the tiled forward on
// a Zen 5 EPYC (perf: 60-67 % of the forward's time in gebp at d = 128 and 59, 4-9 % packing), and its
// summation order follows the CPU: the k-panel length comes from the cache sizes it reads, the register
// blocking from the SIMD width. Here the order of every output is fixed by this file:
//
//   C_ij = (((c0 + a_i0 b_0j) + a_i1 b_1j) + ... + a_i,K-1 b_K-1,j)   one fused multiply-add per step,
//                                                                    k ascending, c0 = 0 or C_ij
//
// Vectors run over j (different outputs), never over k, so a 16-wide AVX-512 register, an 8-wide AVX2 one
// and the scalar loop (std::fma) give the same bits; storing C between k blocks and loading it back is
// exact, so the k blocking (kKc) does not enter either. exp_sum's e^x is one polynomial (Cephes expf's:
// range reduction by ln 2 in two parts, a degree-6 polynomial) evaluated with the same operations on every
// path, and its sum keeps 16 lanes (lane l adds the terms j = l mod 16 in order; an AVX2 path holds them in
// two registers), combined by one fixed tree. So -march, the vector width the CPU has, and LADDER_CPU_PATH
// change the speed, not the bits (tests/02-attention/test_tile_simd.cpp runs every path on the same tiles).
//
// Paths: avx512 (AVX-512F), avx2 (AVX2 + FMA), portable (scalar std::fma: correct anywhere, slow without
// hardware FMA). The widest one the CPU has runs, capped by LADDER_CPU_PATH (amx | avx512 | avx | avx2 |
// portable, as for stage 07's GEMMs; amx caps at avx512 here, avx at avx2) or by set_path_cap() in tests. The
// vector paths are compiled with GCC's target attribute, so they exist whatever -march the build uses.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define LADDER_TILE_SIMD_X86 1
#define LADDER_T512 __attribute__((target("avx512f,avx2,fma")))
#define LADDER_T256 __attribute__((target("avx2,fma")))
#endif

namespace ladder::attention::tile::simd {

enum class Path { portable = 0, avx2 = 1, avx512 = 2 };

inline const char* path_name(Path p) { return p == Path::avx512 ? "avx512" : p == Path::avx2 ? "avx2" : "portable"; }

namespace detail {
inline std::atomic<int> cap_override{-1};  // set_path_cap's value; -1: LADDER_CPU_PATH or none

inline Path widest() {
#ifdef LADDER_TILE_SIMD_X86
  // CPUID and XGETBV directly, not __builtin_cpu_supports: that reads libgcc's static __cpu_model, which a
  // JIT (clang-repl running the notebooks) cannot link. AVX-512 needs the OS to save zmm and k registers
  // (XCR0 bits 1, 2, 5, 6, 7), AVX2 the ymm ones (bits 1, 2).
  static const Path hw = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return Path::portable;  // OSXSAVE
    const bool fma = c & (1u << 12);
    unsigned xlo = 0, xhi = 0;
    __asm__("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Path::portable;
    const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16);
    if (avx512f && avx2 && fma && (xlo & 0xE6u) == 0xE6u) return Path::avx512;
    if (avx2 && fma && (xlo & 0x6u) == 0x6u) return Path::avx2;
    return Path::portable;
  }();
  return hw;
#else
  return Path::portable;
#endif
}

// LADDER_CPU_PATH's value as a cap (2 avx512, 1 avx2, 0 portable); null or empty: no cap.
inline int parse_cap(const char* env) {
  if (!env || !*env) return 2;
  const std::string s = env;
  if (s == "amx" || s == "avx512") return 2;
  if (s == "avx" || s == "avx2") return 1;
  if (s == "portable") return 0;
  throw Error("LADDER_CPU_PATH = " + s + " is not one of amx, avx512, avx, avx2, portable");
}

inline int env_cap() {
  static const int cap = parse_cap(std::getenv("LADDER_CPU_PATH"));
  return cap;
}
}  // namespace detail

// The path the next call takes: the widest the CPU has, within the cap.
inline Path path() {
  const int o = detail::cap_override.load(std::memory_order_relaxed);
  const int cap = o >= 0 ? o : detail::env_cap();
  return static_cast<Path>(std::min(static_cast<int>(detail::widest()), cap));
}
// Benchmark hook, never set by the library: while true, the float products and exp_sum take the Eigen code
// the double ones use (the tiled rungs as they were before these kernels), so bench_02 times both in one run.
inline std::atomic<bool> eigen_products_for_bench{false};
inline bool eigen_for_bench() { return eigen_products_for_bench.load(std::memory_order_relaxed); }
// Tests: cap the path (process-wide) until reset_path_cap().
inline void set_path_cap(Path p) { detail::cap_override.store(static_cast<int>(p), std::memory_order_relaxed); }
inline void reset_path_cap() { detail::cap_override.store(-1, std::memory_order_relaxed); }

// ---- e^x, one recipe for every path ----------------------------------------------------------------------
// x is clamped to [kExpLo, kExpHi] (NaN passes through); below kExpLo the result is 0 (e^-87.3 is the
// smallest normal float), so e^-inf = 0. Cephes expf: n = round(x log2 e), r = x - n ln2 (ln2 = C1 + C2, the
// products fused), e^r = 1 + r + r^2 p(r), times 2^n built in the exponent bits.
inline constexpr float kExpLo = -87.33654f, kExpHi = 88.0f, kLog2e = 1.44269504088896341f, kC1 = 0.693359375f,
                       kC2 = -2.12194440e-4f;
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

inline float exp_scalar(float x) {
  if (std::isnan(x)) return x;
  const bool zero = x < kExpLo;
  x = kExpLo > x ? kExpLo : x;
  x = kExpHi < x ? kExpHi : x;
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kC1, x);
  r = std::fma(n, -kC2, r);
  const float z = r * r;
  float y = kP[0];
  for (int i = 1; i < 6; ++i) y = std::fma(y, r, kP[i]);
  y = std::fma(y, z, r);
  y = y + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return zero ? 0.0f : y * scale;
}

// The fixed combination of the 16 lane sums: t8_i = l_i + l_{i+8}, t4_i = t8_i + t8_{i+4}, t2_i = t4_i +
// t4_{i+2}, t2_0 + t2_1.
inline float reduce16(const float* l) {
  float t8[8], t4[4];
  for (int i = 0; i < 8; ++i) t8[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) t4[i] = t8[i] + t8[i + 4];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

// s[j] = e^{s[j] - m} for j < n; returns their sum (16 lanes, reduce16).
inline float exp_sum_portable(float* s, int64_t n, float m) {
  float lane[16] = {};
  for (int64_t j = 0; j < n; ++j) lane[j % 16] += (s[j] = exp_scalar(s[j] - m));
  return reduce16(lane);
}

// ---- C (=|+=) A B, the fixed order above ---------------------------------------------------------------
// A(r, k) = A[r * ars + k * aks] (a row-major A: ars = lda, aks = 1; a transposed one: ars = 1, aks = lda),
// B row-major [K, N] (ldb), C row-major [M, N] (ldc); accumulate: C's values start the sums, else 0.
inline void gemm_portable(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B,
                          int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[i * ars + k * aks];
      const float* b = B + k * ldb;
      for (int64_t j = 0; j < N; ++j) c[j] = std::fma(a, b[j], c[j]);
    }
  }
}

// The k block: B's panel of kKc rows x one column block (64 floats on avx512) stays in L1 while the row
// blocks of A pass (32 KiB).
inline constexpr int64_t kKc = 128;

}  // namespace ladder::attention::tile::simd
