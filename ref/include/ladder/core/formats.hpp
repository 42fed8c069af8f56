// ladder/core/formats.hpp -- the low-precision number formats, converted exactly, bit for bit.
//
// Formats (bits in and out as uint8_t / uint16_t, values as float):
//   bf16   1.8.7   bias 127  IEEE-like (subnormals, +-inf, NaN); the top half of a float32
//   fp16   1.5.10  bias 15   IEEE 754 binary16 (subnormals, +-inf, NaN)
//   tf32   1.8.10  bias 127  float32 with 10 mantissa bits, kept in a float (low 13 bits zero)
//   e4m3   1.4.3   bias 7    OCP FP8 E4M3: max 448, subnormals down to 2^-9, NO infinities,
//                            NaN = S.1111.111 (0x7F / 0xFF), the only two NaN patterns
//   e5m2   1.5.2   bias 15   OCP FP8 E5M2: IEEE-like, max 57344, +-inf = S.11111.00, NaN = S.11111.{01,10,11}
//   ue8m0  0.8.0   bias 127  OCP MX scale byte: value 2^(e-127) for e = 0..254, 0xFF = NaN; no sign,
//                            no zero, no subnormals, no infinity
//   int8   two's complement [-128, 127], saturating
//   int4   two's complement [-8, 7], two per byte (pack_int4: see the nibble order there)
// Sources for the facts: IEEE 754-2019 (binary16/binary32, the rounding-direction attributes of §4.3,
// overflow under each rounding in §7.4); OCP 8-bit Floating Point Specification (OFP8) rev 1.0, 2023
// (E4M3/E5M2 encodings, Table 1; saturating and non-saturating conversion, §5); OCP Microscaling
// Formats (MX) v1.0 (E8M0 scale: 2^(e-127), 0xFF NaN); NVIDIA's TF32 (A100 whitepaper: 8-bit exponent,
// 10-bit mantissa).
//
// Roundings (Round): nearest_even (default, IEEE roundTiesToEven), nearest_away (roundTiesToAway: PTX
// cvt.rna, which CUDA's tf32 conversion uses), toward_zero (roundTowardZero, truncation) and up
// (roundTowardPositive, for scales that must never be too small). Stochastic rounding is not provided.
// Every encoder rounds the float32 value once, exactly, in integer arithmetic: the result never depends
// on the FPU's rounding mode, FTZ/DAZ or the compiler's flags, so it is the same on every CPU and on the
// SIMT/CUDA path.
//
// Overflow (finite results beyond the largest finite value, and +-inf inputs) for the FP8 and UE8M0
// encoders: Overflow::saturate (default) gives +-max (+-448 for E4M3, +-57344 for E5M2) and maps +-inf to
// +-max, as OFP8's saturating mode and CUDA's __NV_SATFINITE do; Overflow::to_inf_or_nan gives +-inf
// (E5M2) or NaN (E4M3, which has no infinity), as OFP8's non-saturating mode (__NV_NOSAT). The bound
// follows IEEE 754 §7.4 for the rounding: under nearest_even a value overflows when it rounds, with the
// exponent range unbounded, above max (E4M3: |x| > 464 is NaN, 464 itself is a tie that goes to the even
// 448; E5M2: |x| >= 61440); toward_zero never overflows a finite input (it gives max), up only a
// positive one. bf16, fp16 and tf32 follow IEEE 754 (overflow -> inf under the nearest roundings), as
// the hardware instructions do.
//
// NaN rule: a NaN input gives a NaN of the same sign. IEEE-like formats keep the top payload bits and set
// the quiet bit (the top mantissa bit) -- what F16C's vcvtps2ph and AVX512_BF16's vcvtneps2bf16 do; E4M3
// gives S.1111.111. Decoding keeps the payload bits (a signalling NaN decodes to a signalling float NaN,
// bit for bit), so every bit pattern decodes and re-encodes to itself, except signalling NaNs, which come
// back quieted (same sign, same payload, quiet bit set). Decoding a UE8M0 0xFF, or an E4M3 NaN, gives
// the float quiet NaN 0x7FC00000 (with the sign for E4M3).
//
// Device code: every function here is constexpr, branch-light, allocation- and exception-free, and
// marked LADDER_FORMATS_HD (__host__ __device__ under nvcc), so CUDA kernels and the SIMT layer call the
// same code (nvcc compiles them for sm_80 / sm_90 with no extra flag).
#pragma once
#include <cstdint>

// The execution-space keywords where they exist: nvcc pre-includes the macros __host__ / __device__
// (crt/host_defines.h), the SIMT layer defines them empty (cuda/simt/detail/lang.hpp), g++ alone has
// neither. (Not __CUDACC__: host code never switches on it, tests/test_host_code.py.)
#if defined(__host__) && defined(__device__)
#define LADDER_FORMATS_HD __host__ __device__
#else
#define LADDER_FORMATS_HD
#endif

