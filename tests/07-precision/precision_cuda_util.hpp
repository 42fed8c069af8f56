// tests/07-precision/precision_cuda_util.hpp -- what stage 07's CUDA tests share (test_precision_cuda.cpp,
// test_a8w8_mma_cuda.cpp, test_fp8_mma_cuda.cpp): the TSan build's settings, the build's kind, and two helpers.
#pragma once
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "golden_util.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::test_precision {

#if defined(SIMT_TSAN)
// libgomp is not built with TSan: the references' OpenMP loops run on one thread (as in tests/03-mla). Not inline:
// a const at namespace scope has internal linkage, and each including test initialises its own at start-up.
[[maybe_unused]] const bool kOneOmpThread = [] {
  omp_set_num_threads(1);
  return true;
}();
inline constexpr bool kTsan = true;  // the tests take smaller shapes there
#else
inline constexpr bool kTsan = false;
#endif
#if defined(LADDER_GPU)
inline constexpr bool kGpu = true;  // a device: the emulator's own arithmetic is not what runs
#else
inline constexpr bool kGpu = false;
#endif

inline size_t sz(int64_t v) { return static_cast<size_t>(v); }

// a holds exactly n values, bit for bit those at b.
template <class T>
bool same_bits(const std::vector<T>& a, const T* b, size_t n) {
  return a.size() == n && std::memcmp(a.data(), b, n * sizeof(T)) == 0;
}

// a's first n values (a guard may follow them) are bit for bit those at b.
template <class T>
bool same_prefix_bits(const std::vector<T>& a, const T* b, size_t n) {
  return a.size() >= n && std::memcmp(a.data(), b, n * sizeof(T)) == 0;
}

// rows x cols normal values, each row (per_row) or column scaled by its own magnitude 2^(-8..8); every 7th
// (index 5 mod 7) all zero.
inline Mat<float> operand(Rng& rng, int64_t rows, int64_t cols, bool per_row) {
  Mat<float> m(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = per_row ? r : c;
      m(r, c) = g % 7 == 5 ? 0.0f : static_cast<float>(rng.normal() * std::ldexp(1.0, static_cast<int>(g % 17) - 8));
    }
  return m;
}

// `rung` on stage 07's golden case `name` at float32: it returns `outputs` tensors and each passes the contract's
// judge (the report in the log when it does not). The case and the outputs come back for the caller's own checks.
struct GoldenRun {
  CaseFolder cf;
  Tensors out;
};
inline GoldenRun run_golden(const Contract& c, const Rung& rung, const std::string& name, size_t outputs) {
  GoldenRun g{read_case(c, test::golden_dir("07-precision") / name), {}};
  g.out = run_rung(c, rung, g.cf.inputs, g.cf.params, DType::F4);
  CHECK(g.out.size() == outputs);
  for (const auto& [k, v] : g.out) {
    CAPTURE(k);
    const CheckReport r = check(c, g.cf.inputs, g.cf.params, g.cf.expected, k, v);
    INFO(r.text);
    CHECK(r.pass);
  }
  return g;
}

}  // namespace ladder::test_precision
