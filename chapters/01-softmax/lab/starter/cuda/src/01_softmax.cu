// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// cuda/src/01_softmax.cu -- stage 01 CUDA rungs: the same algorithms as ladder/softmax.hpp.
//
//   01 softmax     naive -> safe -> online                                  <== this file
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Versions: v1_naive (thread per row), v2_safe (block per row, notes Alg. 2 with block reductions),
// v3_online (block per row, notes Alg. 3 with per-thread (m, d) pairs merged), v4_online_warp (warp
// per row, for short rows). Compiled by nvcc for sm_80/sm_90, and by g++ through cuda/simt to run on
// the CPU in the tests (SIMT_SCHEDULE=forward|reverse|random:N and TSan catch a missing barrier).
//
// The (m, d) merge (Milakov & Gimelshein 2018, eq. 4): two partial states over disjoint parts of a row
//   (m_a, d_a) (+) (m_b, d_b) = (m, d_a e^{m_a - m} + d_b e^{m_b - m}),  m = max(m_a, m_b)
// is associative and commutative, so threads may fold their elements in any order and the block may
// combine the threads' states in a tree -- the reason the online softmax parallelises.
#include <math.h>

#include "ladder/cuda/softmax.hpp"
#include "simt.hpp"

namespace ladder::cuda::softmax {
namespace {

struct MD {
  float m;  // running max
  float d;  // running denominator, sum of e^{x - m}
};

__device__ __forceinline__ MD md_merge(MD a, MD b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return MD{-INFINITY, 0.0f};  // both empty (or all -inf): e^{-inf - (-inf)} is NaN
  return MD{m, a.d * expf(a.m - m) + b.d * expf(b.m - m)};
}

// Butterfly reductions over the 32 lanes of a warp: every lane ends with the warp's value.
__device__ __forceinline__ MD warp_merge(MD v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MD other{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.d, offset)};
    v = md_merge(v, other);
  }
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// v1: thread r owns row r: d = sum_j e^{x_j}; y_i = e^{x_i} / d.
__global__ void softmax_v1_naive(const float* x, float* y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + (size_t)r * cols;
  float* yr = y + (size_t)r * cols;
  float d = 0.0f;
  for (int j = 0; j < cols; ++j) d += expf(xr[j]);
  for (int i = 0; i < cols; ++i) yr[i] = expf(xr[i]) / d;
}

// v2: block per row. Alg. 2 lines 1-4 (max) and 5-8 (sum) are block reductions: each thread folds a
// strided slice, warps reduce by shuffles, warp 0 reduces the warps' partials from shared memory.
__global__ void softmax_v2_safe(const float* x, float* y, int cols) {
  __shared__ float s_part[kBlockThreads / 32];
  __shared__ float s_max, s_sum;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;

  // TODO(lab: v2_safe): Alg. 2 as a block: the max reduction, the sum-of-exp reduction (both through warp shuffles and shared memory, with the barriers they need), then the normalise loop; an all -inf row gives zeros.
}

// v3: block per row, Alg. 3: each thread runs the online recurrence over its strided slice, the
// (m, d) states merge through shuffles and shared memory, then one normalise pass.
__global__ void softmax_v3_online(const float* x, float* y, int cols) {
  __shared__ MD s_part[kBlockThreads / 32];
  __shared__ MD s_row;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;

  // TODO(lab: v3_online): Alg. 3 as a block: each thread folds its strided elements into an (m, d) pair with the online recurrence, the pairs merge with md_merge through warp shuffles and shared memory (with the barriers they need), then the normalise loop.
}

// v4: warp per row. Lane l folds elements l, l+32, ...; the warp merges by shuffles, and every lane
// already holds the row's (m_V, d_V): no shared memory, no __syncthreads.
__global__ void softmax_v4_online_warp(const float* x, float* y, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps exit together, so the full-mask shuffles below stay legal
  const float* xr = x + (size_t)r * cols;
  float* yr = y + (size_t)r * cols;
  MD md{-INFINITY, 0.0f};
  for (int j = lane; j < cols; j += 32) md = md_merge(md, MD{xr[j], 1.0f});
  md = warp_merge(md);
  for (int i = lane; i < cols; i += 32) yr[i] = md.m == -INFINITY ? 0.0f : expf(xr[i] - md.m) / md.d;
}

}  // namespace

namespace detail {

void launch_v1_naive(const float* x, float* y, int rows, int cols) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlockV1 - 1) / kRowsPerBlockV1);
  simt::launch(softmax_v1_naive, dim3(blocks), dim3(kRowsPerBlockV1), 0, x, y, rows, cols);
}

void launch_v2_safe(const float* x, float* y, int rows, int cols) {
  simt::launch(softmax_v2_safe, dim3(static_cast<unsigned>(rows)), dim3(kBlockThreads), 0, x, y, cols);
}

void launch_v3_online(const float* x, float* y, int rows, int cols) {
  simt::launch(softmax_v3_online, dim3(static_cast<unsigned>(rows)), dim3(kBlockThreads), 0, x, y, cols);
}

void launch_v4_online_warp(const float* x, float* y, int rows, int cols) {
  const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlockV4 - 1) / kWarpsPerBlockV4);
  simt::launch(softmax_v4_online_warp, dim3(blocks), dim3(32 * kWarpsPerBlockV4), 0, x, y, rows, cols);
}

}  // namespace detail
}  // namespace ladder::cuda::softmax
