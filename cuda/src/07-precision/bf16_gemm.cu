// cuda/src/07-precision/bf16_gemm.cu -- stage 07: the bf16 GEMM on tensor cores, C = A B^T with A [M, K] and
// B [N, K] bf16 and C fp32 (mma.sync m16n8k16, fp32 accumulation). The kernel, its tiling, pipeline, shared
// layout and accumulation order: bf16_gemm.cuh. Compiled by nvcc for sm_80 / sm_90 (nvcc_check) and by g++
// through cuda/simt, where ldmatrix / mma are warp collectives and cp.async is deferred to its wait.
#include "bf16_gemm.cuh"
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision::detail {

static_assert(kBf16GemmTile == kBfTile, "precision_kernels.hpp states the kernel's tile for the host's grid checks");

void launch_bf16_gemm(const uint16_t* a, const uint16_t* b, int M, int N, int K, float* c) {
  const dim3 grid(static_cast<unsigned>((N + kBfTile - 1) / kBfTile),
                  static_cast<unsigned>((M + kBfTile - 1) / kBfTile));
  simt::launch(bf16_gemm_kernel<Plant::none>, grid, dim3(kBfThreads), 0, a, b, M, N, K, c);
}

}  // namespace ladder::cuda::precision::detail