namespace ladder::formats {

enum class Round : uint8_t { nearest_even, nearest_away, toward_zero, up };
enum class Overflow : uint8_t { saturate, to_inf_or_nan };

// A floating format's layout, for the generic encoder/decoder below (public so tests can enumerate).
struct FloatSpec {
  int ebits;          // exponent field width
  int mbits;          // mantissa field width
  int bias;           // exponent bias
  bool ieee;          // top exponent field reserved for inf (mantissa 0) / NaN (else)
  uint32_t max_code;  // largest finite magnitude code
  uint32_t nan_code;  // the NaN magnitude code when !ieee (E4M3: 0x7F)
};

inline constexpr FloatSpec kBf16{8, 7, 127, true, 0x7F7F, 0};
inline constexpr FloatSpec kFp16{5, 10, 15, true, 0x7BFF, 0};
inline constexpr FloatSpec kTf32{8, 10, 127, true, 0x3FBFF, 0};  // 19-bit code: sign at bit 18
inline constexpr FloatSpec kE4m3{4, 3, 7, false, 0x7E, 0x7F};
inline constexpr FloatSpec kE5m2{5, 2, 15, true, 0x7B, 0};

namespace detail {

// __builtin_bit_cast / __builtin_clz rather than std::bit_cast / std::bit_width: g++, clang and nvcc all
// have them in constant expressions, and nvcc in device code without --expt-relaxed-constexpr.
LADDER_FORMATS_HD constexpr uint32_t bits(float x) { return __builtin_bit_cast(uint32_t, x); }
LADDER_FORMATS_HD constexpr float value(uint32_t u) { return __builtin_bit_cast(float, u); }
LADDER_FORMATS_HD constexpr int bit_width(uint32_t v) { return v ? 32 - __builtin_clz(v) : 0; }

// The float32 bits u rounded to the format s (a template argument: constants in device code too); returns the code (sign at bit ebits + mbits).
// Method: |x| = sig * 2^E exactly (sig < 2^24). The result's quantum is 2^q with q = max(floor(log2|x|)
// - mbits, qmin), qmin = 1 - bias - mbits (the subnormal quantum). n = sig >> (q - E) rounded by the
// remainder; the code is ((q - qmin) << mbits) + n, which is continuous across the subnormal/normal
// boundary and across a carry of n to 2^(mbits+1) (both give the next exponent field with mantissa 0).
template <FloatSpec s>
LADDER_FORMATS_HD constexpr uint32_t encode(uint32_t u, Round r, Overflow o) {
  const bool neg = (u >> 31) != 0;
  const uint32_t sign = neg ? (1u << (s.ebits + s.mbits)) : 0u;
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t inf_code = s.max_code + 1;  // ieee formats: the first code of the top exponent field
  if (a > 0x7F800000u) {                     // NaN: keep the sign and the top payload bits, quiet it
    if (!s.ieee) return sign | s.nan_code;
    return sign | inf_code | (1u << (s.mbits - 1)) | ((a & 0x7FFFFFu) >> (23 - s.mbits));
  }
  if (a == 0x7F800000u) {  // infinity
    if (o == Overflow::saturate) return sign | s.max_code;
    return sign | (s.ieee ? inf_code : s.nan_code);
  }
  if (a == 0) return sign;  // signed zero
  const int e32 = static_cast<int>(a >> 23);
  const uint32_t sig = e32 == 0 ? (a & 0x7FFFFFu) : ((a & 0x7FFFFFu) | 0x800000u);
  const int E = e32 == 0 ? -149 : e32 - 150;
  const int fl = E + bit_width(sig) - 1;  // floor(log2 |x|)
  const int qmin = 1 - s.bias - s.mbits;
  const int q = fl - s.mbits > qmin ? fl - s.mbits : qmin;
  const int shift = q - E;  // >= 13 for every format here (fewer mantissa bits than float32)
  uint32_t n = 0, rem = 1, half = 2;  // shift > 31: |x| < 2^(q-7), below half a quantum
  if (shift <= 31) {
    n = sig >> shift;
    rem = sig & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
  }
  bool inc = false;
  switch (r) {
    case Round::nearest_even: inc = rem > half || (rem == half && (n & 1u)); break;
    case Round::nearest_away: inc = rem >= half; break;
    case Round::toward_zero: inc = false; break;
    case Round::up: inc = rem != 0 && !neg; break;
  }
  n += inc ? 1u : 0u;
  const uint32_t code = (static_cast<uint32_t>(q - qmin) << s.mbits) + n;
  if (code > s.max_code) {  // overflow (IEEE 754 §7.4: the rounding direction decides inf or max)
    const bool to_max = o == Overflow::saturate || r == Round::toward_zero || (r == Round::up && neg);
    return sign | (to_max ? s.max_code : (s.ieee ? inf_code : s.nan_code));
  }
  return sign | code;
}

// The code c of format s as float32 bits, exactly (every value of these formats is a float32, except
// bf16/tf32 subnormals, which are float32 subnormals: decode those by shifting, see from_bf16).
template <FloatSpec s>
LADDER_FORMATS_HD constexpr uint32_t decode(uint32_t c) {
  const int nb = s.ebits + s.mbits;
  const uint32_t sign = ((c >> nb) & 1u) << 31;
  const uint32_t mag = c & ((1u << nb) - 1u);
  const uint32_t ef = mag >> s.mbits;
  const uint32_t m = mag & ((1u << s.mbits) - 1u);
  if (s.ieee && ef == (1u << s.ebits) - 1u) return sign | 0x7F800000u | (m << (23 - s.mbits));
  if (!s.ieee && mag == s.nan_code) return sign | 0x7FC00000u;
  if (ef == 0) {
    if (m == 0) return sign;
    const int p = bit_width(m) - 1;  // m * 2^qmin = 2^(p + qmin) * (m / 2^p)
    const int qmin = 1 - s.bias - s.mbits;
    return sign | (static_cast<uint32_t>(p + qmin + 127) << 23) | ((m - (1u << p)) << (23 - p));
  }
  return sign | (static_cast<uint32_t>(static_cast<int>(ef) - s.bias + 127) << 23) | (m << (23 - s.mbits));
}


}  // namespace detail

// ---- bf16 ---------------------------------------------------------------------------------------
LADDER_FORMATS_HD constexpr uint16_t to_bf16(float x, Round r = Round::nearest_even) {
  return static_cast<uint16_t>(detail::encode<kBf16>(detail::bits(x), r, Overflow::to_inf_or_nan));
}
LADDER_FORMATS_HD constexpr float from_bf16(uint16_t b) { return detail::value(static_cast<uint32_t>(b) << 16); }

// ---- fp16 (IEEE binary16) -----------------------------------------------------------------------
LADDER_FORMATS_HD constexpr uint16_t to_fp16(float x, Round r = Round::nearest_even) {
  return static_cast<uint16_t>(detail::encode<kFp16>(detail::bits(x), r, Overflow::to_inf_or_nan));
}
LADDER_FORMATS_HD constexpr float from_fp16(uint16_t h) { return detail::value(detail::decode<kFp16>(h)); }

// ---- tf32: x rounded to 10 mantissa bits, returned as a float (its low 13 bits are zero) ------------
LADDER_FORMATS_HD constexpr float round_tf32(float x, Round r = Round::nearest_even) {
  return detail::value(detail::encode<kTf32>(detail::bits(x), r, Overflow::to_inf_or_nan) << 13);
}

// ---- OCP FP8 E4M3 / E5M2 ----------------------------------------------------------------------------
LADDER_FORMATS_HD constexpr uint8_t to_e4m3(float x, Round r = Round::nearest_even,
                                            Overflow o = Overflow::saturate) {
  return static_cast<uint8_t>(detail::encode<kE4m3>(detail::bits(x), r, o));
}
LADDER_FORMATS_HD constexpr float from_e4m3(uint8_t b) { return detail::value(detail::decode<kE4m3>(b)); }

LADDER_FORMATS_HD constexpr uint8_t to_e5m2(float x, Round r = Round::nearest_even,
                                            Overflow o = Overflow::saturate) {
  return static_cast<uint8_t>(detail::encode<kE5m2>(detail::bits(x), r, o));
}
LADDER_FORMATS_HD constexpr float from_e5m2(uint8_t b) { return detail::value(detail::decode<kE5m2>(b)); }

inline constexpr float kE4m3Max = 448.0f;
inline constexpr float kE5m2Max = 57344.0f;

// ---- UE8M0: a power-of-two scale 2^(e-127), e = 0..254; 0xFF = NaN ------------------------------------
// Rounding of a positive finite x between 2^k and 2^(k+1): toward_zero -> 2^k, up -> 2^(k+1),
// nearest_even / nearest_away -> the nearer power in linear distance, the tie 1.5 * 2^k going up (to the
// even significand 2, as E8M0 is a format with no mantissa bits). Range: below 2^-127 gives 0x00 (the
// smallest; the format has no zero) whatever the rounding; above 2^127 the rounded value overflows:
// Overflow::saturate gives 0xFE (2^127), to_inf_or_nan 0xFF; +inf the same. x <= 0 (including -0) or
// NaN gives 0xFF: a scale must be positive. There is no default rounding on purpose: a quantiser's scale
// rounds up (Round::up) so that amax / scale never exceeds the element format's max.
LADDER_FORMATS_HD constexpr uint8_t to_ue8m0(float x, Round r, Overflow o = Overflow::saturate) {
  const uint32_t u = detail::bits(x);
  if (u > 0x7F800000u || u == 0) return 0xFF;  // NaN, negative (sign bit set) or +0
  if (u == 0x7F800000u) return o == Overflow::saturate ? 0xFE : 0xFF;
  if (u < 0x00400000u) return 0x00;  // x < 2^-127: below the smallest scale
  // 2^-127 itself is the float subnormal 0x00400000; from there on x = 2^k * (1 + f), k >= -127
  const int e32 = static_cast<int>(u >> 23);
  int k;
  uint32_t frac;  // the bits after the leading 1, as a 23-bit fraction of 2^k
  if (e32 == 0) {  // [2^-127, 2^-126): subnormal float, leading bit 22
    k = -127;
    frac = (u & 0x3FFFFFu) << 1;
  } else {
    k = e32 - 127;
    frac = u & 0x7FFFFFu;
  }
  bool inc = false;
  switch (r) {
    case Round::nearest_even:
    case Round::nearest_away: inc = frac >= 0x400000u; break;  // >= 1.5 * 2^k (the tie goes up)
    case Round::toward_zero: inc = false; break;
    case Round::up: inc = frac != 0; break;
  }
  const int e = k + 127 + (inc ? 1 : 0);
  if (e > 254) return o == Overflow::saturate ? 0xFE : 0xFF;
  return static_cast<uint8_t>(e);
}
LADDER_FORMATS_HD constexpr float from_ue8m0(uint8_t b) {
  if (b == 0xFF) return detail::value(0x7FC00000u);
  if (b == 0) return detail::value(0x00400000u);  // 2^-127, a float32 subnormal
  return detail::value(static_cast<uint32_t>(b) << 23);
}

// ---- int8 / int4: saturating, rounded as asked ------------------------------------------------------
// x clamped to [lo, hi] (the clamp is exact; so is the rounding: x - trunc(x) is exact for |x| < 2^23).
// NaN gives 0 (a quantiser never feeds one: it refuses NaN inputs first).
namespace detail {
LADDER_FORMATS_HD constexpr int round_int(float x, int lo, int hi, Round r) {
  if (x != x) return 0;
  if (x <= static_cast<float>(lo)) return lo;
  if (x >= static_cast<float>(hi)) return hi;
  const int t = static_cast<int>(x);  // truncation toward zero
  const float f = x - static_cast<float>(t);
  const float af = f < 0 ? -f : f;
  const int away = f < 0 ? -1 : 1;
  switch (r) {
    case Round::nearest_even: return af > 0.5f || (af == 0.5f && (t & 1)) ? t + away : t;
    case Round::nearest_away: return af >= 0.5f ? t + away : t;
    case Round::toward_zero: return t;
    case Round::up: return f > 0 ? t + 1 : t;
  }
  return t;
}
}  // namespace detail

LADDER_FORMATS_HD constexpr int8_t to_int8(float x, Round r = Round::nearest_even) {
  return static_cast<int8_t>(detail::round_int(x, -128, 127, r));
}
// to_int4: x saturated to [-8, 7] and rounded; the result is an int8_t holding a value in [-8, 7].
LADDER_FORMATS_HD constexpr int8_t to_int4(float x, Round r = Round::nearest_even) {
  return static_cast<int8_t>(detail::round_int(x, -8, 7, r));
}
// Nibble order: element 2i is the LOW nibble (bits 0-3) and element 2i+1 the HIGH nibble (bits 4-7) of
// byte i -- the order of PyTorch's / GPTQ's / CUTLASS's packed int4 (cutlass::int4b_t arrays). lo and hi
// must be in [-8, 7]; only their low 4 bits are stored.
LADDER_FORMATS_HD constexpr uint8_t pack_int4(int8_t lo, int8_t hi) {
  return static_cast<uint8_t>((static_cast<uint8_t>(lo) & 0x0Fu) | ((static_cast<uint8_t>(hi) & 0x0Fu) << 4));
}
// The low nibble (element 2i) / high nibble (element 2i+1), sign-extended.
LADDER_FORMATS_HD constexpr int8_t unpack_int4_lo(uint8_t b) {
  const int v = b & 0x0F;
  return static_cast<int8_t>(v >= 8 ? v - 16 : v);
}
LADDER_FORMATS_HD constexpr int8_t unpack_int4_hi(uint8_t b) {
  const int v = b >> 4;
  return static_cast<int8_t>(v >= 8 ? v - 16 : v);
}

}  // namespace ladder::formats
