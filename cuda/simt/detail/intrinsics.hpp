// simt/detail/intrinsics.hpp -- the CUDA math and bit intrinsics kernels of ladder use, on the CPU.
//
// The fast-math intrinsics (__expf, __logf, __fdividef) are the exact library functions here; on the
// GPU they are approximations a few ulp off, so CUDA results are compared with tolerances, never
// bit for bit. Standard math (expf, fmaxf, INFINITY, ...) comes from <cmath> as in device code.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned int __float_as_uint(float x) { return std::bit_cast<unsigned int>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned int x) { return std::bit_cast<float>(x); }

inline int __popc(unsigned int x) { return std::popcount(x); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned int>(x)) + 1; }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned int>(x)); }

// __dp4a (sm_61+): the four bytes of a and b as four-element vectors, byte i = bits 8i..8i+7 (byte 0 the
// lowest), sign-extended (int overload) or zero-extended (unsigned overload); d = c + sum_i a_i b_i in 32-bit
// arithmetic that wraps modulo 2^32 (PTX ISA, "dp4a": d = c; d += Va[i] * Vb[i] for i = 0..3, .s32 / .u32).
// Computed here in unsigned 32-bit arithmetic, so the wrap is defined behaviour in C++ too. The char4 /
// uchar4 overloads of CUDA are not provided (the SIMT layer has no vector types).
inline int __dp4a(int a, int b, int c) {
  uint32_t d = static_cast<uint32_t>(c);
  for (int i = 0; i < 4; ++i) {
    const int32_t ai = static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i));
    const int32_t bi = static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i));
    d += static_cast<uint32_t>(ai * bi);  // |ai bi| <= 2^14: exact in int32
  }
  return static_cast<int>(d);
}
inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  uint32_t d = c;
  for (int i = 0; i < 4; ++i) d += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);  // each <= 255^2
  return d;
}

// Read-only cache load: an ordinary load on the CPU.
template <class T>
T __ldg(const T* address) {
  return *address;
}

// CUDA's global min/max overloads for device code.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
