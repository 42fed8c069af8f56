// tests/03-mla/test_mla_cuda_planted.cu -- a deliberately broken copy of the stage-03 GEMM kernel
// (cuda/src/03-mla/mla_gemm.cu, gemm_batched) with its first __syncthreads removed: a thread multiplies tile
// entries its neighbours have not loaded yet. The test proves the comparison with Eigen catches it under
// every SIMT schedule; it is skipped in the TSan build, where the race itself is the report.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <cmath>
#include <vector>

#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

constexpr int T = 16;

// C [M, N] = A [M, K] B [N, K]^T, one 16 x 16 tile per block, as gemm_batched without batching.
__global__ void gemm_missing_barrier(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[T][T + 1];
  __shared__ float Bs[T][T + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, m0 = blockIdx.y * T, n0 = blockIdx.x * T;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += T) {
    As[ty][tx] = (m0 + ty < M && k0 + tx < K) ? A[(m0 + ty) * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (n0 + ty < N && k0 + tx < K) ? B[(n0 + ty) * K + k0 + tx] : 0.0f;
    // (the __syncthreads that belongs here is missing)
    for (int kk = 0; kk < T; ++kk) acc += As[ty][kk] * Bs[tx][kk];
    __syncthreads();
  }
  if (m0 + ty < M && n0 + tx < N) C[(m0 + ty) * N + n0 + tx] = acc;
}

}  // namespace

TEST_CASE("planted bug: the GEMM kernel without its first barrier is wrong under every schedule") {
  const int M = 17, N = 33, K = 40;
  ladder::Rng rng(4);
  ladder::Mat<float> A(M, K), B(N, K);
  for (int64_t i = 0; i < A.size(); ++i) A.data()[i] = static_cast<float>(rng.normal());
  for (int64_t i = 0; i < B.size(); ++i) B.data()[i] = static_cast<float>(rng.normal());
  const ladder::Mat<float> want = A * B.transpose();
  ladder::test::each_schedule([&](simt::Schedule s) {
    ladder::cuda::DeviceBuffer<float> dA(A.data(), size_t(A.size())), dB(B.data(), size_t(B.size())), dC(size_t(M * N));
    simt::launch(gemm_missing_barrier, dim3((N + T - 1) / T, (M + T - 1) / T), dim3(T, T), 0, dA.data(), dB.data(),
                 dC.data(), M, N, K);
    const std::vector<float> got = dC.to_host();
    double err = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) err = std::max(err, std::abs(double(got[size_t(m * N + n)]) - double(want(m, n))));
    CAPTURE(static_cast<int>(s));
    CHECK(!(err < 1e-3));  // NaN (a poisoned, never-loaded entry) or a wrong sum
  });
}

#endif
