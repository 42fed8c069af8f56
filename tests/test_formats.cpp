// tests/test_formats.cpp -- ladder/core/formats.hpp, exhaustively: every 8- and 16-bit pattern decodes to
// the value an independent formula gives and re-encodes to itself; every rounding boundary of every
// format (the midpoint of each pair of adjacent values and one float32 ulp either side) rounds as each
// Round says, ties to even; overflow and saturation; subnormals. Each check is a function counting
// failures, run on the real encoder (0 failures) and on a planted wrong one (> 0 failures): rounding half
// away from zero where nearest-even is asked, E4M3 without saturation, a decoder with the wrong bias.
// The CPU's own conversion instructions are in test_formats_hw.cpp.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ladder/core/formats.hpp"

using namespace ladder::formats;

namespace {

constexpr Round kRounds[] = {Round::nearest_even, Round::nearest_away, Round::toward_zero, Round::up};
const float kInf = std::numeric_limits<float>::infinity();

uint32_t fbits(float x) { return std::bit_cast<uint32_t>(x); }
float up1(float x) { return std::nextafter(x, kInf); }
float dn1(float x) { return std::nextafter(x, -kInf); }

// A format under test: its codes as uint32_t, the sign bit, the largest finite magnitude code.
struct Fmt {
  std::string name;
  int nbits;  // code width (tf32: 19)
  uint32_t max_code;
  std::function<float(uint32_t)> decode;
  std::function<uint32_t(float, Round)> encode;
  uint32_t sign() const { return 1u << (nbits - 1); }
};

std::vector<Fmt> formats() {
  return {
      {"bf16", 16, 0x7F7F, [](uint32_t c) { return from_bf16(uint16_t(c)); },
       [](float x, Round r) { return uint32_t(to_bf16(x, r)); }},
      {"fp16", 16, 0x7BFF, [](uint32_t c) { return from_fp16(uint16_t(c)); },
       [](float x, Round r) { return uint32_t(to_fp16(x, r)); }},
      {"tf32", 19, 0x3FBFF, [](uint32_t c) { return std::bit_cast<float>(c << 13); },
       [](float x, Round r) { return fbits(round_tf32(x, r)) >> 13; }},
      {"e4m3", 8, 0x7E, [](uint32_t c) { return from_e4m3(uint8_t(c)); },
       [](float x, Round r) { return uint32_t(to_e4m3(x, r)); }},
      {"e5m2", 8, 0x7B, [](uint32_t c) { return from_e5m2(uint8_t(c)); },
       [](float x, Round r) { return uint32_t(to_e5m2(x, r)); }},
  };
}

// The independent decoder: (-1)^s 2^(e - bias) (1 + m / 2^mbits), or 2^(1 - bias) m / 2^mbits for e = 0,
// in double with ldexp; NaN / inf by the encodings of IEEE 754 and OFP8 Table 1.
double reference_value(const FloatSpec& s, uint32_t c) {
  const int nb = s.ebits + s.mbits;
  const double sg = (c >> nb) & 1 ? -1.0 : 1.0;
  const uint32_t e = (c >> s.mbits) & ((1u << s.ebits) - 1), m = c & ((1u << s.mbits) - 1);
  if (s.ieee && e == (1u << s.ebits) - 1) return m ? std::nan("") : sg * INFINITY;
  if (!s.ieee && (c & ((1u << nb) - 1)) == s.nan_code) return std::nan("");
  if (e == 0) return sg * std::ldexp(double(m), 1 - s.bias - s.mbits);
  return sg * std::ldexp(1.0 + std::ldexp(double(m), -s.mbits), int(e) - s.bias);
}

// Every pattern: decode equals the reference value (NaN where it is NaN, same sign), and re-encodes to
// itself under every rounding (exact values do not round); NaNs re-encode quieted (IEEE-like: quiet bit
// set, payload kept; E4M3: S.1111.111 itself).
int roundtrip_failures(const FloatSpec& s, const std::function<float(uint32_t)>& dec,
                       const std::function<uint32_t(float, Round)>& enc) {
  int bad = 0;
  const int nb = s.ebits + s.mbits;
  for (uint32_t c = 0; c < (2u << nb); ++c) {
    const float v = dec(c);
    const double ref = reference_value(s, c);
    const bool sign_ok = std::signbit(v) == bool((c >> nb) & 1);
    if (std::isnan(ref)) {
      const uint32_t quiet = s.ieee ? c | (1u << (s.mbits - 1)) : c;
      bad += !std::isnan(v) || !sign_ok || enc(v, Round::nearest_even) != quiet;
      continue;
    }
    bad += double(v) != ref || !sign_ok;
    for (Round r : kRounds) bad += enc(v, r) != c;
  }
  return bad;
}

TEST_CASE("formats: every 8- and 16-bit pattern decodes to its value and re-encodes to itself") {
  CHECK(roundtrip_failures(kE4m3, [](uint32_t c) { return from_e4m3(uint8_t(c)); },
                           [](float x, Round r) { return uint32_t(to_e4m3(x, r)); }) == 0);
  // E5M2's infinities re-encode to themselves only without saturation (saturation maps inf to max).
  CHECK(roundtrip_failures(kE5m2, [](uint32_t c) { return from_e5m2(uint8_t(c)); },
                           [](float x, Round r) { return uint32_t(to_e5m2(x, r, Overflow::to_inf_or_nan)); }) == 0);
  CHECK(roundtrip_failures(kFp16, [](uint32_t c) { return from_fp16(uint16_t(c)); },
                           [](float x, Round r) { return uint32_t(to_fp16(x, r)); }) == 0);
  CHECK(roundtrip_failures(kBf16, [](uint32_t c) { return from_bf16(uint16_t(c)); },
                           [](float x, Round r) { return uint32_t(to_bf16(x, r)); }) == 0);
  // Planted: a decoder with E4M3's bias off by one fails against the reference values.
  CHECK(roundtrip_failures(kE4m3, [](uint32_t c) { return 2.0f * from_e4m3(uint8_t(c)); },
                           [](float x, Round r) { return uint32_t(to_e4m3(x / 2, r)); }) > 0);
  // The NaN rule, spelled out: E4M3's two NaNs; an fp16 signalling NaN comes back quieted, payload kept.
  CHECK(to_e4m3(from_e4m3(0x7F)) == 0x7F);
  CHECK(to_e4m3(from_e4m3(0xFF)) == 0xFF);
  CHECK(to_fp16(from_fp16(0x7C01)) == 0x7E01);
  CHECK(to_fp16(from_fp16(0xFE5A)) == 0xFE5A);
  CHECK(to_bf16(from_bf16(0xFF81)) == 0xFFC1);
  CHECK(to_e5m2(from_e5m2(0x7D)) == 0x7F);
  CHECK(fbits(from_fp16(0x7C01)) == 0x7F802000u);  // decoding keeps the signalling NaN's bits
  // E4M3 values of OFP8 Table 1: max 448 = S.1111.110, min normal 2^-6, min subnormal 2^-9.
  CHECK(from_e4m3(0x7E) == 448.0f);
  CHECK(from_e4m3(0x08) == 0.015625f);
  CHECK(from_e4m3(0x01) == std::ldexp(1.0f, -9));
  CHECK(from_e5m2(0x7B) == 57344.0f);
  CHECK(std::isinf(from_e5m2(0x7C)));
  CHECK(from_e5m2(0x01) == std::ldexp(1.0f, -16));
}

TEST_CASE("formats: UE8M0, every pattern, and its rounding") {
  int bad = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const float v = from_ue8m0(uint8_t(b));
    if (b == 0xFF) {
      bad += !std::isnan(v);
      for (Round r : kRounds) bad += to_ue8m0(v, r) != 0xFF;
      continue;
    }
    bad += double(v) != std::ldexp(1.0, int(b) - 127);
    for (Round r : kRounds) bad += to_ue8m0(v, r) != b;
    if (b == 254) continue;
    // Between 2^k and 2^(k+1): up -> k+1 from one ulp above 2^k; toward_zero -> k up to one ulp below
    // 2^(k+1); nearest: below 1.5 * 2^k -> k, the tie and above -> k+1.
    const float mid = 1.5f * v, next = 2.0f * v;
    bad += to_ue8m0(up1(v), Round::up) != b + 1;
    bad += to_ue8m0(dn1(next), Round::toward_zero) != b;
    bad += to_ue8m0(dn1(mid), Round::nearest_even) != b;
    bad += to_ue8m0(mid, Round::nearest_even) != b + 1;
    bad += to_ue8m0(dn1(next), Round::up) != b + 1;
  }
  CHECK(bad == 0);
  CHECK(to_ue8m0(0.0f, Round::up) == 0xFF);   // no zero scale
  CHECK(to_ue8m0(-1.0f, Round::up) == 0xFF);  // no negative scale
  CHECK(to_ue8m0(1e-40f, Round::up) == 0x00);
  CHECK(to_ue8m0(3e38f, Round::up) == 0xFE);  // 2^128 does not exist: saturates
  CHECK(to_ue8m0(3e38f, Round::up, Overflow::to_inf_or_nan) == 0xFF);
  CHECK(to_ue8m0(kInf, Round::up) == 0xFE);
}

