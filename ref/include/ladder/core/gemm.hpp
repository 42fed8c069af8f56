// ladder/core/gemm.hpp -- the one matrix product of the references, and why fp64 never goes to Eigen.
//
// The fp64 rungs are the oracle: they write the goldens, and the goldens must be the same bytes on
// every machine. Eigen's GEMM picks its blocking (the k-panel length, hence the order in which each
// output's products are summed) at run time from the cache sizes it reads off the CPU, and its
// kernels' register blocking follows the SIMD width; so a 1025 x 1023 by 1023 x 128 double product
// changes in most of its outputs between an AMD EPYC and an Intel Xeon, or when only
// Eigen::setCpuCacheSizes changes. So for T = double every product here is plain loops in an order
// fixed by this file:
//
//   acc_ij = ((0 + a_i0 b_0j) + a_i1 b_1j) + ... + a_i,K-1 b_K-1,j     (k ascending, one product and
//   C_ij   = alpha * acc_ij      (or C_ij + alpha * acc_ij)              one sum per step, no FMA)
//
// The compiler may vectorise over j (different outputs) but never reorders a sum (no -ffast-math),
// and the build passes -ffp-contract=off so `acc + a * b` is never fused into an FMA on one machine
// and not on another (ref/CMakeLists.txt). Every call is serial; callers parallelise over whole
// outputs, so the thread count changes who computes an element, never how.
// T = float (the rungs at kernel precision, the benchmarks) uses Eigen's GEMM: there speed matters and
// the tolerance rule, not bytes, judges the result; except for the rule's own float32 baseline, computed
// inside a FixedOrder scope (core/fixed_order.hpp), which takes the fixed order too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ladder/core/fixed_order.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder {

// op(X)(r, c) for a row-major X with leading dimension ld, transposed or not.
enum class Op { N, T };

namespace detail {
// Test hook, never set outside tests/test_golden_determinism.cpp: routes the fp64 products back to
// Eigen's GEMM (the pre-fix oracle) so the test can show that it then catches the cache-size dependence.
inline bool unpinned_fp64_for_tests = false;

template <class T>
inline T at(const T* X, int64_t ld, Op op, int64_t r, int64_t c) {
  return op == Op::N ? X[r * ld + c] : X[c * ld + r];
}
}  // namespace detail

// The fixed-order product for any T (the fp64 path of gemm below; usable directly where a float result
// must also be reproducible). Shapes: op(A) [M, K], op(B) [K, N], C [M, N]; all row-major.
template <class T>
void gemm_fixed_order(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, Op opa, const T* B,
                      int64_t ldb, Op opb, T* C, int64_t ldc, bool accumulate) {
  // op(B) packed as [K, N] rows so the inner loop runs over j with unit stride (vectorisable over
  // outputs); op(A)'s row i is read element by element.
  std::vector<T> b(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) b[k * N + j] = detail::at(B, ldb, opb, k, j);
  std::vector<T> acc(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), T(0));
    for (int64_t k = 0; k < K; ++k) {
      const T aik = detail::at(A, lda, opa, i, k);
      const T* bk = b.data() + k * N;
      for (int64_t j = 0; j < N; ++j) acc[j] += aik * bk[j];
    }
    T* ci = C + i * ldc;
    if (accumulate)
      for (int64_t j = 0; j < N; ++j) ci[j] += alpha * acc[j];
    else
      for (int64_t j = 0; j < N; ++j) ci[j] = alpha * acc[j];
  }
}

// C = alpha op(A) op(B) (+ C when accumulate), serial. fp64: gemm_fixed_order; float: Eigen.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, Op opa, const T* B, int64_t ldb, Op opb,
          T* C, int64_t ldc, bool accumulate = false) {
  if constexpr (std::is_same_v<T, double>) {
    if (!detail::unpinned_fp64_for_tests) return gemm_fixed_order(M, N, K, alpha, A, lda, opa, B, ldb, opb, C, ldc, accumulate);
  } else {  // the rule's float32 baseline (core/fixed_order.hpp): the same order, the same bits on every CPU
    if (fixed_order()) return gemm_fixed_order(M, N, K, alpha, A, lda, opa, B, ldb, opb, C, ldc, accumulate);
  }
  {
    using Strided = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
    using StridedOut = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;
    const Strided a(A, opa == Op::N ? M : K, opa == Op::N ? K : M, Eigen::OuterStride<>(lda));
    const Strided bm(B, opb == Op::N ? K : N, opb == Op::N ? N : K, Eigen::OuterStride<>(ldb));
    StridedOut c(C, M, N, Eigen::OuterStride<>(ldc));
    auto run = [&](const auto& x, const auto& y) {
      if (accumulate)
        c.noalias() += alpha * (x * y);
      else
        c.noalias() = alpha * (x * y);
    };
    if (opa == Op::N && opb == Op::N) run(a, bm);
    else if (opa == Op::N) run(a, bm.transpose());
    else if (opb == Op::N) run(a.transpose(), bm);
    else run(a.transpose(), bm.transpose());
  }
}

// In the project's own g++ builds (LADDER_LAB_READY, ladder/core/lab.hpp) the float and double products
// are compiled once, in the library (ref/src/gemm.cpp), and declared extern here: Eigen's GEMM is most
// of the compile time of a unit that calls it, so the library and the tests compile faster, and a
// student's unit that calls gemm (lab 04's ragged_dot, lab 03's latent products) rebuilds in seconds
// after a save. The same flags compile it there as anywhere, so the bits are the same. For a header-only
// user (an installed ladder::ref, a notebook) gemm is an ordinary template, instantiated where used.
#define LADDER_GEMM_INSTANCES(EXTERN, T)                                                                       \
  EXTERN template void gemm<T>(int64_t, int64_t, int64_t, T, const T*, int64_t, Op, const T*, int64_t, Op, T*, \
                               int64_t, bool);
#ifdef LADDER_LAB_READY
LADDER_GEMM_INSTANCES(extern, float)
LADDER_GEMM_INSTANCES(extern, double)
#endif

// sum_i x_i, i ascending from 0 (a sum in an order fixed by the code, for every T).
template <class T>
T sum_fixed_order(const T* x, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

// sum_i x_i y_i, i ascending from 0, one product and one sum per step.
template <class T>
T dot_fixed_order(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

}  // namespace ladder
