// tests/04-moe/test_moe_cuda_planted.cu -- deliberately broken copies of the stage-04 kernels: the grouped
// GEMM without the barrier after its tile loads, and the permutation histogram without the barrier
// after zeroing. The tests prove the comparisons that judge the real kernels catch them under SIMT's
// schedules; skipped in the TSan build, where the race itself is the report.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <vector>

#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/04-moe/moe.hpp"
#include "ladder/04-moe/moe.hpp"

#if !defined(SIMT_TSAN)

namespace {
using ladder::cuda::moe::Tile;
constexpr int kT = ladder::cuda::moe::kGemmTile;

__global__ void gemm_missing_barrier(const Tile* tiles, const float* lhs, int64_t K, const float* rhs, int64_t N,
                                     const int64_t* offsets, float* out) {
  __shared__ float As[kT][kT];
  __shared__ float Bs[kT][kT];
  const Tile tile = tiles[blockIdx.x];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = offsets[tile.group] + tile.row0 + ty, col = tile.col0 + tx;
  const bool row_ok = ty < tile.rows;  // tile.rows = rows of this tile (<= 16)
  const float* B = rhs + tile.group * K * N;
  float acc = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kT) {
    As[ty][tx] = (row_ok && k0 + tx < K) ? lhs[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    // (the __syncthreads that belongs here is missing)
    for (int kk = 0; kk < kT; ++kk) acc += As[ty][kk] * Bs[kk][tx];
    __syncthreads();
  }
  if (row_ok && col < N) out[row * N + col] = acc;
}

__global__ void histogram_missing_barrier(const int64_t* keys, int64_t n, int64_t G, int64_t* counts) {
  SIMT_DYNAMIC_SHARED(int, hist);
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) hist[g] = 0;
  // (the __syncthreads that belongs here is missing)
  const int64_t a = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (a < n) atomicAdd(&hist[keys[a]], 1);
  __syncthreads();
  for (int64_t g = threadIdx.x; g <= G; g += blockDim.x) counts[blockIdx.x * (G + 1) + g] = hist[g];
}

}  // namespace

TEST_CASE("planted bug: the grouped GEMM without its load barrier is caught under every schedule") {
  ladder::Rng rng(46);
  const int64_t K = 40, N = 16, m = 32;
  std::vector<float> lhs(static_cast<size_t>(m * K)), rhs(static_cast<size_t>(2 * K * N));
  for (auto& v : lhs) v = float(rng.normal());
  for (auto& v : rhs) v = float(rng.normal());
  const std::vector<int64_t> gs{16, 16}, offsets{0, 16, 32};
  std::vector<float> want(static_cast<size_t>(m * N));
  ladder::moe::ragged_dot(lhs.data(), m, K, rhs.data(), 2, N, gs.data(), want.data());
  ladder::test::each_schedule([&](simt::Schedule) {
    const auto tiles = ladder::cuda::moe::make_tiles(gs, N);
    ladder::cuda::DeviceBuffer<Tile> dt(tiles);
    ladder::cuda::DeviceBuffer<float> dl(lhs), dr(rhs), out(static_cast<size_t>(m * N));
    ladder::cuda::DeviceBuffer<int64_t> doff(offsets);
    simt::launch(gemm_missing_barrier, dim3(unsigned(tiles.size())), dim3(kT, kT), 0, dt.data(), dl.data(), K,
                 dr.data(), N, doff.data(), out.data());
    const std::vector<float> got = out.to_host();
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, double(std::abs(got[i] - want[i])));
    CHECK(!(err <= 1e-3));  // NaN (poisoned shared memory) or a wrong sum
  }, 1);
}

TEST_CASE("planted bug: the permutation histogram without its zeroing barrier miscounts under every schedule") {
  ladder::Rng rng(47);
  const int64_t n = 256, G = 4;
  std::vector<int64_t> keys(n);
  for (auto& k : keys) k = int64_t(rng.uniform_int(G + 1));
  const ladder::moe::Permutation want = ladder::moe::sort_by_key(keys, G);
  ladder::test::each_schedule([&](simt::Schedule) {
    ladder::cuda::DeviceBuffer<int64_t> dk(keys), counts(static_cast<size_t>(G + 1));
    simt::launch(histogram_missing_barrier, dim3(1), dim3(256), static_cast<size_t>(G + 1) * sizeof(int), dk.data(), n, G,
                 counts.data());
    const std::vector<int64_t> got = counts.to_host();
    CHECK(std::vector<int64_t>(got.begin(), got.end() - 1) != want.group_sizes);
  }, 1);
}

#endif
