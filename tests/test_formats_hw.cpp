// tests/test_formats_hw.cpp -- ladder/core/formats.hpp against the CPU's own conversion instructions,
// where the build has them (-march=native on a CPU with F16C / AVX512_BF16); a CPU without one says so
// in the test's output (a doctest MESSAGE), it is never skipped silently.
//   F16C vcvtps2ph: every one of the 2^32 float32 inputs rounding to nearest even (imm 0); toward zero
//     (imm 3) and up (imm 2) on every 7th block of 2^16 inputs; vcvtph2ps: every fp16 pattern.
//   AVX512_BF16 vcvtneps2bf16: every float32 input. The instruction treats float32 subnormal inputs as
//     zero (Intel SDM, VCVTNEPS2BF16: "denormal inputs are treated as zero", no MXCSR control), ladder
//     rounds them to bf16 subnormals (the exponent ranges are the same): for those inputs the check
//     is that the instruction gives the signed zero, everywhere else the bits must be equal.
// Each sweep is split into 2^16 blocks of 2^16 inputs, shared over the OpenMP threads; the mismatch
// count does not depend on the thread count. A planted encoder (ties away) must mismatch.
#include <doctest/doctest.h>
#include <immintrin.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "ladder/core/formats.hpp"

using namespace ladder::formats;

namespace {

[[maybe_unused]] double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#ifdef __F16C__
// Mismatches of enc against vcvtps2ph with rounding immediate IMM over all 2^32 float32 inputs.
template <int IMM, class Enc>
uint64_t f16c_mismatches(Enc enc, int64_t stride = 1) {
  uint64_t bad = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : bad)
  for (int64_t blk = 0; blk < (int64_t(1) << 16); blk += stride) {
    alignas(32) uint32_t in[8];
    alignas(16) uint16_t out[8];
    for (uint32_t i = 0; i < (1u << 16); i += 8) {
      for (uint32_t j = 0; j < 8; ++j) in[j] = (uint32_t(blk) << 16) | (i + j);
      __m256 v;
      std::memcpy(&v, in, sizeof v);
      _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(v, IMM));
      for (uint32_t j = 0; j < 8; ++j) bad += enc(std::bit_cast<float>(in[j])) != out[j];
    }
  }
  return bad;
}
#endif

#ifdef __AVX512BF16__
// Mismatches of enc against vcvtneps2bf16 over all float32 inputs, and how many of the differences
// are float32 subnormals that the instruction flushed to a signed zero (the documented difference).
template <class Enc>
uint64_t bf16_mismatches(Enc enc, uint64_t& flushed, int64_t first = 0, int64_t last = int64_t(1) << 16) {
  uint64_t bad = 0, fl = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : bad, fl)
  for (int64_t blk = first; blk < last; ++blk) {
    alignas(64) uint32_t in[16];
    alignas(32) uint16_t out[16];
    for (uint32_t i = 0; i < (1u << 16); i += 16) {
      for (uint32_t j = 0; j < 16; ++j) in[j] = (uint32_t(blk) << 16) | (i + j);
      __m512 v;
      std::memcpy(&v, in, sizeof v);
      const __m256bh h = _mm512_cvtneps_pbh(v);
      std::memcpy(out, &h, sizeof out);
      for (uint32_t j = 0; j < 16; ++j) {
        const uint16_t ours = enc(std::bit_cast<float>(in[j]));
        if (ours == out[j]) continue;
        const bool subnormal = (in[j] & 0x7F800000u) == 0 && (in[j] & 0x7FFFFFu) != 0;
        if (subnormal && out[j] == ((in[j] >> 16) & 0x8000u)) {
          ++fl;
        } else {
          ++bad;
        }
      }
    }
  }
  flushed = fl;
  return bad;
}
#endif

TEST_CASE("formats: fp16 against F16C on every float32 input") {
#ifdef __F16C__
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(f16c_mismatches<_MM_FROUND_TO_NEAREST_INT>([](float x) { return to_fp16(x); }) == 0);
  const double t_all = seconds_since(t0);
  // Toward zero and up (toward +inf): every 7th block of 2^16 inputs (7 is prime to the 128 blocks of an
  // exponent, so every sign and exponent is met, each block with all of its low 16 bits).
  CHECK(f16c_mismatches<_MM_FROUND_TO_ZERO>([](float x) { return to_fp16(x, Round::toward_zero); }, 7) == 0);
  CHECK(f16c_mismatches<_MM_FROUND_TO_POS_INF>([](float x) { return to_fp16(x, Round::up); }, 7) == 0);
  MESSAGE("F16C: all 2^32 float32 inputs (nearest even) in " << t_all << " s; toward zero and up on 2 x 2^32 / 7 in "
          << seconds_since(t0) - t_all << " s");
  // Decoding: every fp16 pattern; vcvtph2ps quiets a signalling NaN, ladder keeps its bits.
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t hw = std::bit_cast<uint32_t>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(int(h)))));
    const uint32_t ours = std::bit_cast<uint32_t>(from_fp16(uint16_t(h)));
    const bool snan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0 && (h & 0x200) == 0;
    bad += snan ? hw != (ours | 0x00400000u) : hw != ours;
  }
  CHECK(bad == 0);
  // Planted: ties away from zero instead of to even mismatches the instruction (a 2^16-input block).
  uint64_t planted = 0;
  for (uint32_t i = 0; i < (1u << 16); ++i) {
    const float x = std::bit_cast<float>(0x3F800000u | i);
    planted += to_fp16(x, Round::nearest_away) != _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
  }
  CHECK(planted > 0);
#else
  MESSAGE("SKIPPED: this build has no F16C (__F16C__ undefined): fp16 not compared with vcvtps2ph");
#endif
}

TEST_CASE("formats: bf16 against AVX512_BF16 on every float32 input") {
#ifdef __AVX512BF16__
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t flushed = 0;
  CHECK(bf16_mismatches([](float x) { return to_bf16(x); }, flushed) == 0);
  // Every float32 subnormal whose bf16 rounding is not zero is one the instruction flushed.
  uint64_t expect = 0;
  for (uint32_t m = 1; m < (1u << 23); ++m) expect += to_bf16(std::bit_cast<float>(m)) != 0;
  CHECK(flushed == 2 * expect);
  MESSAGE("AVX512_BF16: 2^32 float32 inputs in " << seconds_since(t0) << " s; " << flushed
          << " subnormal inputs flushed to zero by the instruction, rounded by ladder");
  uint64_t planted_flushed = 0;
  CHECK(bf16_mismatches([](float x) { return to_bf16(x, Round::nearest_away); }, planted_flushed, 0x3F80, 0x3F81) > 0);  // [1, 2)
#else
  MESSAGE("SKIPPED: this build has no AVX512_BF16 (__AVX512BF16__ undefined): bf16 not compared with vcvtneps2bf16");
#endif
}

}  // namespace
