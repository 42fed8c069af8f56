// cuda/src/07-precision/a8w8_mma.cu -- stage 07: the A8W8 GEMM on tensor cores (mma.sync m16n8k32 s8 -> s32)
// and the [K, N] -> [N, K] weight copy it needs. The kernels, their tiling, pipeline, layouts and why the sums
// are exact: a8w8_mma.cuh. Compiled by nvcc for sm_80 / sm_90 (nvcc_check) and by g++ through cuda/simt.
#include "a8w8_mma.cuh"
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision {
namespace {

constexpr int kI8TransposeTile = 32, kI8TransposeRows = 8;  // the [K, N] -> [N, K] copy: 32 x 32 per 32 x 8 block

// wt [N, K] = wq [K, N]^T, bytes: a 32 x 32 tile per block of 32 x 8 threads through shared memory (reads and
// writes along rows); the +4 padding keeps a column read of the tile off a single bank.
__global__ void a8w8_transpose_kernel(const int8_t* wq, int K, int N, int8_t* wt) {
  __shared__ int8_t tile[kI8TransposeTile][kI8TransposeTile + 4];
  const int k0 = blockIdx.y * kI8TransposeTile, n0 = blockIdx.x * kI8TransposeTile;
  for (int r = threadIdx.y; r < kI8TransposeTile; r += kI8TransposeRows) {
    const int k = k0 + r, n = n0 + threadIdx.x;
    if (k < K && n < N) tile[r][threadIdx.x] = wq[static_cast<int64_t>(k) * N + n];
  }
  __syncthreads();  // the whole tile is in before any thread reads a column of it
  for (int r = threadIdx.y; r < kI8TransposeTile; r += kI8TransposeRows) {
    const int n = n0 + r, k = k0 + threadIdx.x;
    if (k < K && n < N) wt[static_cast<int64_t>(n) * K + k] = tile[threadIdx.x][r];
  }
}

}  // namespace

namespace detail {

static_assert(kA8W8MmaTile == kI8Tile, "precision_kernels.hpp states the kernel's tile for the host's grid checks");

void launch_a8w8_transpose(const int8_t* wq, int K, int N, int8_t* wt) {
  const dim3 grid(static_cast<unsigned>((N + kI8TransposeTile - 1) / kI8TransposeTile),
                  static_cast<unsigned>((K + kI8TransposeTile - 1) / kI8TransposeTile));
  simt::launch(a8w8_transpose_kernel, grid, dim3(kI8TransposeTile, kI8TransposeRows), 0, wq, K, N, wt);
}

void launch_a8w8_mma(const int8_t* a, const int8_t* wt, const float* xs, const float* ws, int M, int K, int N,
                     int32_t* acc, float* y) {
  const dim3 grid(static_cast<unsigned>((N + kI8Tile - 1) / kI8Tile),
                  static_cast<unsigned>((M + kI8Tile - 1) / kI8Tile));
  simt::launch(a8w8_mma_kernel<I8Plant::none>, grid, dim3(kI8Threads), 0, a, wt, xs, ws, M, N, K, acc, y);
}

}  // namespace detail
}  // namespace ladder::cuda::precision
