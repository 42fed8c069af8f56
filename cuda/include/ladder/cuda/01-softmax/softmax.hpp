// ladder/cuda/01-softmax/softmax.hpp -- host API of the stage-01 CUDA rungs (cuda/src/01-softmax/softmax.cu).
//
// Every function takes DEVICE pointers (ladder::cuda::DeviceBuffer<float>::data()) to x and y, both
// [rows, cols] row-major float32, launches its kernel(s) and returns; call ladder::cuda::sync() before
// reading y on a GPU (under SIMT the launch has finished when the function returns). Results match
// the references in ladder/01-softmax/softmax.hpp: naive overflows, an all -inf row gives zeros (v2-v4).
// Bad shapes throw ladder::Error naming the parameter.
#pragma once
#include <cstdint>

namespace ladder::cuda::softmax {

// v1: one thread per row, the naive two-pass loop (overflows by design, like the reference).
void v1_naive(const float* x, float* y, int64_t rows, int64_t cols);
// v2: one block per row; max and sum-of-exp reduced through warp shuffles and shared memory.
void v2_safe(const float* x, float* y, int64_t rows, int64_t cols);
// v3: one block per row; per-thread (m, d) pairs merged by the online rule (warp shuffles, then
// shared memory), one pass over x for (m, d) and one to normalise.
void v3_online(const float* x, float* y, int64_t rows, int64_t cols);
// v4: one warp per row (short rows): the (m, d) merge through shuffles only, no shared memory.
void v4_online_warp(const float* x, float* y, int64_t rows, int64_t cols);

// The launches behind the functions above, unchecked (cuda/src/01-softmax/softmax.cu; the .cu includes no
// fmt, which nvcc 13 cannot compile); call the checked functions (cuda/src/01-softmax/softmax_host.cpp).
namespace detail {
void launch_v1_naive(const float* x, float* y, int rows, int cols);
void launch_v2_safe(const float* x, float* y, int rows, int cols);
void launch_v3_online(const float* x, float* y, int rows, int cols);
void launch_v4_online_warp(const float* x, float* y, int rows, int cols);
}  // namespace detail

inline constexpr int kBlockThreads = 256;  // v2, v3
// v1 has one thread per row, so the rows are all the threads it has: one warp per block spreads them
// over the most multiprocessors (16384 rows -> 512 blocks; 128-thread blocks gave 128 blocks, fewer
// than an H100's 132 SMs, 4 warps on each of 128 SMs and none on the rest).
inline constexpr int kRowsPerBlockV1 = 32;
inline constexpr int kWarpsPerBlockV4 = 4;

}  // namespace ladder::cuda::softmax
