// ladder/core/math.hpp -- exp, log, sin, cos, pow for the fp64 oracle, the same bytes on every machine.
//
// glibc picks its exp/log/sin/cos/pow at load time by the CPU's features (an FMA variant where the CPU
// has FMA, an SSE2 one where it does not), and the two differ in the last bit for some inputs: run
// any fp64 golden generator with GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4 and the bytes move.
// So the oracle (T = double) takes its elementary functions from here: textbook algorithms built only
// from IEEE 754 +, -, *, / (each correctly rounded, so the same bits on every CPU), an exact ldexp/frexp,
// and constants written as decimal literals; with -ffp-contract=off (ref/CMakeLists.txt) the compiler
// cannot fuse them differently on different targets. Accuracy: within 2 ulp of the true value in the
// ranges tested by tests/test_math.cpp -- far below what an fp64 oracle for fp32 kernels needs; what
// matters here is that the bits are fixed.
// The float overloads forward to the C library (float rungs are judged by the tolerance rule, not bytes),
// except inside a FixedOrder scope (core/fixed_order.hpp: the rule's float32 baseline), where they are
// the float64 functions here rounded once to float32, so the baseline is the same bits on every CPU.
#pragma once
#include <cmath>
#include <limits>

#include "ladder/core/error.hpp"
#include "ladder/core/fixed_order.hpp"

namespace ladder::math {

namespace detail {
// ln 2 split so that k * kLn2Hi is exact for |k| < 2^11 (its low 32 bits are zero); kLn2Lo = ln 2 - kLn2Hi.
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;
inline constexpr double kInvLn2 = 1.44269504088896338700e+00;
// pi/2 = kPio2_1 + kPio2_2 + kPio2_3 (+ 8.5e-32): the first two have 33 significant bits, so k * part is
// exact for |k| < 2^20; the third is the rest to full precision (fdlibm's pio2_1, pio2_2, pio2_2t).
inline constexpr double kPio2_1 = 1.57079632673412561417e+00;
inline constexpr double kPio2_2 = 6.07710050630396597660e-11;
inline constexpr double kPio2_3 = 2.02226624879595063154e-21;
inline constexpr double kTwoOverPi = 6.36619772367581382433e-01;

// Round to the nearest integer, ties away from zero, with + and - only (no rounding-mode dependence).
inline double round_nearest(double x) {
  double t = std::floor(x);  // floor is exact
  if (x - t >= 0.5) t += 1.0;
  return t;
}

// sum_{n=0}^{N} r^n / n! by Horner's rule, N = 18 (|r| <= ln2/2: the next term is below 2^-80).
inline double exp_series(double r) {
  double p = 1.0 / 6402373705728000.0;  // 1/18!
  double f = 6402373705728000.0;
  for (int n = 17; n >= 0; --n) {
    f /= static_cast<double>(n + 1);  // exact: n! for n <= 18 fits in 53 bits
    p = p * r + 1.0 / f;
  }
  return p;
}
}  // namespace detail

// e^x: x = k ln2 + r with |r| <= ln2 / 2 (Cody and Waite's reduction), e^x = 2^k e^r.
inline double exp(double x) {
  if (std::isnan(x)) return x;
  if (x > 709.782712893384) return std::numeric_limits<double>::infinity();
  if (x < -745.1332191019412) return 0.0;  // also -inf
  const double k = detail::round_nearest(x * detail::kInvLn2);
  const double r = (x - k * detail::kLn2Hi) - k * detail::kLn2Lo;
  return std::ldexp(detail::exp_series(r), static_cast<int>(k));
}

// log x: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172,
// atanh(s) = s (1 + s^2/3 + s^4/5 + ...) summed to s^24/25 (the next term is below 2^-60 relative).
inline double log(double x) {
  if (std::isnan(x) || x < 0) return std::numeric_limits<double>::quiet_NaN();
  if (x == 0) return -std::numeric_limits<double>::infinity();
  if (std::isinf(x)) return x;
  int e = 0;
  double m = std::frexp(x, &e);  // exact; m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;  // exact
    --e;
  }
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  double p = 1.0 / 25.0;
  for (int n = 23; n >= 1; n -= 2) p = p * z + 1.0 / static_cast<double>(n);
  const double ed = static_cast<double>(e);
  return ed * detail::kLn2Hi + (ed * detail::kLn2Lo + 2.0 * s * p);
}

namespace detail {
// sin r and cos r for |r| <= pi/4 by their Taylor series to r^23 / r^22 (next terms below 2^-60).
inline double sin_series(double r) {
  const double z = r * r;
  double p = 0.0, f = 25852016738884976640000.0;  // 23!
  for (int n = 23; n >= 3; n -= 2) {
    p = (p + ((n / 2) % 2 ? -1.0 : 1.0) / f) * z;
    f /= static_cast<double>(n) * static_cast<double>(n - 1);
  }
  return r + r * p;
}
inline double cos_series(double r) {
  const double z = r * r;
  double p = 0.0, f = 1124000727777607680000.0;  // 22!
  for (int n = 22; n >= 2; n -= 2) {
    p = (p + ((n / 2) % 2 ? -1.0 : 1.0) / f) * z;
    f /= static_cast<double>(n) * static_cast<double>(n - 1);
  }
  return 1.0 + p;
}
// x = k pi/2 + r, |r| <= pi/4 (three-part Cody-Waite reduction; exact for |k| < 2^20).
inline double reduce_pio2(double x, long& quadrant) {
  require(std::fabs(x) < 1e6, "ladder::math sin/cos: |x| = {} violates |x| < 1e6 (the oracle's reduction range)",
          std::fabs(x));
  const double k = round_nearest(x * kTwoOverPi);
  quadrant = static_cast<long>(k);
  return ((x - k * kPio2_1) - k * kPio2_2) - k * kPio2_3;
}
}  // namespace detail

inline double sin(double x) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  long q = 0;
  const double r = detail::reduce_pio2(x, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return detail::sin_series(r);
    case 1: return detail::cos_series(r);
    case 2: return -detail::sin_series(r);
    default: return -detail::cos_series(r);
  }
}

inline double cos(double x) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  long q = 0;
  const double r = detail::reduce_pio2(x, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return detail::cos_series(r);
    case 1: return -detail::sin_series(r);
    case 2: return -detail::cos_series(r);
    default: return detail::sin_series(r);
  }
}

// b^y for b > 0 as e^{y log b} (relative error grows with |y log b|: fine for RoPE frequencies and Zipf
// weights, the oracle's only uses).
inline double pow(double b, double y) {
  require(b > 0, "ladder::math::pow: base {} violates base > 0", b);
  return math::exp(y * math::log(b));
}

// The rungs at kernel precision use the C library.
inline float exp(float x) { return fixed_order() ? static_cast<float>(exp(static_cast<double>(x))) : std::exp(x); }
inline float log(float x) { return fixed_order() ? static_cast<float>(log(static_cast<double>(x))) : std::log(x); }
inline float sin(float x) { return fixed_order() ? static_cast<float>(sin(static_cast<double>(x))) : std::sin(x); }
inline float cos(float x) { return fixed_order() ? static_cast<float>(cos(static_cast<double>(x))) : std::cos(x); }
inline float pow(float b, float y) {
  return fixed_order() ? static_cast<float>(pow(static_cast<double>(b), static_cast<double>(y))) : std::pow(b, y);
}

}  // namespace ladder::math
