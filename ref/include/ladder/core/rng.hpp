// ladder/core/rng.hpp -- a seeded generator whose draws are the same on every compiler and library.
//
// std::normal_distribution (and every std:: distribution) is implementation-defined, so goldens made
// with it would differ between libstdc++ and libc++. We therefore spell out both the generator and the
// distributions:
//   generator: xoshiro256** (Blackman & Vigna 2018), state seeded by SplitMix64(seed);
//   uniform():  the top 53 bits of a draw scaled by 2^-53 -> [0, 1), exact in double;
//   normal():   Marsaglia's polar method (uses only +, *, sqrt and log; sqrt is exactly rounded by
//               IEEE 754, log is ladder::math::log -- not glibc's, whose bits depend on the CPU's FMA);
//   uniform_int(n): Lemire's multiply-shift with rejection -> unbiased integer in [0, n).
#pragma once
#include <cmath>
#include <cstdint>

#include "ladder/core/error.hpp"
#include "ladder/core/math.hpp"

namespace ladder {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2.0 * uniform() - 1.0;
      v = 2.0 * uniform() - 1.0;
      s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * math::log(s) / s);
    spare_ = v * f;
    have_spare_ = true;
    return u * f;
  }

  uint64_t uniform_int(uint64_t n) {
    require(n > 0, "Rng::uniform_int: n = {} violates n >= 1", n);
    for (;;) {
      const __uint128_t m = static_cast<__uint128_t>(next()) * n;
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= n || low >= (-n) % n) return static_cast<uint64_t>(m >> 64);
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
  double spare_ = 0;
  bool have_spare_ = false;
};

}  // namespace ladder
