// tests/07-precision/test_fp8_kernels.cpp -- the two kernels of fp8_kernels.hpp (lab 07's student
// functions), judged by code written here from the formats' definitions, never by themselves:
//   encode_e4m3   on all 256 E4M3 patterns and on every float32 rounding boundary of the format (each
//                 midpoint between neighbours, the float32 values either side of it and of each value,
//                 the overflow threshold 464 and beyond, NaN, float32 subnormals), plus random floats;
//                 expected codes from a nearest-value search over the 127 magnitudes of OCP FP8's Table 1.
//   fp8_block_dot on random 1 x 128 / 128 x 128 quantised operands whose blocks differ in magnitude,
//                 several K (one block, several, a partial last block), N_C and accumulator widths,
//                 against an emulation written here (its own integer accumulator).
// The failure messages follow tests/lab_check.hpp's first line (rung, output, case, first bad element),
// so scripts/lab groups them and picks the lab's hints by case name.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/core/rng.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

// The non-negative finite E4M3 magnitudes by code c = e << 3 | m (OCP FP8 Table 1): m 2^-9 for e = 0,
// (8 + m) 2^(e - 10) for e = 1..15 (c = 0x7F, e = 15 m = 7, is NaN: not a magnitude).
const std::array<double, 127>& magnitudes() {
  static const std::array<double, 127> v = [] {
    std::array<double, 127> t{};
    for (int c = 0; c < 127; ++c) {
      const int e = c >> 3, m = c & 7;
      t[static_cast<size_t>(c)] = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
    }
    return t;
  }();
  return v;
}

// The judge's encoder: the nearest magnitude, ties to the even code (the even mantissa), |x| >= 448
// saturated to 448 (every value past 448 is nearer 448 than any other finite value), NaN -> S.1111.111.
uint8_t judge_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | 0x7F);
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return static_cast<uint8_t>(sign | 0x7E);
  const auto& v = magnitudes();
  const int c = static_cast<int>(std::upper_bound(v.begin(), v.end(), a) - v.begin()) - 1;  // v[c] <= a < v[c+1]
  // 2a against v[c] + v[c+1]: both exact in double (a float32; magnitudes of 4 significant bits).
  const double twice = 2.0 * a, mid = v[static_cast<size_t>(c)] + v[static_cast<size_t>(c) + 1];
  const int code = twice < mid ? c : twice > mid ? c + 1 : (c % 2 == 0 ? c : c + 1);
  return static_cast<uint8_t>(sign | code);
}

float flt(uint32_t u) { return __builtin_bit_cast(float, u); }
uint32_t bits_of(float f) { return __builtin_bit_cast(uint32_t, f); }

// Runs encode_e4m3 on xs; one tagged check for the case (the count and the first bad input).
void check_codes(const std::string& name, const std::vector<float>& xs) {
  int64_t bad = 0, first = -1;
  uint8_t want = 0, got = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const uint8_t e = judge_e4m3(xs[i]), g = encode_e4m3(xs[i]);
    if (e != g && bad++ == 0) first = static_cast<int64_t>(i), want = e, got = g;
  }
  const std::string msg =
      bad == 0 ? std::string()
               : fmt::format("rung encode_e4m3, output code, case {}: first bad element at [x = 0x{:08X} = {:.9g}]: "
                             "expected 0x{:02X} ({:g}), got 0x{:02X} ({:g}); {} of {} elements bad",
                             name, bits_of(xs[static_cast<size_t>(first)]), xs[static_cast<size_t>(first)], want,
                             formats::from_e4m3(want), got, formats::from_e4m3(got), bad, xs.size());
  CHECK_MESSAGE(bad == 0, msg);
}

std::vector<float> both_signs(std::vector<float> xs) {
  const size_t n = xs.size();
  for (size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  return xs;
}

}  // namespace

