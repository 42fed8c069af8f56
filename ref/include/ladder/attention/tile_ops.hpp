// ladder/attention/tile_ops.hpp -- the tile products of the tiled rungs (tiled.hpp, recompute.hpp):
// S = Q_i K_j^T, O_i += P V_j, dV_j += P^T dO_i, dQ_i += scale dS K_j, ...
//
// Each is the same Eigen product expression the rungs wrote inline (same kernels, same blocking, same
// bits), behind a function on row-major tile views whose float and double instantiations the library
// compiles once (ref/src/attention_tile_ops.cpp). In a lab build (LADDER_LAB_BUILD, every unit of
// scripts/lab's build) `extern template` below keeps every other unit from instantiating them: Eigen's
// GEMM is most of the compile time of a unit that uses it, so lab 02's student units
// (ref/src/lab/02_attention_*.cpp) compile only the student's row loops and a save is rebuilt in a few
// seconds. Plain Eigen expressions in their place give the same results, only compile slower. Outside a
// lab build they are ordinary templates, instantiated where used: a header-only user (ladder::ref, a
// notebook, another T) needs no library.
#pragma once
#include "ladder/core/eigen.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention::tile {

// The width of the tiled rungs' buffers for head dim d: d rounded up to a whole 64-byte line (16 floats,
// 8 doubles), the columns past d kept at zero. Eigen's GEMM kernels work in whole SIMD vectors and
// handle a ragged edge slowly: O_i += P V_j with an output 111 wide ran at 0.81x the rate of one 112
// wide (115 vs 142 GFLOP/s, one AVX-512 core, 256 x 256 tiles). Zero columns in Q_i (or K_j) add
// exactly 0 to a score, zero columns in the right-hand factor keep the product's extra columns at 0,
// and only the first d columns are stored. FlashAttention-2's interface pads the head dim the same way
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

// C = A B^T
template <class T>
void nt(In<T> A, In<T> B, Out<T> C) {
  C.noalias() = A * B.transpose();
}
// C += A B
template <class T>
void nn_add(In<T> A, In<T> B, Out<T> C) {
  C.noalias() += A * B;
}
// C += alpha (A B)
template <class T>
void nn_add(T alpha, In<T> A, In<T> B, Out<T> C) {
  C.noalias() += alpha * (A * B);
}
// C += A^T B
template <class T>
void tn_add(In<T> A, In<T> B, Out<T> C) {
  C.noalias() += A.transpose() * B;
}

#define LADDER_TILE_OPS(EXTERN, T)                  \
  EXTERN template void nt<T>(In<T>, In<T>, Out<T>);     \
  EXTERN template void nn_add<T>(In<T>, In<T>, Out<T>); \
  EXTERN template void nn_add<T>(T, In<T>, In<T>, Out<T>); \
  EXTERN template void tn_add<T>(In<T>, In<T>, Out<T>);
#ifdef LADDER_LAB_BUILD
LADDER_TILE_OPS(extern, float)
LADDER_TILE_OPS(extern, double)
#endif

}  // namespace ladder::attention::tile
