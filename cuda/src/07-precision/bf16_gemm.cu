// cuda/src/07-precision/bf16_gemm.cu -- stage 07: the bf16 GEMM on tensor cores, C = A B^T with A [M, K] and
// B [N, K] bf16 and C fp32 (mma.sync m16n8k16, fp32 accumulation). The kernel, its tile configurations,
// pipeline, shared layout and accumulation order: bf16_gemm.cuh. Compiled by nvcc for sm_80 / sm_90
// (nvcc_check) and by g++ through cuda/simt, where ldmatrix / mma are warp collectives and cp.async is deferred
// to its wait.
#include "bf16_gemm.cuh"
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision::detail {

namespace {

template <class C>
bool launch(const uint16_t* a, const uint16_t* b, int M, int N, int K, float* c) {
  const dim3 grid(static_cast<unsigned>((N + C::kBN - 1) / C::kBN), static_cast<unsigned>((M + C::kBM - 1) / C::kBM));
  if constexpr (C::kDynamic) {
    // The opt-in past 48 KiB of dynamic shared memory (set on every launch: cheap, and idempotent).
    if (cudaFuncSetAttribute(bf16_gemm_kernel<Plant::none, C>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             C::kSmemBytes) != cudaSuccess)
      return false;
    simt::launch(bf16_gemm_kernel<Plant::none, C>, grid, dim3(C::kThreads), C::kSmemBytes, a, b, M, N, K, c);
  } else {
    simt::launch(bf16_gemm_kernel<Plant::none, C>, grid, dim3(C::kThreads), 0, a, b, M, N, K, c);
  }
  return true;
}

}  // namespace

static_assert(kBf16GemmTile == kBfTile, "precision_kernels.hpp states the default tile for the host's grid checks");

bool launch_bf16_gemm(const uint16_t* a, const uint16_t* b, int M, int N, int K, float* c, Bf16GemmConfig config) {
  switch (config) {
    case Bf16GemmConfig::tile128x128: return launch<BfDefault>(a, b, M, N, K, c);
    case Bf16GemmConfig::tile128x256: return launch<Bf128x256>(a, b, M, N, K, c);
    case Bf16GemmConfig::tile256x128: return launch<Bf256x128>(a, b, M, N, K, c);
    case Bf16GemmConfig::tile128x256_k64: return launch<Bf128x256k64>(a, b, M, N, K, c);
  }
  return false;  // not a configuration: the host refuses it first
}

static_assert(bf16_gemm_block_rows(Bf16GemmConfig::tile128x128) == BfDefault::kBM &&
                  bf16_gemm_block_rows(Bf16GemmConfig::tile128x256) == Bf128x256::kBM &&
                  bf16_gemm_block_rows(Bf16GemmConfig::tile256x128) == Bf256x128::kBM &&
                  bf16_gemm_block_rows(Bf16GemmConfig::tile128x256_k64) == Bf128x256k64::kBM,
              "precision_kernels.hpp states each configuration's block rows (the host's grid check)");
static_assert(bf16_gemm_smem_bytes(Bf16GemmConfig::tile128x128) == BfDefault::kSmemBytes &&
                  bf16_gemm_smem_bytes(Bf16GemmConfig::tile128x256) == Bf128x256::kSmemBytes &&
                  bf16_gemm_smem_bytes(Bf16GemmConfig::tile256x128) == Bf256x128::kSmemBytes &&
                  bf16_gemm_smem_bytes(Bf16GemmConfig::tile128x256_k64) == Bf128x256k64::kSmemBytes,
              "precision_kernels.hpp states each configuration's shared memory (the host's messages)");

}  // namespace ladder::cuda::precision::detail