TEST_CASE("07 lab: encode_e4m3 -- all 256 patterns, every rounding boundary, overflow, NaN") {
  const auto& v = magnitudes();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> patterns, ties, boundaries, overflow, nans, random;
  for (int c = 0; c < 127; ++c) patterns.push_back(static_cast<float>(v[static_cast<size_t>(c)]));  // 0x00..0x7E
  patterns = both_signs(patterns);  // -0.0f: 0x80
  for (int c = 0; c + 1 < 127; ++c) {
    const float lo = static_cast<float>(v[static_cast<size_t>(c)]), hi = static_cast<float>(v[static_cast<size_t>(c) + 1]);
    const float mid = static_cast<float>((v[static_cast<size_t>(c)] + v[static_cast<size_t>(c) + 1]) / 2);  // exact
    ties.push_back(mid);
    for (const float f : {std::nextafter(mid, 0.0f), std::nextafter(mid, inf), std::nextafter(hi, 0.0f)})
      boundaries.push_back(f);
    if (lo > 0) boundaries.push_back(std::nextafter(lo, inf));
  }
  for (const uint32_t u : {0x00000001u, 0x00400000u, 0x007FFFFFu, 0x00800000u, 0x3A000000u /* 2^-11 */})
    boundaries.push_back(flt(u));  // float32 subnormals and tiny normals: all below half of 2^-9
  ties = both_signs(ties);
  boundaries = both_signs(boundaries);
  for (const float f : {std::nextafter(448.0f, inf), 450.0f, 463.9f, std::nextafter(464.0f, 0.0f), 464.0f,
                        std::nextafter(464.0f, inf), 479.0f, 480.0f, 1000.0f, 65504.0f, 1e30f,
                        std::numeric_limits<float>::max(), inf})
    overflow.push_back(f);
  overflow = both_signs(overflow);
  for (const uint32_t u : {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0x7FA00000u}) nans.push_back(flt(u));
  nans = both_signs(nans);
  Rng rng(7);
  for (int t = 0; t < (1 << 17); ++t) {  // any float32 bits (every class), and |x| in [2^-12, 2^10)
    const uint32_t u = static_cast<uint32_t>(rng.uniform_int(uint64_t{1} << 32));
    random.push_back(flt(u));
    random.push_back(flt((u & 0x807FFFFFu) | ((115u + static_cast<uint32_t>(rng.uniform_int(22))) << 23)));
  }
  check_codes("patterns", patterns);
  check_codes("ties", ties);
  check_codes("boundaries", boundaries);
  check_codes("overflow", overflow);
  check_codes("nan", nans);
  check_codes("random", random);
}

TEST_SUITE("judge") {
  // The judge's encoder is the library's: formats::to_e4m3 (core/formats.hpp, its general encoder),
  // on the same inputs; a judge that disagreed with it would be wrong.
  TEST_CASE("07 lab judge: the nearest-value encoder agrees with formats::to_e4m3") {
    Rng rng(8);
    for (int t = 0; t < (1 << 16); ++t) {
      const float x = flt(static_cast<uint32_t>(rng.uniform_int(uint64_t{1} << 32)));
      REQUIRE(judge_e4m3(x) == formats::to_e4m3(x));
    }
    for (int c = 0; c < 256; ++c) {
      const float x = formats::from_e4m3(static_cast<uint8_t>(c));
      REQUIRE(judge_e4m3(x) == formats::to_e4m3(x));
      if ((c & 0x7F) != 0x7F) REQUIRE(judge_e4m3(x) == c);
    }
    const auto& v = magnitudes();
    for (int c = 0; c + 1 < 127; ++c) {  // every midpoint and the floats beside it, both signs
      const float mid = static_cast<float>((v[static_cast<size_t>(c)] + v[static_cast<size_t>(c) + 1]) / 2);
      for (const float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid}) {
        CAPTURE(x);
        REQUIRE(judge_e4m3(x) == formats::to_e4m3(x));
      }
    }
    CHECK(judge_e4m3(464.0f) == 0x7E);  // the tie at the top goes to the even 448
    CHECK(judge_e4m3(std::nextafter(464.0f, 1e9f)) == 0x7E);
    CHECK(judge_e4m3(0x1p-10f) == 0x00);  // half the smallest subnormal: a tie, to the even 0
  }
}

