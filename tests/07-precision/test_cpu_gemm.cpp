// tests/07-precision/test_cpu_gemm.cpp -- the CPU fast paths of the int8 and bf16 GEMMs
// (ladder/07-precision/cpu_gemm.hpp) against the portable definitions, on every path this CPU can run (each
// forced by the path parameter; a path the CPU lacks is named in a MESSAGE, never skipped silently):
//   int8: the same int32 sums as gemm_s8s8s32 (a8w8.hpp) on awkward shapes (K not a multiple of 4 or 64,
//         M and N of 1, 7, 129) and at the extremes (-128 x -128 and -128 x 127 over the largest K).
//         The AMX path also on shapes around its 32 x 32 block, 128-column chunk and 64-byte k-step, on 1, 2 and 3
//         OpenMP threads (a wrong B tile offset planted in its kernel failed 24 of these checks).
//         Planted: AVX2's usual VPMADDUBSW route (saturating int16 pair sums) must differ from the reference
//         (why the avx2 path sign-extends to int16 and uses VPMADDWD instead).
//   bf16: the same bits as the portable chain (avx512: the instruction; avx2: FMA under MXCSR.FZ) on
//         awkward shapes and on values made to hit the contract's corners (cancellation, subnormal inputs, results near 2^-126, signed zeros, infinities); within the
//         float32 summation bound of the fp64 product. Planted: a chain with the even element first and
//         one without FTZ must differ from the instruction (the contract is not vacuous).
#include <doctest/doctest.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/rng.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

struct Dims {
  int64_t m, k, n;
};
const Dims kShapes[] = {{1, 1, 1},  {7, 3, 129},  {129, 67, 7}, {1, 130, 1},    {13, 513, 65},
                         {6, 1000, 64}, {129, 129, 129}, {7, 5, 1}, {12, 1031, 128}, {0, 5, 3}, {3, 0, 5}};

const std::initializer_list<CpuPath> kInt8Paths = {CpuPath::amx, CpuPath::avx512, CpuPath::avx, CpuPath::avx2,
                                                   CpuPath::portable};

std::vector<CpuPath> fast_paths(bool (*available)(CpuPath), std::initializer_list<CpuPath> all) {
  std::vector<CpuPath> out;
  for (CpuPath p : all) {
    if (available(p))
      out.push_back(p);
    else
      MESSAGE("this CPU has no " << std::string(cpu_path_name(p)) << " path: not tested here");
  }
  return out;
}

std::vector<int8_t> random_s8(size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(static_cast<int>(r.next() % 256) - 128);
  return v;
}

std::vector<int32_t> int8_ref(const std::vector<int8_t>& a, const std::vector<int8_t>& b, Dims s) {
  std::vector<int32_t> c(static_cast<size_t>(s.m * s.n), -1);
  gemm_s8s8s32(a.data(), b.data(), c.data(), s.m, s.k, s.n);
  return c;
}

std::vector<int32_t> int8_run(const std::vector<int8_t>& a, const std::vector<int8_t>& b, Dims s, CpuPath p) {
  std::vector<int32_t> c(static_cast<size_t>(s.m * s.n), -7);
  gemm_s8s8s32_cpu(a.data(), b.data(), c.data(), s.m, s.k, s.n, p);
  return c;
}

// Planted: the usual AVX2 int8 dot product, VPMADDUBSW on (a + 128) unsigned x b signed with its int16 pair
// sums SATURATED, VPMADDWD by 1 to int32, minus 128 sum b; k a multiple of 32. Exact only while no pair of
// products passes 32767.
__attribute__((target("avx2"))) int32_t maddubs_dot(const int8_t* a, const int8_t* b, int64_t k) {
  __m256i acc = _mm256_setzero_si256();
  int32_t corr = 0;
  for (int64_t kk = 0; kk < k; kk += 32) {
    const __m256i x =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + kk)), _mm256_set1_epi8(-128));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kk));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1)));
  }
  for (int64_t kk = 0; kk < k; ++kk) corr -= 128 * b[kk];
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  for (int32_t v : lanes) corr += v;
  return corr;
}

}  // namespace

