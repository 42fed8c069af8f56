// cuda/src/04-moe/moe_gemm.cu -- stage 04: the grouped GEMM (ragged_dot) with a tile scheduler.
//
// The host (moe_host.cpp, make_tiles) turns the group offsets into a flat list of output tiles
// (group g, 16 rows of g starting at row0, 16 columns starting at col0): an empty group contributes no
// tile and no group is padded to the largest, so the launch does exactly the routed work. One 16 x 16
// block per tile walks K in steps of 16 through shared memory: load A and B tiles, barrier, 16
// multiply-adds per thread, barrier (the next load must not overwrite a tile still being read).
// Rows past sum(group_sizes) are zeroed by a second kernel (ragged_dot's contract).
#include "ladder/cuda/04-moe/moe_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::moe {
namespace {

__global__ void grouped_gemm_kernel(const Tile* tiles, const float* lhs, int64_t K, const float* rhs, int64_t N,
                                    const int64_t* group_offsets, float* out) {
  __shared__ float As[kGemmTile][kGemmTile];
  __shared__ float Bs[kGemmTile][kGemmTile];
  const Tile tile = tiles[blockIdx.x];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = group_offsets[tile.group] + tile.row0 + ty;  // packed row of lhs / out
  const int64_t col = tile.col0 + tx;
  const bool row_ok = ty < tile.rows;  // tile.rows = rows of this tile (<= 16)
  const float* B = rhs + tile.group * K * N;
  float acc = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kGemmTile) {
    As[ty][tx] = (row_ok && k0 + tx < K) ? lhs[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();  // both tiles loaded before any thread reads them
    for (int kk = 0; kk < kGemmTile; ++kk) acc += As[ty][kk] * Bs[kk][tx];
    __syncthreads();  // every thread done with the tiles before the next step overwrites them
  }
  if (row_ok && col < N) out[row * N + col] = acc;
}

__global__ void zero_rows_kernel(float* out, int64_t from, int64_t to) {
  for (int64_t i = from + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < to; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = 0.0f;
}

}  // namespace

namespace detail {

void launch_grouped_gemm(const Tile* tiles, int64_t num_tiles, const float* lhs, int64_t K, const float* rhs,
                         int64_t N, const int64_t* group_offsets, float* out, int64_t zero_from, int64_t m) {
  if (num_tiles > 0)
    simt::launch(grouped_gemm_kernel, dim3(static_cast<unsigned>(num_tiles)), dim3(kGemmTile, kGemmTile), 0, tiles,
                 lhs, K, rhs, N, group_offsets, out);
  if (zero_from < m) {
    const int64_t n = (m - zero_from) * N;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    simt::launch(zero_rows_kernel, dim3(static_cast<unsigned>(blocks > 1024 ? 1024 : blocks)), dim3(kThreads), 0, out,
                 zero_from * N, m * N);
  }
}

}  // namespace detail
}  // namespace ladder::cuda::moe