namespace {

// The judge's accumulator: n rounded to `bits` significant bits (nearest even, or toward zero).
int64_t judge_round(int64_t n, int bits, bool rtz) {
  const uint64_t m = n < 0 ? uint64_t(0) - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  int sh = 0;
  while ((m >> sh) >= (uint64_t{1} << bits)) ++sh;
  uint64_t q = m >> sh;
  const uint64_t rem = m - (q << sh), unit = uint64_t{1} << sh;
  if (!rtz && sh > 0 && (2 * rem > unit || (2 * rem == unit && (q & 1)))) ++q;
  const int64_t r = static_cast<int64_t>(q << sh);
  return n < 0 ? -r : r;
}

double judge_value(uint8_t c) {  // an E4M3 code's value, from the table
  return (c & 0x80 ? -1.0 : 1.0) * magnitudes()[c & 0x7F];
}

struct DotCase {
  int64_t k, nc;
  int bits;
  bool rtz;
  std::string name() const { return fmt::format("K {}, nc {}, {}-bit {}", k, nc, bits, rtz ? "rtz" : "rne"); }
};

// The recipe's element (fp8_block.hpp, "the emulation"), with the judge's own pieces: y and the
// tolerance of any float32 evaluation of the promotions. Each chunk's value v_c is exact and fixed by
// the recipe (integer sums of 2^-18 units rounded after each addition, ascending k); what a correct
// kernel may do differently is the float32 arithmetic of the promotions: t = xs ws, v t, the sum over
// the nch chunks -- at most nch + 1 roundings on each term's path, so any such evaluation is within
// gamma_{nch+1}(2^-24) S of the exact sum_c v_c xs_c ws_c (S = sum_c |v_c xs_c ws_c|, Higham §3.1),
// and two of them within twice that: tol = 2 gamma_{nch+2}(2^-24) S (one rounding spare, S in double).
// A different accumulator (another N_C, no rounding, a reset missed) or a neighbour's scale moves y by
// about 2^-14 of a chunk or by a factor of the scales: far outside tol.
struct JudgeDot {
  float y = 0;
  double tol = 0;
};
JudgeDot judge_dot(const uint8_t* a, const float* as, const uint8_t* b, const float* bs, const DotCase& d) {
  JudgeDot r;
  double s = 0;
  int64_t nch = 0;
  for (int64_t k0 = 0; k0 < d.k; k0 += d.nc, ++nch) {
    int64_t acc = 0;
    for (int64_t t = k0; t < std::min(k0 + d.nc, d.k); ++t)
      acc = judge_round(acc + std::llround(judge_value(a[t]) * judge_value(b[t]) * 0x1p18), d.bits, d.rtz);
    const float v = static_cast<float>(std::ldexp(static_cast<double>(acc), -18));
    const float scale = as[k0 / 128] * bs[k0 / 128];
    r.y = r.y + v * scale;
    s += std::fabs(static_cast<double>(v) * as[k0 / 128] * bs[k0 / 128]);
  }
  r.tol = 2 * gamma_n(static_cast<double>(nch + 2), 0x1p-24) * s;
  return r;
}

// Random x [m x K] and w [K x n] whose 128-blocks along k differ in magnitude (x's tiles by 4^(b mod 3),
// w's blocks by 3^(b mod 2)), quantised by the library's 1 x 128 / 128 x 128 quantisers.
struct Operands {
  quant::Quantized xq, wq;
  std::vector<uint8_t> wt;  // w's codes, [n x K]
  std::vector<float> xs, ws;  // per row i / per column: the K / 128 scales along k
};
Operands operands(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  Rng rng(seed);
  Mat<float> x(m, k), w(k, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) x(i, c) = static_cast<float>(rng.normal() * std::pow(4.0, (c / 128) % 3));
  for (int64_t c = 0; c < k; ++c)
    for (int64_t j = 0; j < n; ++j) w(c, j) = static_cast<float>(rng.normal() * std::pow(3.0, (c / 128) % 2));
  Operands o{quant::tiles_1x128(x), quant::blocks_128x128(w), {}, {}, {}};
  const int64_t kb = (k + 127) / 128;
  o.wt.resize(static_cast<size_t>(n * k));
  for (int64_t c = 0; c < k; ++c)
    for (int64_t j = 0; j < n; ++j) o.wt[static_cast<size_t>(j * k + c)] = o.wq.codes[static_cast<size_t>(c * n + j)];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t b = 0; b < kb; ++b) o.xs.push_back(o.xq.scales(i, b));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t b = 0; b < kb; ++b) o.ws.push_back(o.wq.scales(b, j / 128));
  return o;
}