TEST_CASE("cpu_gemm int8: every path gives gemm_s8s8s32's int32 sums on awkward shapes") {
  const auto paths = fast_paths(int8_path_available, kInt8Paths);
  MESSAGE("int8 automatic path on this CPU: " << std::string(cpu_path_name(int8_path())));
  const char* env = std::getenv("LADDER_CPU_PATH");
  if (env && std::string(env) == "avx2" && int8_path_available(CpuPath::avx2)) {
    CHECK(int8_path() == CpuPath::avx2);  // the cap: no VNNI path under LADDER_CPU_PATH=avx2
    CHECK(bf16_path() == CpuPath::avx2);
  }
  if (env && std::string(env) == "avx512" && int8_path_available(CpuPath::avx512))
    CHECK(int8_path() == CpuPath::avx512);  // the cap: no AMX path under LADDER_CPU_PATH=avx512
  for (const Dims s : kShapes) {
    const auto a = random_s8(static_cast<size_t>(s.m * s.k), 11), b = random_s8(static_cast<size_t>(s.k * s.n), 12);
    const auto want = int8_ref(a, b, s);
    for (CpuPath p : paths) {
      INFO("path " << std::string(cpu_path_name(p)) << ", m k n = " << s.m << " " << s.k << " " << s.n);
      CHECK(int8_run(a, b, s, p) == want);
    }
  }
}

TEST_CASE("cpu_gemm int8: extreme values over the largest K stay exact (-128 x -128, -128 x 127)") {
  const auto paths = fast_paths(int8_path_available, kInt8Paths);
  const Dims s{7, kA8W8MaxK, 65};
  std::vector<int8_t> a(static_cast<size_t>(s.m * s.k), -128), b(static_cast<size_t>(s.k * s.n), -128);
  for (int64_t kk = 0; kk < s.k; ++kk) b[static_cast<size_t>(kk * s.n + 1)] = 127;  // column 1: the negative extreme
  for (int64_t kk = 0; kk < s.k; ++kk) a[static_cast<size_t>(6 * s.k + kk)] = static_cast<int8_t>(kk % 2 ? 127 : -128);
  const auto want = int8_ref(a, b, s);
  REQUIRE(want[0] == kA8W8MaxK * 16384);  // 2147467264: int32's largest possible sum
  REQUIRE(want[1] == -kA8W8MaxK * 16256);
  for (CpuPath p : paths) {
    INFO("path " << std::string(cpu_path_name(p)));
    CHECK(int8_run(a, b, s, p) == want);
  }
  CHECK_THROWS_WITH_AS(gemm_s8s8s32_cpu(a.data(), b.data(), nullptr, 1, kA8W8MaxK + 1, 1),
                       doctest::Contains("K = 131072"), Error);
}

TEST_CASE("cpu_gemm int8: a changed sum is seen (the comparison is not vacuous)") {
  const Dims s{13, 513, 65};
  const auto a = random_s8(static_cast<size_t>(s.m * s.k), 3), b = random_s8(static_cast<size_t>(s.k * s.n), 4);
  auto got = int8_run(a, b, s, CpuPath::automatic);
  got[static_cast<size_t>(5 * s.n + 64)] += 1;  // one sum of the last, partial column panel off by one
  CHECK(got != int8_ref(a, b, s));
  // The offset trick without its correction (sum (a + 128) b) is wrong wherever a column's sum is not zero.
  std::vector<int8_t> shifted_a(a.size());
  for (size_t i = 0; i < a.size(); ++i) shifted_a[i] = static_cast<int8_t>(a[i] ^ 0x80);  // (a + 128) - 256 [a >= 0]
  CHECK(int8_run(shifted_a, b, s, CpuPath::automatic) != int8_ref(a, b, s));
}

TEST_CASE("cpu_gemm int8: the AMX path on ragged shapes, 1 to 3 OpenMP threads, the same sums (and a bad packing seen)") {
  if (!int8_path_available(CpuPath::amx)) {
    MESSAGE("this CPU, OS or process has no amx path (AMX-TILE, AMX-INT8, XCR0 tile state, arch_prctl grant): "
            "not tested here");
    return;
  }
  const char* env = std::getenv("LADDER_CPU_PATH");
  if (!env || !*env || std::string(env) == "amx") CHECK(int8_path() == CpuPath::amx);  // the widest path
  // m, n around the 32 x 32 block and the 128-column chunk, k around the 64-byte k-step (and not a multiple of 4)
  const Dims shapes[] = {{31, 63, 33}, {32, 64, 32}, {33, 65, 31},   {64, 128, 128}, {97, 191, 129},
                         {1, 7, 300},  {300, 4, 1},  {45, 1000, 257}, {130, 2050, 70}};
  const int saved = omp_get_max_threads();
  for (const Dims s : shapes) {
    const auto a = random_s8(static_cast<size_t>(s.m * s.k), 21), b = random_s8(static_cast<size_t>(s.k * s.n), 22);
    const auto want = int8_ref(a, b, s);
    for (int t = 1; t <= 3; ++t) {
      omp_set_num_threads(t);
      INFO("m k n = " << s.m << " " << s.k << " " << s.n << ", threads " << t);
      CHECK(int8_run(a, b, s, CpuPath::amx) == want);
    }
  }
  omp_set_num_threads(saved);
  // Planted: b's columns 16..31 of each 32-column block read as columns 0..15 (the second B tile at the wrong
  // offset, the mistake a VNNI packing makes most easily) must change the sums.
  const Dims s{45, 1000, 257};
  const auto a = random_s8(static_cast<size_t>(s.m * s.k), 21), b = random_s8(static_cast<size_t>(s.k * s.n), 22);
  auto bad = b;
  for (int64_t kk = 0; kk < s.k; ++kk)
    for (int64_t j = 0; j + 32 <= s.n; j += 32)
      std::copy_n(b.begin() + kk * s.n + j, 16, bad.begin() + kk * s.n + j + 16);
  CHECK(int8_run(a, bad, s, CpuPath::amx) != int8_ref(a, b, s));
}

