// cuda/src/02-attention/attention_bf16_pad.cuh -- stage 02: the copies that let tiled_bf16 take any head dim
// 1 <= d <= 128 (and inputs that are not 16-byte aligned). The tensor-core kernel (attention_bf16.cuh) has one
// instance per head dim D in {64, 128} and copies rows with 16-byte cp.async; any other call goes through
//   pad    Q, K, V [rows, d] -> zero-padded [rows, D] bf16 (D = 64 if d <= 64, else 128), 16-byte aligned,
//   the D kernel with the ORIGINAL scale (Dims.scale = the caller's p.scale, 1/sqrt(d) by default, not
//          1/sqrt(D)), writing O [rows, D] and L as it is,
//   unpad  O's first d columns back to the caller's [rows, d].
// Why that is exact: columns d .. D - 1 of Q and K are zeros, so they add exact zeros to every q_i . k_j (x + 0 = x
// in any rounding, and products of zeros are exact zeros): S, the softmax, P and L are what a d-wide kernel
// would compute. Columns d .. D - 1 of V are zeros, so O's columns d .. D - 1 come out 0 and are never read.
// The host side (buffers, order of launches): tiled_bf16 in attention_host.cpp; the launches: attention_bf16.cu.
// The templates live here so that tests/02-attention/test_attention_bf16_planted.cu can plant a mistake.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "attention_common.cuh"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

inline constexpr int kPadThreads = 256;
inline constexpr unsigned kPadMaxBlocks = 1024;  // grid-stride beyond: enough to fill a GPU, few SIMT fibers

// Planted mistakes (tests/02-attention/test_attention_bf16_planted.cu); the library runs PadPlant::none.
enum class PadPlant { none, pad_not_zeroed };

// dst [rows, D] = src [rows, d] with columns d .. D - 1 zero (bf16 +0: bits 0).
template <PadPlant Plant = PadPlant::none>
__global__ void pad_rows_bf16(const uint16_t* src, uint16_t* dst, size_t rows, int d, int D) {
  const size_t n = rows * size_t(D), stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const size_t r = e / size_t(D);
    const int c = int(e - r * size_t(D));
    if (c < d) dst[e] = src[r * size_t(d) + size_t(c)];
    else if constexpr (Plant != PadPlant::pad_not_zeroed) dst[e] = 0;  // planted: the pad left as it was
  }
}

// dst [rows, d] = the first d columns of src [rows, D].
__global__ void unpad_rows_f32(const float* src, float* dst, size_t rows, int d, int D) {
  const size_t n = rows * size_t(d), stride = size_t(gridDim.x) * blockDim.x;
  for (size_t e = size_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const size_t r = e / size_t(d);
    dst[e] = src[r * size_t(D) + (e - r * size_t(d))];
  }
}

inline dim3 pad_grid(size_t n) {
  const unsigned b = blocks_for(n, kPadThreads);
  return dim3(b == 0 ? 1u : (b < kPadMaxBlocks ? b : kPadMaxBlocks));
}

template <PadPlant Plant = PadPlant::none>
void launch_pad_bf16(const uint16_t* src, uint16_t* dst, size_t rows, int d, int D) {
  simt::launch(pad_rows_bf16<Plant>, pad_grid(rows * size_t(D)), dim3(kPadThreads), 0, src, dst, rows, d, D);
}

inline void launch_unpad_f32(const float* src, float* dst, size_t rows, int d, int D) {
  simt::launch(unpad_rows_f32, pad_grid(rows * size_t(d)), dim3(kPadThreads), 0, src, dst, rows, d, D);
}

}  // namespace
}  // namespace ladder::cuda::attention
