// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/07-precision/fp8_kernels.hpp -- the two kernels of rung (c) that lab 07 has a student write,
// and the emulated tensor-core accumulator they use (fp8_block.hpp builds the recipe on them).
//
//   encode_e4m3(x)     float32 -> OCP FP8 E4M3 code, round to nearest even, saturating: the same bits as
//                      formats::to_e4m3(x) with its defaults (core/formats.hpp, the general encoder),
//                      written out for this one format. (The library quantises with formats::to_e4m3:
//                      the contract's oracle and bound must not depend on a lab student's encoder; the
//                      tests judge this one exhaustively, tests/07-precision/test_fp8_kernels.cpp.)
//   fp8_block_dot(...) one output element of the FP8 block-scaled GEMM: the products of the codes summed
//                      in the limited accumulator, promoted to float32 every N_C elements with the two
//                      tiles' scales (DeepSeek-V3 technical report, arXiv 2412.19437, §3.3; the emulation
//                      and its bound: fp8_block.hpp). fp8_block_product calls it for every (i, j).
//
// E4M3 (OCP 8-bit Floating Point Specification rev 1.0, Table 1): sign, 4 exponent bits (bias 7), 3
// mantissa bits; normal values (1 + m/8) 2^(e-7) for e = 1..15, subnormals m 2^-9 for e = 0; no infinity;
// S.1111.111 (0x7F / 0xFF) is NaN, so the largest finite value is S.1111.110 = 448. The quantum (the
// distance between neighbours) is 2^-9 below 2^-6 (subnormals and the first binade) and 2^(E-3) in the
// binade [2^E, 2^(E+1)) above.
#pragma once
#include <algorithm>
#include <cstdint>

#include "ladder/core/formats.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::precision {

enum class AccRound : uint8_t { nearest_even, toward_zero };

struct Fp8Recipe {
  int acc_bits = 14;                            // significant bits of the accumulator, 8..24
  AccRound acc_round = AccRound::nearest_even;  // how each addition is rounded to acc_bits
  int64_t nc = 128;                             // promotion interval N_C, a divisor of 128
  float x_scale = 0;                            // 0: dynamic 1 x 128 scales; > 0: one static scale
};

// The accumulator's unit: every product of two E4M3 values is a multiple of 2^-18.
inline constexpr double kUnit = 0x1p-18;

// n rounded to `bits` significant bits (RNE or truncation), exactly, in integers.
inline int64_t round_significant(int64_t n, int bits, AccRound mode) {
  const uint64_t a = n < 0 ? uint64_t(0) - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  const int bw = a == 0 ? 0 : 64 - __builtin_clzll(a);
  if (bw <= bits) return n;
  const int sh = bw - bits;
  uint64_t q = a >> sh;
  const uint64_t rem = a & ((uint64_t{1} << sh) - 1), half = uint64_t{1} << (sh - 1);
  if (mode == AccRound::nearest_even && (rem > half || (rem == half && (q & 1)))) ++q;
  const int64_t r = static_cast<int64_t>(q << sh);
  return n < 0 ? -r : r;
}

// The emulated tensor-core accumulator: an integer count of 2^-18 units, rounded after every addition.
struct LimitedAccumulator {
  int bits = 14;
  AccRound mode = AccRound::nearest_even;
  int64_t units = 0;
  // p: an exact product of two E4M3 values (a multiple of 2^-18).
  void add(float p) { units = round_significant(units + static_cast<int64_t>(static_cast<double>(p) / kUnit), bits, mode); }
  float value() const { return static_cast<float>(static_cast<double>(units) * kUnit); }  // exact (<= 24 bits)
};

// x as an E4M3 code: round to nearest, ties to even; |x| beyond 448 (and +-inf) saturates to +-448
// (S.1111.110); NaN gives S.1111.111 with x's sign; -0 gives 0x80.
LADDER_LAB_ENTRY inline uint8_t encode_e4m3(float x) {
  const uint32_t u = __builtin_bit_cast(uint32_t, x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;  // |x|
  uint8_t code = 0;
  // TODO(lab: encode_e4m3): NaN -> sign | 0x7F; |x| >= 448 -> sign | 0x7E; else |x| rounded to nearest even.
  return code;
}

// One element of the block-scaled product: a = the K codes of x's row i, a_scales its 1 x 128 tiles'
// scales (one per 128 of k); b = the K codes of w's column j, b_scales the scales of the 128 x 128 blocks
// that column crosses (one per 128 of k). Chunks of nc elements (nc divides 128: a chunk never spans two
// scale blocks), in ascending k: the products of the decoded codes added, ascending, to a fresh
// LimitedAccumulator{r.acc_bits, r.acc_round}; at the chunk's end promoted: t = a_scale * b_scale of its
// block (float32), out = out + value * t (float32).
LADDER_LAB_ENTRY inline float fp8_block_dot(const uint8_t* a, const float* a_scales, const uint8_t* b,
                                            const float* b_scales, int64_t k, const Fp8Recipe& r) {
  float out = 0.0f;
  // TODO(lab: fp8_block_dot): the chunks of r.nc, each in a fresh accumulator, promoted with its block's scales.
  return out;
}

}  // namespace ladder::precision
