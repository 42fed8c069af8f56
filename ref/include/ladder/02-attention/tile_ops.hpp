// ladder/02-attention/tile_ops.hpp -- the tile products of the tiled rungs (tiled.hpp, recompute.hpp):
// S = Q_i K_j^T, O_i += P V_j, dV_j += P^T dO_i, dQ_i += scale dS K_j, ...
//
// In double each is the Eigen product expression the rungs wrote inline; in float, the kernels of
// tile_simd.hpp (register-blocked for AVX-512 / AVX2, one summation order fixed by the code on every CPU:
// 1.25x (d = 128) and 1.36x (d = 59) the Eigen form's speed in the tiled forward, one loaded Zen 5 run,
// bench_02's BM_tiled_eigen). Each sits behind a function on row-major tile views whose float and double
// instantiations the library compiles once (ref/src/02-attention/tile_ops.cpp). In the project's own g++ builds (LADDER_LAB_READY,
// ladder/core/lab.hpp) `extern template` below keeps every other unit from instantiating them: Eigen's
// GEMM is most of the compile time of a unit that uses it, so the library and tests compile faster and
// lab 02's student units (ref/src/02-attention/lab/*.cpp) compile only the student's row loops: a save is
// rebuilt in a few seconds. Plain Eigen expressions in their place give the same results, only compile
// slower. For a header-only user (an installed ladder::ref, a notebook, another T) they are ordinary
// templates, instantiated where used: no library needed.
#pragma once
#include "ladder/core/eigen.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/02-attention/tile_simd.hpp"
#ifdef LADDER_TILE_SIMD_X86
#include "ladder/02-attention/tile_simd_x86.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace ladder::attention::tile {

// The width of the tiled rungs' buffers for head dim d: d rounded up to a whole 64-byte line (16 floats,
// 8 doubles), the columns past d kept at zero. Eigen's GEMM kernels work in whole SIMD vectors and
// handle a ragged edge slowly: O_i += P V_j with an output 111 wide ran at 0.81x the rate of one 112
// wide (115 vs 142 GFLOP/s, one AVX-512 core, 256 x 256 tiles). Zero columns in the right-hand factor
// keep the product's extra columns at 0, and only the first d columns are stored. The padding is for
// products whose OUTPUT is d wide (O_i += P V_j, and the backward's dQ, dK, dV); a product that sums
// over d (S = Q_i K_j^T, dP = dO_i V_j^T) is given the first d columns only (leftCols(d)): its inner
// dimension takes any length at full speed, so zero columns there are multiply-adds for nothing (at
// d = 59, 8 % more; the tiled forward went from 0.88x to 0.94x of a square Eigen GEMM on a 2-core
// Zen 4 EPYC with AVX-512, one interleaved run). FlashAttention-2's interface pads the head dim too
// (q, k, v are round_multiple(head_size, 8) wide in csrc/flash_attn/flash_api.cpp).
template <class T>
constexpr int64_t width(int64_t d) {
  constexpr int64_t line = 64 / static_cast<int64_t>(sizeof(T));
  return (d + line - 1) / line * line;
}

// A row-major tile or a block of one (inner stride 1): what topRows / topLeftCorner / a Map give.
template <class T>
using In = Eigen::Ref<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using Out = Eigen::Ref<Mat<T>, 0, Eigen::OuterStride<>>;

// ---- the float kernels' dispatch (tile_simd.hpp says what they compute and in which order) ---------
namespace simd {
// C (=|+=) A B on the current path (gemm_portable's arguments).
inline void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb,
                 float* C, int64_t ldc, bool accumulate) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
#ifdef LADDER_TILE_SIMD_X86
  switch (path()) {
    case Path::avx512: return x86::gemm512(M, N, K, A, ars, aks, B, ldb, C, ldc, accumulate);
    case Path::avx2: return x86::gemm256(M, N, K, A, ars, aks, B, ldb, C, ldc, accumulate);
    case Path::portable: break;
  }
#endif
  gemm_portable(M, N, K, A, ars, aks, B, ldb, C, ldc, accumulate);
}

// C = A B^T (A [M, K], B [N, K]): B^T packed into a per-thread buffer (a copy: 8 x 8 blocks on the vector
// paths), then gemm.
inline void nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
               int64_t ldc) {
  thread_local std::vector<float> bt;
  const int64_t ldt = (N + 15) / 16 * 16;
  if (bt.size() < static_cast<size_t>(K * ldt)) bt.resize(static_cast<size_t>(K * ldt));
#ifdef LADDER_TILE_SIMD_X86
  if (path() != Path::portable)
    x86::transpose8(N, K, B, ldb, bt.data(), ldt);
  else
#endif
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) bt[static_cast<size_t>(k * ldt + j)] = B[j * ldb + k];
  gemm(M, N, K, A, lda, 1, bt.data(), ldt, C, ldc, false);
}

// s[j] = e^{s[j] - m} for j < n; returns their sum.
inline float exp_sum(float* s, int64_t n, float m) {
#ifdef LADDER_TILE_SIMD_X86
  switch (path()) {
    case Path::avx512: return x86::exp_sum512(s, n, m);
    case Path::avx2: return x86::exp_sum256(s, n, m);
    case Path::portable: break;
  }
#endif
  return exp_sum_portable(s, n, m);
}
}  // namespace simd

