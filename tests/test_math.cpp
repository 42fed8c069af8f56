// tests/test_math.cpp -- ladder::math (the oracle's exp, log, sin, cos, pow): accurate, and special values.
// That its bits do not depend on the CPU is shown by test_golden_determinism.no_fma, which regenerates
// every golden with glibc forced onto its non-FMA code paths (tests/golden.cmake).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ladder/core/math.hpp"
#include "ladder/core/rng.hpp"

using namespace ladder;

namespace {
// |a - ref| in units of the last place of ref (the long-double C library is the reference here).
double ulps(double a, long double ref) {
  const double r = static_cast<double>(ref);
  const double ulp = std::nextafter(std::fabs(r), std::numeric_limits<double>::infinity()) - std::fabs(r);
  return static_cast<double>(std::fabs(static_cast<long double>(a) - ref) / ulp);
}
}  // namespace

TEST_CASE("math: exp, log, sin, cos within their stated ulp of the long-double C library") {
  Rng rng(7);
  double e = 0, l = 0, s = 0, c = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = -700 + 1400 * rng.uniform();
    e = std::max(e, ulps(math::exp(x), expl(static_cast<long double>(x))));
    const double y = std::ldexp(0.5 + rng.uniform(), static_cast<int>(rng.uniform_int(2000)) - 1000);
    l = std::max(l, ulps(math::log(y), logl(static_cast<long double>(y))));
    const double z = -5000 + 10000 * rng.uniform();
    s = std::max(s, ulps(math::sin(z), sinl(static_cast<long double>(z))));
    c = std::max(c, ulps(math::cos(z), cosl(static_cast<long double>(z))));
  }
  MESSAGE("max ulp: exp " << e << ", log " << l << ", sin " << s << ", cos " << c);
  CHECK(e <= 1.5);
  CHECK(l <= 2.5);
  CHECK(s <= 2.5);
  CHECK(c <= 2.5);
}

TEST_CASE("math: pow as RoPE and Zipf use it, relative error grows with |y log b| only") {
  for (int i = 0; i < 64; ++i) {
    const double y = -2.0 * i / 128.0, ref = static_cast<double>(powl(10000.0L, static_cast<long double>(y)));
    CHECK(std::fabs(math::pow(10000.0, y) - ref) <= 16 * std::numeric_limits<double>::epsilon() * ref);
  }
  CHECK_THROWS_WITH(math::pow(-1.0, 0.5), doctest::Contains("base -1 violates base > 0"));
}

TEST_CASE("math: special values as the C library defines them") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(math::exp(0.0) == 1.0);
  CHECK(math::exp(-inf) == 0.0);
  CHECK(math::exp(inf) == inf);
  CHECK(math::exp(710.0) == inf);
  CHECK(math::exp(-746.0) == 0.0);
  CHECK(std::isnan(math::exp(std::nan(""))));
  CHECK(math::log(1.0) == 0.0);
  CHECK(math::log(0.0) == -inf);
  CHECK(math::log(inf) == inf);
  CHECK(std::isnan(math::log(-1.0)));
  CHECK(math::sin(0.0) == 0.0);
  CHECK(math::cos(0.0) == 1.0);
  CHECK(std::isnan(math::sin(inf)));
  CHECK_THROWS_WITH(math::cos(1e7), doctest::Contains("violates |x| < 1e6"));
}