// Every rounding boundary of f: for adjacent positive values a < b (codes k, k+1) with midpoint m (exact
// in float32): nearest_even takes m to the even code, nearest_away to k+1, toward_zero to k, up to k+1;
// one float32 ulp below m goes to k and one above to k+1 under both nearest roundings; one ulp above a
// goes up to k+1 and one ulp below b toward zero to k. Mirrored for negative values (up is then
// toward zero in magnitude). enc is the encoder under test (f.encode, or a planted one).
int boundary_failures(const Fmt& f, const std::function<uint32_t(float, Round)>& enc) {
  int bad = 0;
  for (uint32_t k = 0; k < f.max_code; ++k) {
    const float a = f.decode(k), b = f.decode(k + 1);
    const double md = (double(a) + double(b)) / 2;
    const float m = float(md);
    if (double(m) != md) return -1;  // the test's own premise
    const uint32_t even = (k & 1) ? k + 1 : k;
    for (uint32_t s : {0u, f.sign()}) {
      const float g = s ? -1.0f : 1.0f;
      const uint32_t away = (s ? k : k + 1) | s;  // the code "up" gives for the magnitude above a
      bad += enc(g * m, Round::nearest_even) != (even | s);
      bad += enc(g * m, Round::nearest_away) != ((k + 1) | s);
      bad += enc(g * m, Round::toward_zero) != (k | s);
      bad += enc(g * m, Round::up) != away;
      for (Round r : {Round::nearest_even, Round::nearest_away}) {
        bad += enc(g * dn1(m), r) != (k | s);
        bad += enc(g * up1(m), r) != ((k + 1) | s);
      }
      bad += enc(g * up1(a), Round::up) != away;
      bad += enc(g * dn1(b), Round::toward_zero) != (k | s);
    }
  }
  return bad;
}