TEST_CASE("cpu_gemm int8: AVX2's saturating VPMADDUBSW route is wrong, its VPMADDWD path is not (planted)") {
  if (!int8_path_available(CpuPath::avx2)) {
    MESSAGE("this CPU has no avx2 path: not tested here");
    return;
  }
  // a = b = 127 everywhere: each pair is 2 255 127 = 64770, saturated to 32767. Random operands: some pair
  // of a row and a column passes 32767 too. The avx2 path gives the reference's sums on both.
  for (const bool extreme : {true, false}) {
    const Dims s{3, 4096, 5};
    auto a = random_s8(static_cast<size_t>(s.m * s.k), 41), b = random_s8(static_cast<size_t>(s.k * s.n), 42);
    if (extreme) std::fill(a.begin(), a.end(), 127), std::fill(b.begin(), b.end(), 127);
    const auto want = int8_ref(a, b, s);
    CHECK(int8_run(a, b, s, CpuPath::avx2) == want);
    int wrong = 0;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        std::vector<int8_t> col(static_cast<size_t>(s.k));
        for (int64_t kk = 0; kk < s.k; ++kk) col[size_t(kk)] = b[size_t(kk * s.n + j)];
        wrong += maddubs_dot(a.data() + i * s.k, col.data(), s.k) != want[size_t(i * s.n + j)];
      }
    INFO("extreme operands: " << extreme);
    CHECK(wrong == s.m * s.n);
  }
}

namespace {

uint16_t bf(float x) { return formats::to_bf16(x); }

// bf16 codes: normal-ish values of mixed magnitudes, with subnormals, zeros of both signs and values whose
// products land near 2^-126 mixed in (mode 1) or plain (mode 0).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed, int mode) {
  Rng r(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) {
    const double u = r.uniform();
    float f = static_cast<float>(r.normal()) * std::ldexp(1.0f, static_cast<int>(r.next() % 9) - 4);
    if (mode == 1) {
      if (u < 0.05) f = std::ldexp(static_cast<float>(r.uniform(-1, 1)), -127 - static_cast<int>(r.next() % 6));
      else if (u < 0.10) f = (r.next() % 2 ? -0.0f : 0.0f);
      else if (u < 0.70) f = std::ldexp(static_cast<float>(r.uniform(1, 2)) * (r.next() % 2 ? -1 : 1),
                                        -63 - static_cast<int>(r.next() % 3));
    }
    x = bf(f);
  }
  return v;
}

std::vector<float> bf16_run(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, Dims s, CpuPath p) {
  std::vector<float> c(static_cast<size_t>(s.m * s.n), -7.0f);
  gemm_bf16_cpu(a.data(), b.data(), c.data(), s.m, s.k, s.n, p);
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cpu_gemm bf16: the AVX512_BF16 and AVX2 paths give the portable chain's bits") {
  const auto paths = fast_paths(bf16_path_available, {CpuPath::avx512, CpuPath::avx2});
  MESSAGE("bf16 automatic path on this CPU: " << std::string(cpu_path_name(bf16_path())));
  for (int mode : {0, 1})
    for (const Dims s : kShapes) {
      const auto a = random_bf16(static_cast<size_t>(s.m * s.k), 21 + mode, mode);
      const auto b = random_bf16(static_cast<size_t>(s.k * s.n), 31 + mode, mode);
      const auto want = bf16_run(a, b, s, CpuPath::portable);
      for (CpuPath p : paths) {
        INFO("path " << std::string(cpu_path_name(p)) << ", mode " << mode << ", m k n = " << s.m << " " << s.k << " " << s.n);
        CHECK(same_bits(bf16_run(a, b, s, p), want));
      }
    }
}