// C = A B^T
// float: simd::, the fixed order of tile_simd.hpp; double: Eigen's GEMM.
template <class T>
void nt(In<T> A, In<T> B, Out<T> C) {
  if constexpr (std::is_same_v<T, float>)
    if (!simd::eigen_for_bench())
      return simd::nt(C.rows(), C.cols(), A.cols(), A.data(), A.outerStride(), B.data(), B.outerStride(), C.data(),
                      C.outerStride());
  C.noalias() = A * B.transpose();
}
// C += A B
template <class T>
void nn_add(In<T> A, In<T> B, Out<T> C) {
  if constexpr (std::is_same_v<T, float>)
    if (!simd::eigen_for_bench())
      return simd::gemm(C.rows(), C.cols(), A.cols(), A.data(), A.outerStride(), 1, B.data(), B.outerStride(), C.data(),
                        C.outerStride(), true);
  C.noalias() += A * B;
}
// C += alpha (A B); float: acc_ij = (A B)_ij in the fixed order, then C_ij + alpha acc_ij (a product, a sum)
template <class T>
void nn_add(T alpha, In<T> A, In<T> B, Out<T> C) {
  if constexpr (std::is_same_v<T, float>) {
    if (!simd::eigen_for_bench()) {
      thread_local std::vector<float> acc;
      const int64_t M = C.rows(), N = C.cols();
      if (acc.size() < static_cast<size_t>(M * N)) acc.resize(static_cast<size_t>(M * N));
      simd::gemm(M, N, A.cols(), A.data(), A.outerStride(), 1, B.data(), B.outerStride(), acc.data(), N, false);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C(i, j) = C(i, j) + alpha * acc[static_cast<size_t>(i * N + j)];
      return;
    }
  }
  C.noalias() += alpha * (A * B);
}
// C += A^T B (float: A read transposed in place, A(r, k) = A[k lda + r])
template <class T>
void tn_add(In<T> A, In<T> B, Out<T> C) {
  if constexpr (std::is_same_v<T, float>)
    if (!simd::eigen_for_bench())
      return simd::gemm(C.rows(), C.cols(), A.rows(), A.data(), 1, A.outerStride(), B.data(), B.outerStride(), C.data(),
                        C.outerStride(), true);
  C.noalias() += A.transpose() * B;
}

// The row softmax of the tiled forward, per row of the S tile (raw row pointers: a row of a row-major
// tile is contiguous). exp_sum in float is tile_simd.hpp's (a fixed e^x and a 16-lane sum: the same bits at
// every vector width); otherwise both are Eigen's packet code -- the same pexp that `.exp()` of an array uses --
// written as loops so that (a) the maximum runs on four accumulators: a single one is bound by the
// latency of vmaxps, and a 256-wide row spent ~2 us per tile there; (b) P = e^{s - m} and its sum are
// one pass over the row instead of two. One 256 x 256 float tile at d = 64, one AVX-512 core: the row
// softmax went from 30 us to 26 us (the exps alone are 20 us), against 122 us for the two products.
// row_max: max(s[0..n)); -inf for n = 0.
template <class T>
T row_max(const T* s, int64_t n) {
  using P = typename Eigen::internal::packet_traits<T>::type;
  constexpr int64_t k = Eigen::internal::packet_traits<T>::size;
  namespace ei = Eigen::internal;
  T m = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  if constexpr (k > 1) {
    P a0 = ei::pset1<P>(m), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 * k <= n; i += 4 * k) {
      a0 = ei::pmax(a0, ei::ploadu<P>(s + i));
      a1 = ei::pmax(a1, ei::ploadu<P>(s + i + k));
      a2 = ei::pmax(a2, ei::ploadu<P>(s + i + 2 * k));
      a3 = ei::pmax(a3, ei::ploadu<P>(s + i + 3 * k));
    }
    for (; i + k <= n; i += k) a0 = ei::pmax(a0, ei::ploadu<P>(s + i));
    m = ei::predux_max(ei::pmax(ei::pmax(a0, a1), ei::pmax(a2, a3)));
  }
  for (; i < n; ++i) m = std::max(m, s[i]);
  return m;
}
// exp_sum: s[j] = e^{s[j] - m} in place for j < n; returns their sum.
template <class T>
T exp_sum(T* s, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>)
    if (!simd::eigen_for_bench()) return simd::exp_sum(s, n, m);
  using P = typename Eigen::internal::packet_traits<T>::type;
  constexpr int64_t k = Eigen::internal::packet_traits<T>::size;
  namespace ei = Eigen::internal;
  T sum = 0;
  int64_t i = 0;
  if constexpr (k > 1) {
    const P mm = ei::pset1<P>(m);
    P a0 = ei::pset1<P>(T(0)), a1 = a0;
    for (; i + 2 * k <= n; i += 2 * k) {
      const P e0 = ei::pexp(ei::psub(ei::ploadu<P>(s + i), mm));
      const P e1 = ei::pexp(ei::psub(ei::ploadu<P>(s + i + k), mm));
      ei::pstoreu(s + i, e0);
      ei::pstoreu(s + i + k, e1);
      a0 = ei::padd(a0, e0);
      a1 = ei::padd(a1, e1);
    }
    for (; i + k <= n; i += k) {
      const P e = ei::pexp(ei::psub(ei::ploadu<P>(s + i), mm));
      ei::pstoreu(s + i, e);
      a0 = ei::padd(a0, e);
    }
    sum = ei::predux(ei::padd(a0, a1));
  }
  for (; i < n; ++i) sum += (s[i] = std::exp(s[i] - m));
  return sum;
}

#define LADDER_TILE_OPS(EXTERN, T)                  \
  EXTERN template void nt<T>(In<T>, In<T>, Out<T>);     \
  EXTERN template void nn_add<T>(In<T>, In<T>, Out<T>); \
  EXTERN template void nn_add<T>(T, In<T>, In<T>, Out<T>); \
  EXTERN template void tn_add<T>(In<T>, In<T>, Out<T>);
#ifdef LADDER_LAB_READY
LADDER_TILE_OPS(extern, float)
LADDER_TILE_OPS(extern, double)
#endif

}  // namespace ladder::attention::tile