TEST_CASE("formats: every rounding boundary rounds as its Round says, ties to even") {
  for (const Fmt& f : formats()) {
    CAPTURE(f.name);
    CHECK(boundary_failures(f, f.encode) == 0);
    // Planted: half away from zero where nearest-even was asked.
    const auto away = [&](float x, Round r) {
      return f.encode(x, r == Round::nearest_even ? Round::nearest_away : r);
    };
    CHECK(boundary_failures(f, away) > 0);
  }
}

TEST_CASE("formats: int8 and int4 round to nearest even and saturate; int4 nibble order") {
  int bad = 0, planted = 0;
  for (int k = -128; k < 127; ++k) {
    const float m = float(k) + 0.5f;
    const int even = (k & 1) ? k + 1 : k;
    bad += to_int8(m) != even || to_int8(dn1(m)) != k || to_int8(up1(m)) != k + 1;
    bad += to_int8(m, Round::toward_zero) != (k < 0 ? k + 1 : k) || to_int8(up1(float(k)), Round::up) != k + 1;
    bad += to_int8(float(k)) != k;
    planted += to_int8(m, Round::nearest_away) != even;
    if (k >= -8 && k < 7) bad += to_int4(m) != even || to_int4(float(k)) != k;
  }
  CHECK(bad == 0);
  CHECK(planted > 0);
  CHECK(to_int8(127.5f) == 127);
  CHECK(to_int8(1e9f) == 127);
  CHECK(to_int8(-128.5f) == -128);
  CHECK(to_int8(-kInf) == -128);
  CHECK(to_int8(std::nanf("")) == 0);
  CHECK(to_int4(7.5f) == 7);
  CHECK(to_int4(-100.0f) == -8);
  CHECK(to_int4(-8.5f) == -8);
  int nib = 0;
  for (int lo = -8; lo < 8; ++lo)
    for (int hi = -8; hi < 8; ++hi) {
      const uint8_t b = pack_int4(int8_t(lo), int8_t(hi));
      nib += unpack_int4_lo(b) != lo || unpack_int4_hi(b) != hi || (b & 0xF) != (lo & 0xF);
    }
  CHECK(nib == 0);
  CHECK(pack_int4(1, -1) == 0xF1);  // element 2i in the low nibble
}

