// ladder/core/fixed_order.hpp -- the tolerance rule's float32 baseline, computed in an order fixed by
// the code, and the pairwise sum it (and every rung that sums a long row) uses.
//
// The rule judges a candidate by k x the error of a float32 baseline (core/contract.hpp). Computed with
// Eigen's GEMM, its vectorised sums and the C library's expf, that error depended on the CPU: Eigen picks
// its GEMM blocking from the cache sizes and its reduction order from the SIMD width, and glibc picks an
// expf by the CPU's features, so a candidate near k x baseline passed on one machine and failed on
// another. While a FixedOrder scope is alive, every float32 product of the references runs
// gemm_fixed_order (core/gemm.hpp: k ascending, one product and one sum per step -- the order of an mma
// accumulation chain), every float32 exp / log is the fixed-bits float64 one (core/math.hpp) rounded once
// to float32, and the reductions the stages mark sum pairwise (below): the same bits on every CPU, with
// -ffp-contract=off (ref/CMakeLists.txt) so no FMA is fused on one target and not on another.
// contract.cpp takes the scope around every baseline; nothing else should.
//
// The scope is process-wide (a counter, not a thread-local flag), because the references parallelise
// with OpenMP and a worker thread must see it too. A rung timed in another thread while a baseline is
// computed runs the fixed-order paths: slower, never wrong.
#pragma once
#include <atomic>
#include <cstdint>

namespace ladder {

// The scope counter (its own namespace, not `detail`: math.hpp brings this header into every stage,
// whose own `detail` namespaces must stay unambiguous under `using namespace`).
namespace fixed_order_state {
inline std::atomic<int> depth{0};
}  // namespace fixed_order_state

// True while a FixedOrder scope is alive anywhere in the process.
inline bool fixed_order() noexcept { return fixed_order_state::depth.load(std::memory_order_relaxed) > 0; }

class FixedOrder {
 public:
  FixedOrder() noexcept { fixed_order_state::depth.fetch_add(1, std::memory_order_relaxed); }
  ~FixedOrder() { fixed_order_state::depth.fetch_sub(1, std::memory_order_relaxed); }
  FixedOrder(const FixedOrder&) = delete;
  FixedOrder& operator=(const FixedOrder&) = delete;
};

// sum_{i < n} term(i), pairwise in an order fixed by the code:
//   n <= 64: eight running sums, lane l taking i = l, l + 8, ... over the whole groups of eight, combined
//            as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the n % 8 rest in index order;
//   n > 64:  the sum of the first h terms plus the sum of the rest, h = n / 2 rounded down to a multiple
//            of 8, each by this rule.
// Its rounding error is at most about (8 + 3 + log2(n / 64)) eps times the sum of |terms|: 25 eps at
// n = 2^20, where the sum in index order can reach n eps (a 2^20-long softmax normaliser summed in order
// is off by 1.9e-3 in float32). The eight lanes are what a SIMD loop or a warp keeps, the halving what a
// block reduction does.
template <class T, class Term>
T sum_pairwise_of(int64_t n, const Term& term, int64_t first = 0) {
  if (n <= 64) {
    T s[8] = {T(0), T(0), T(0), T(0), T(0), T(0), T(0), T(0)};
    const int64_t whole = n - n % 8;
    for (int64_t i = 0; i < whole; i += 8)
      for (int l = 0; l < 8; ++l) s[l] += term(first + i + l);
    T r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (int64_t i = whole; i < n; ++i) r += term(first + i);
    return r;
  }
  const int64_t h = (n / 2) / 8 * 8;
  const T a = sum_pairwise_of<T>(h, term, first);
  const T b = sum_pairwise_of<T>(n - h, term, first + h);
  return a + b;
}

// sum_i x_i pairwise (sum_pairwise_of's order).
template <class T>
T sum_pairwise(const T* x, int64_t n) {
  return sum_pairwise_of<T>(n, [x](int64_t i) { return x[i]; });
}

// sum_i x_i y_i pairwise: each product rounded once, then summed in sum_pairwise_of's order.
template <class T>
T dot_pairwise(const T* x, const T* y, int64_t n) {
  return sum_pairwise_of<T>(n, [x, y](int64_t i) { return x[i] * y[i]; });
}

}  // namespace ladder
