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