const std::vector<DotCase> kDotCases = {
    {128, 128, 14, false}, {128, 32, 14, false}, {640, 128, 14, false}, {640, 32, 14, false},
    {300, 64, 14, false},  {300, 1, 14, false},  {384, 128, 12, true},  {384, 32, 24, false}};

}  // namespace

TEST_CASE("07 lab: fp8_block_dot -- the recipe's element for several K, N_C and accumulators") {
  const int64_t m = 3, n = 4;
  for (const DotCase& d : kDotCases) {
    const Operands o = operands(m, d.k, n, 40 + static_cast<uint64_t>(d.k + d.nc));
    const int64_t kb = (d.k + 127) / 128;
    Fp8Recipe r;
    r.acc_bits = d.bits, r.nc = d.nc, r.acc_round = d.rtz ? AccRound::toward_zero : AccRound::nearest_even;
    int64_t bad = 0;
    std::string first;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t* a = &o.xq.codes[static_cast<size_t>(i * d.k)];
        const uint8_t* b = &o.wt[static_cast<size_t>(j * d.k)];
        const float* as = &o.xs[static_cast<size_t>(i * kb)];
        const float* bs = &o.ws[static_cast<size_t>(j * kb)];
        const JudgeDot e = judge_dot(a, as, b, bs, d);
        const float g = fp8_block_dot(a, as, b, bs, d.k, r);
        const double err = std::fabs(static_cast<double>(g) - e.y);
        if (!(err <= e.tol) && bad++ == 0)
          first = fmt::format("[i {}, j {}] of [{}, {}]: expected {:.9g}, got {:.9g} (|err| {:.3g} > tolerance {:.3g})", i,
                              j, m, n, e.y, g, err, e.tol);
      }
    CHECK_MESSAGE(bad == 0, fmt::format("rung fp8_block_dot (float32), output y, case {}: first bad element at {}; {} of "
                                        "{} elements bad",
                                        d.name(), first, bad, m * n));
  }
}

TEST_SUITE("judge") {
  // The reference kernel is the judge's emulation bit for bit (so the tolerance above is only ever
  // spent on a student's other, equally correct, float32 order), and fp8_block_product is that kernel
  // for every element.
  TEST_CASE("07 lab judge: the reference fp8_block_dot and fp8_block_product equal the judge's emulation") {
    for (const DotCase& d : kDotCases) {
      CAPTURE(d.name());
      const int64_t m = 3, n = 130, kb = (d.k + 127) / 128;
      const Operands o = operands(m, d.k, n, 90 + static_cast<uint64_t>(d.k));
      Fp8Recipe r;
      r.acc_bits = d.bits, r.nc = d.nc, r.acc_round = d.rtz ? AccRound::toward_zero : AccRound::nearest_even;
      const Mat<float> y = fp8_block_product(o.xq, o.wq, r);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const JudgeDot e = judge_dot(&o.xq.codes[static_cast<size_t>(i * d.k)], &o.xs[static_cast<size_t>(i * kb)],
                                       &o.wt[static_cast<size_t>(j * d.k)], &o.ws[static_cast<size_t>(j * kb)], d);
          REQUIRE(bits_of(y(i, j)) == bits_of(e.y));
        }
    }
  }
}