// Overflow: the largest finite value, the first value that rounds above it (the midpoint to the next
// binade's value under nearest_even, exactly as IEEE 754 §7.4 with unbounded exponent), infinity.
int saturation_failures(const std::function<uint8_t(float, Round, Overflow)>& e4m3) {
  int bad = 0;
  for (uint8_t s : {uint8_t(0), uint8_t(0x80)}) {
    const float g = s ? -1.0f : 1.0f;
    bad += e4m3(g * 448.0f, Round::nearest_even, Overflow::saturate) != (0x7E | s);
    bad += e4m3(g * 464.0f, Round::nearest_even, Overflow::saturate) != (0x7E | s);  // tie to even 448
    bad += e4m3(g * up1(464.0f), Round::nearest_even, Overflow::saturate) != (0x7E | s);
    bad += e4m3(g * 1e30f, Round::nearest_even, Overflow::saturate) != (0x7E | s);
    bad += e4m3(g * kInf, Round::nearest_even, Overflow::saturate) != (0x7E | s);
    bad += e4m3(g * 464.0f, Round::nearest_even, Overflow::to_inf_or_nan) != (0x7E | s);
    bad += e4m3(g * up1(464.0f), Round::nearest_even, Overflow::to_inf_or_nan) != (0x7F | s);
    bad += e4m3(g * kInf, Round::nearest_even, Overflow::to_inf_or_nan) != (0x7F | s);
    bad += e4m3(g * 1e30f, Round::toward_zero, Overflow::to_inf_or_nan) != (0x7E | s);
  }
  return bad;
}

