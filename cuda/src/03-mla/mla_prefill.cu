// cuda/src/03-mla/mla_prefill.cu -- stage 03 CUDA: the one kernel MLA's prefill adds (cuda/src/03-mla/mla_prefill.cpp).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla; + prefill: this file)
//
// The prefill's attention is stage 02's tiled kernel (cuda/src/02-attention/attention_tiled.cu, tiled_16 with
// d_v != d), which reads Q [H, n, d] and writes O [H, n, d_v], lse [H, n] head-major; the MLA projections read
// and write token-major rows [n, H, d]. swap_axes01 turns one into the other: out[j, i, :] = in[i, j, :].
// Compiled by nvcc for sm_80/sm_90 and by g++ through cuda/simt; no fmt here (nvcc 13 cannot compile it).
#include <stdint.h>

#include "mla_common.cuh"
#include "ladder/cuda/03-mla/mla_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::mla {
namespace {

// in [A, B, d] -> out [B, A, d], one element per thread of a grid-stride loop.
__global__ void swap_axes01(const float* in, int64_t A, int64_t B, int64_t d, float* out) {
  const int64_t n = A * B * d;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t / (B * d), j = (t / d) % B, c = t % d;
    out[(j * A + i) * d + c] = in[t];
  }
}

}  // namespace

namespace detail {

void launch_swap_axes01(const float* in, int64_t A, int64_t B, int64_t d, float* out) {
  simt::launch(swap_axes01, dim3(grid_for(A * B * d, 128)), dim3(128), 0, in, A, B, d, out);
}

}  // namespace detail
}  // namespace ladder::cuda::mla