TEST_CASE("cpu_gemm bf16: the contract's corners, and two planted chains that differ from the instruction") {
  // Each output below is one chain: a [1 x k] times b [k x 1]. With k = 4, pair 0 = (x0, x1), pair 1 =
  // (x2, x3), the steps are x1 y1, x0 y0, x3 y3, x2 y2 (pairs in order, the odd element first), from +0.
  const float tiny = 0x1p-130f, ten = 0x1p-75f;
  auto chain = [](std::initializer_list<float> av, std::initializer_list<float> bv, CpuPath p) {
    std::vector<uint16_t> a, b;
    for (float x : av) a.push_back(bf(x));
    for (float x : bv) b.push_back(bf(x));
    float c = -7;
    gemm_bf16_cpu(a.data(), b.data(), &c, 1, static_cast<int64_t>(a.size()), 1, p);
    return c;
  };
  for (CpuPath p : fast_paths(bf16_path_available, {CpuPath::avx512, CpuPath::avx2, CpuPath::portable})) {
    INFO("path " << std::string(cpu_path_name(p)));
    CHECK(chain({0, 1, -1, 0x1p-15f}, {0, 1, 1, 0x1p-15f}, p) == 0.0f);    // 1, + 2^-30 -> 1, - 1 -> 0 (odd first)
    CHECK(chain({0, 1, 1, 1}, {0, 0x1p24f, 1, 1}, p) == 0x1p24f);          // 2^24 + 1 -> 2^24 (tie, even), + 1 -> 2^24
    CHECK(chain({tiny, 0}, {0x1p100f, 0}, p) == 0.0f);                     // DAZ
    CHECK(chain({0x1p-65f, 0}, {0x1p-65f, 0}, p) == 0.0f);                 // FTZ
    CHECK(chain({0, 0x1p-63f, 0, -ten}, {0, 0x1p-63f, 0, ten}, p) == 0.0f);   // 2^-126 - 2^-150: tiny after rounding
    CHECK(chain({0, 0x1p-63f, 0, -0x1p-80f}, {0, 0x1p-63f, 0, 0x1p-80f}, p) == 0x1p-126f);  // 2^-126 - 2^-160: not
    CHECK(!std::signbit(chain({-0.0f, -0.0f}, {0, 0}, p)));               // +0 + -0 = +0 (the chain starts at +0)
    CHECK(std::signbit(chain({0x1p-65f, 0}, {-0x1p-65f, 0}, p)));         // FTZ keeps the sign: -2^-130 -> -0
    CHECK(chain({1, 0}, {INFINITY, 0}, p) == INFINITY);
    CHECK(chain({1, 1, 1}, {1, 1, 1}, p) == 3.0f);                         // k odd: the pad pair
  }
  // Planted: the even element first, and no FTZ, each disagree with the contract on one of these chains.
  auto even_first = [](float x0, float x1, float y0, float y1, float acc) {
    return std::fma(x1, y1, std::fma(x0, y0, acc));
  };
  CHECK(even_first(-1, 0x1p-15f, 1, 0x1p-15f, 1.0f) != 0.0f);  // (1 - 1) + 2^-30 = 2^-30
  CHECK(std::fma(0x1p-65f, 0x1p-65f, 0.0f) != bf16_dot_step(0.0f, bf(0x1p-65f), bf(0x1p-65f)));
}

TEST_CASE("cpu_gemm bf16: within the float32 summation bound of the exact product; bad sizes named") {
  const Dims s{37, 999, 41};
  const auto a = random_bf16(static_cast<size_t>(s.m * s.k), 5, 0), b = random_bf16(static_cast<size_t>(s.k * s.n), 6, 0);
  const auto c = bf16_run(a, b, s, CpuPath::automatic);
  // Each c_ij is a chain of k + (k odd) float32 FMAs on exact products: |c - exact| <= gamma_k(2^-24) sum |a b|
  // (Higham, Accuracy and Stability of Numerical Algorithms, §3.1), no product here near the FTZ range.
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double exact = 0, mag = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) {
        const double t = double(formats::from_bf16(a[size_t(i * s.k + kk)])) * formats::from_bf16(b[size_t(kk * s.n + j)]);
        exact += t, mag += std::fabs(t);
      }
      // (plus the float64 sum's own error, gamma_k(2^-53) mag)
      REQUIRE(std::fabs(c[size_t(i * s.n + j)] - exact) <=
              (gamma_n(double(s.k + 1), 0x1p-24) + gamma_n(double(s.k), 0x1p-53)) * mag * (1 + 0x1p-40));
    }
  float out = 0;
  CHECK_THROWS_WITH_AS(gemm_bf16_cpu(nullptr, nullptr, &out, -1, 1, 1), doctest::Contains("m = -1"), Error);
}