TEST_CASE("formats: overflow and saturation") {
  CHECK(saturation_failures([](float x, Round r, Overflow o) { return to_e4m3(x, r, o); }) == 0);
  // Planted: "no saturation" -- overflow to NaN where saturation was asked.
  CHECK(saturation_failures([](float x, Round r, Overflow) { return to_e4m3(x, r, Overflow::to_inf_or_nan); }) > 0);
  // E5M2: max 57344, the overflow midpoint 61440 ties to the even code, which is infinity.
  CHECK(to_e5m2(61440.0f) == 0x7B);
  CHECK(to_e5m2(dn1(61440.0f), Round::nearest_even, Overflow::to_inf_or_nan) == 0x7B);
  CHECK(to_e5m2(61440.0f, Round::nearest_even, Overflow::to_inf_or_nan) == 0x7C);
  CHECK(to_e5m2(-kInf, Round::nearest_even, Overflow::to_inf_or_nan) == 0xFC);
  CHECK(to_e5m2(-kInf) == 0xFB);
  CHECK(to_e5m2(1e30f, Round::up, Overflow::to_inf_or_nan) == 0x7C);
  CHECK(to_e5m2(-1e30f, Round::up, Overflow::to_inf_or_nan) == 0xFB);
  // fp16 and bf16 follow IEEE: overflow is inf under nearest, max under toward_zero; inf stays inf.
  CHECK(to_fp16(65504.0f) == 0x7BFF);
  CHECK(to_fp16(dn1(65520.0f)) == 0x7BFF);
  CHECK(to_fp16(65520.0f) == 0x7C00);
  CHECK(to_fp16(-1e10f, Round::toward_zero) == 0xFBFF);
  CHECK(to_fp16(kInf, Round::toward_zero) == 0x7C00);
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(to_bf16(std::numeric_limits<float>::max(), Round::toward_zero) == 0x7F7F);
  CHECK(std::isinf(round_tf32(std::numeric_limits<float>::max())));
  CHECK(fbits(round_tf32(std::numeric_limits<float>::max(), Round::toward_zero)) == 0x7F7FE000u);
}

TEST_CASE("formats: subnormals") {
  const float fp16_min = std::ldexp(1.0f, -24);
  CHECK(to_fp16(fp16_min) == 0x0001);
  CHECK(to_fp16(fp16_min / 2) == 0x0000);       // the tie between 0 and the smallest: to even 0
  CHECK(to_fp16(up1(fp16_min / 2)) == 0x0001);
  CHECK(to_fp16(-1.5f * fp16_min) == 0x8002);    // the tie between 1 and 2: to even 2
  CHECK(to_fp16(1e-45f) == 0x0000);             // a float32 subnormal
  CHECK(to_fp16(1e-45f, Round::up) == 0x0001);
  CHECK(to_fp16(-1e-45f, Round::up) == 0x8000);
  CHECK(from_fp16(0x03FF) == std::ldexp(1023.0f, -24));
  CHECK(from_fp16(0x0400) == std::ldexp(1.0f, -14));
  CHECK(to_e4m3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(to_e4m3(std::ldexp(3.0f, -10)) == 0x02);
  CHECK(from_e4m3(0x07) == std::ldexp(7.0f, -9));
  CHECK(to_e5m2(std::ldexp(1.0f, -17), Round::nearest_away) == 0x01);
  // bf16 keeps float32's exponent range: float32 subnormals round to bf16 subnormals (not flushed).
  CHECK(to_bf16(std::ldexp(1.0f, -133)) == 0x0001);
  CHECK(to_bf16(std::ldexp(1.0f, -134)) == 0x0000);
  CHECK(to_bf16(std::ldexp(3.0f, -134)) == 0x0002);
  CHECK(from_bf16(0x0001) == std::ldexp(1.0f, -133));
  CHECK(fbits(round_tf32(std::ldexp(1.0f, -137))) == 0u);
  CHECK(to_bf16(-0.0f) == 0x8000);
  CHECK(to_e4m3(-0.0f) == 0x80);
}

// The functions are constexpr: usable in constant expressions (and so in device code).
static_assert(to_e4m3(448.0f) == 0x7E && from_e4m3(0x7E) == 448.0f);
static_assert(to_bf16(1.0f) == 0x3F80 && to_fp16(1.0f) == 0x3C00 && to_int8(2.5f) == 2);
static_assert(to_ue8m0(3.0f, Round::up) == 129 && unpack_int4_hi(pack_int4(3, -4)) == -4);

}  // namespace
