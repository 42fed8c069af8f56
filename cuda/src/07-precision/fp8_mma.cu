// cuda/src/07-precision/fp8_mma.cu -- stage 07: the FP8 block-scaled GEMM on tensor cores (mma.sync m16n8k32
// e4m3 -> f32, promoted every nc elements; fp8_mma.cuh: the kernel, its tiling, chunks and arithmetic) and the two
// copies it needs: the codes [rows, K] into rows of Kp = K rounded up to 16 (zero codes after K), and the weight's
// [K, N] codes into [N, Kp]. Compiled by nvcc for sm_80, sm_89 and sm_90 (nvcc_check: the E4M3 mma needs sm_89,
// the sm_80 object must still compile) and by g++ through cuda/simt.
#include "fp8_mma.cuh"
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision {
namespace {

constexpr int kF8CopyTile = 32, kF8CopyRows = 8;  // the copies: a 32 x 32 tile per block of 32 x 8 threads

// out [rows, kp] = in [rows, k] with zero codes in columns k .. kp - 1 (row-wise, coalesced).
__global__ void fp8_pad_kernel(const uint8_t* in, int rows, int k, int kp, uint8_t* out) {
  const int c = blockIdx.x * kF8CopyTile + threadIdx.x, r0 = blockIdx.y * kF8CopyTile;
  for (int r = r0 + static_cast<int>(threadIdx.y); r < rows && r < r0 + kF8CopyTile; r += kF8CopyRows)
    if (c < kp) out[static_cast<int64_t>(r) * kp + c] = c < k ? in[static_cast<int64_t>(r) * k + c] : uint8_t{0};
}

// wt [N, kp] = wq [K, N]^T, zero codes at k >= K: a 32 x 32 tile through shared memory (reads and writes along
// rows); the +4 padding keeps a column read of the tile off a single bank.
__global__ void fp8_transpose_kernel(const uint8_t* wq, int K, int N, int kp, uint8_t* wt) {
  __shared__ uint8_t tile[kF8CopyTile][kF8CopyTile + 4];
  const int k0 = blockIdx.y * kF8CopyTile, n0 = blockIdx.x * kF8CopyTile;
  for (int r = threadIdx.y; r < kF8CopyTile; r += kF8CopyRows) {
    const int k = k0 + r, n = n0 + threadIdx.x;
    tile[r][threadIdx.x] = k < K && n < N ? wq[static_cast<int64_t>(k) * N + n] : uint8_t{0};
  }
  __syncthreads();  // the whole tile is in before any thread reads a column of it
  for (int r = threadIdx.y; r < kF8CopyTile; r += kF8CopyRows) {
    const int n = n0 + r, k = k0 + threadIdx.x;
    if (k < kp && n < N) wt[static_cast<int64_t>(n) * kp + k] = tile[threadIdx.x][r];
  }
}

unsigned tiles(int n) { return static_cast<unsigned>((n + kF8CopyTile - 1) / kF8CopyTile); }

}  // namespace

namespace detail {

static_assert(kFp8MmaTile == kF8Tile, "precision_kernels.hpp states the kernel's tile for the host's grid checks");

void launch_fp8_pad(const uint8_t* in, int rows, int k, int kp, uint8_t* out) {
  simt::launch(fp8_pad_kernel, dim3(tiles(kp), tiles(rows)), dim3(kF8CopyTile, kF8CopyRows), 0, in, rows, k, kp, out);
}

void launch_fp8_transpose(const uint8_t* wq, int K, int N, int kp, uint8_t* wt) {
  simt::launch(fp8_transpose_kernel, dim3(tiles(N), tiles(kp)), dim3(kF8CopyTile, kF8CopyRows), 0, wq, K, N, kp, wt);
}

void launch_fp8_mma(const uint8_t* a, const uint8_t* wt, const float* xs, const float* ws, int M, int K, int N, int nc,
                    float* y) {
  const dim3 grid(static_cast<unsigned>((N + kF8Tile - 1) / kF8Tile),
                  static_cast<unsigned>((M + kF8Tile - 1) / kF8Tile));
  simt::launch(fp8_mma_kernel<F8Plant::none>, grid, dim3(kF8Threads), 0, a, wt, xs, ws, M, N, K, nc, y);
}

}  // namespace detail
}  // namespace ladder::cuda::precision
