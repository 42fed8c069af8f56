// tests/07-precision/test_precision_cuda_planted.cu -- deliberately broken copies of the stage-07 dp4a GEMM
// kernel (cuda/src/07-precision/int8_gemm.cu): (1) the B words packed in the opposite byte order (k0 + 3 in byte
// 0), so byte i of an A word meets the wrong k of B; (2) the first __syncthreads removed, so a thread reads
// words its neighbours have not packed yet. The test proves the exact comparison of the int32 sums with
// gemm_s8s8s32 catches each: (1) in every schedule; (2) in every schedule as well (the order threads run in
// leaves some word unwritten for some reader). Skipped in the TSan build, where the race itself is the report.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <cstdint>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"
#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

constexpr int T = 16;  // kGemmTile == kGemmWords

template <bool reversed>
__device__ int pack4(const int8_t* p, int64_t stride, int valid) {
  unsigned w = 0;
  for (int i = 0; i < 4 && i < valid; ++i)
    w |= static_cast<unsigned>(static_cast<uint8_t>(p[i * stride])) << (8 * (reversed ? 3 - i : i));
  return static_cast<int>(w);
}

// bug 1: B's bytes reversed; bug 2: no barrier between packing and reading.
template <int bug>
__global__ void gemm_planted(const int8_t* a, const int8_t* b, int M, int K, int N, int32_t* acc) {
  __shared__ int As[T][T + 1];
  __shared__ int Bs[T][T + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
  int sum = 0;
  for (int k0 = 0; k0 < K; k0 += 4 * T) {
    const int ka = k0 + 4 * tx, kb = k0 + 4 * ty;
    As[ty][tx] = m < M && ka < K ? pack4<false>(a + static_cast<int64_t>(m) * K + ka, 1, K - ka) : 0;
    Bs[ty][tx] = n < N && kb < K ? pack4<bug == 1>(b + static_cast<int64_t>(kb) * N + n, N, K - kb) : 0;
    if (bug != 2) __syncthreads();
    for (int w = 0; w < T; ++w) sum = __dp4a(As[ty][w], Bs[w][tx], sum);
    __syncthreads();
  }
  if (m < M && n < N) acc[static_cast<int64_t>(m) * N + n] = sum;
}

}  // namespace

TEST_CASE("planted bugs: the dp4a GEMM with B's bytes reversed, or without its first barrier, is caught") {
  const int M = 17, K = 130, N = 33;
  ladder::Rng rng(4004);
  std::vector<int8_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
  for (int8_t& v : a) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(255)) - 127);
  for (int8_t& v : b) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(255)) - 127);
  std::vector<int32_t> want(static_cast<size_t>(M * N));
  ladder::precision::gemm_s8s8s32(a.data(), b.data(), want.data(), M, K, N);
  ladder::test::each_schedule([&](simt::Schedule) {
    ladder::cuda::DeviceBuffer<int8_t> da(a), db(b);
    for (int bug : {0, 1, 2}) {
      CAPTURE(bug);
      ladder::cuda::DeviceBuffer<int32_t> acc(static_cast<size_t>(M * N));
      const dim3 grid((N + T - 1) / T, (M + T - 1) / T), block(T, T);
      if (bug == 0) simt::launch(gemm_planted<0>, grid, block, 0, da.data(), db.data(), M, K, N, acc.data());
      if (bug == 1) simt::launch(gemm_planted<1>, grid, block, 0, da.data(), db.data(), M, K, N, acc.data());
      if (bug == 2) simt::launch(gemm_planted<2>, grid, block, 0, da.data(), db.data(), M, K, N, acc.data());
      CHECK((acc.to_host() == want) == (bug == 0));  // the unbroken copy passes: the harness can tell them apart
    }
  });
}

#endif
