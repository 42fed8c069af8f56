// tests/simt/kernels_planted.cu -- three kernels, each with one __syncthreads that can be removed
// (planted = true). The tests assert which schedule (forward, reverse, random) and TSan catch each
// removal, which proves the harness can fail -- the same check the reviewer applies to the stage
// kernels by deleting their barriers.
#include <simt.hpp>

#include <vector>

#include "kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {
namespace {

using ladder::cuda::DeviceBuffer;

constexpr int block = 256;

__global__ void warp_partials_kernel(const int* x, int cols, int* sums, bool planted) {
  __shared__ int partial[block / 32];
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int* row = x + blockIdx.x * cols;
  int acc = 0;
  for (int c = t; c < cols; c += block) acc += row[c];
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) partial[warp] = acc;
  if (!planted) __syncthreads();
  if (warp == 0) {
    int v = lane < block / 32 ? partial[lane] : 0;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) sums[blockIdx.x] = v;
  }
}

// C (m x n) = A (m x k) B (k x n) with tile x tile blocks; both tiles in dynamic shared memory.
__global__ void tiled_matmul_kernel(const float* a, const float* b, float* c, int m, int n, int k, bool planted) {
  SIMT_DYNAMIC_SHARED(float, smem);
  const int tile = blockDim.x, tx = threadIdx.x, ty = threadIdx.y;
  float* as = smem;
  float* bs = smem + tile * tile;
  const int row = blockIdx.y * tile + ty, col = blockIdx.x * tile + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += tile) {
    as[ty * tile + tx] = row < m && k0 + tx < k ? a[row * k + k0 + tx] : 0.0f;
    bs[ty * tile + tx] = col < n && k0 + ty < k ? b[(k0 + ty) * n + col] : 0.0f;
    __syncthreads();
    for (int i = 0; i < tile; ++i) acc += as[ty * tile + i] * bs[i * tile + tx];
    if (!planted) __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = acc;
}

__global__ void neighbour_read_kernel(const int* in, int* out, bool planted) {
  __shared__ int s[block];
  const int i = blockIdx.x * block + threadIdx.x;
  s[threadIdx.x] = in[i];
  if (!planted) __syncthreads();
  out[i] = threadIdx.x > 0 ? s[threadIdx.x - 1] : -1;
}

}  // namespace

bool warp_partials(bool planted) {
  const int rows = 8, cols = 1000;
  std::vector<int> x(rows * cols), expected(rows, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      x[r * cols + c] = (r + 1) * (c % 13 + 1);
      expected[r] += x[r * cols + c];
    }
  DeviceBuffer<int> d_x(x), sums(rows);
  simt::launch(warp_partials_kernel, dim3(rows), dim3(block), 0, d_x.data(), cols, sums.data(), planted);
  return sums.to_host() == expected;
}

bool tile_overwrite(bool planted) {
  const int m = 40, n = 24, k = 48, tile = 8;
  std::vector<float> a(m * k), b(k * n), expected(m * n, 0.0f);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 5 - 2);  // small integers: exact sums
  for (int i = 0; i < k * n; ++i) b[i] = static_cast<float>(i % 7 - 3);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) expected[i * n + j] += a[i * k + p] * b[p * n + j];
  DeviceBuffer<float> d_a(a), d_b(b), c(m * n);
  simt::launch(tiled_matmul_kernel, dim3(n / tile, m / tile), dim3(tile, tile), 2 * tile * tile * sizeof(float),
               d_a.data(), d_b.data(), c.data(), m, n, k, planted);
  return c.to_host() == expected;
}

bool neighbour_read(bool planted) {
  const int blocks = 4;
  std::vector<int> in(blocks * block), expected(blocks * block);
  for (int i = 0; i < blocks * block; ++i) {
    in[i] = 3 * i + 1;
    expected[i] = i % block ? in[i - 1] : -1;
  }
  DeviceBuffer<int> d_in(in), out(blocks * block);
  simt::launch(neighbour_read_kernel, dim3(blocks), dim3(block), 0, d_in.data(), out.data(), planted);
  return out.to_host() == expected;
}

}  // namespace simt_tests
