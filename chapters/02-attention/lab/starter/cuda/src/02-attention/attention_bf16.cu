// cuda/src/02-attention/attention_bf16.cu -- stage 02 CUDA rung tiled_bf16: the tiled forward in bf16 on tensor
// cores, FA2's order (the kernel and its design notes: attention_bf16.cuh). Compiled by nvcc for sm_80/sm_90 and
// by g++ through cuda/simt (the mma, ldmatrix and cp.async emulated as warp collectives / deferred copies).
#include "attention_bf16.cuh"

namespace ladder::cuda::attention::detail {

void launch_tiled_bf16(const Dims& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L) {
  if (p.d == 64) launch_bf16<64>(p, Q, K, V, O, L);
  else launch_bf16<128>(p, Q, K, V, O, L);  // the host API admits d in {64, 128} only
}

}  // namespace ladder::cuda::attention::detail
