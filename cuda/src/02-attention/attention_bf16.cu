// cuda/src/02-attention/attention_bf16.cu -- stage 02 CUDA rung tiled_bf16: the tiled forward in bf16 on tensor
// cores, FA2's order (the kernel and its design notes: attention_bf16.cuh), and the copies that pad other head
// dims to the kernel's 64 or 128 (attention_bf16_pad.cuh). Compiled by nvcc for sm_80/sm_90 and by g++ through
// cuda/simt (the mma, ldmatrix and cp.async emulated as warp collectives / deferred copies).
#include "attention_bf16.cuh"
#include "attention_bf16_pad.cuh"

namespace ladder::cuda::attention::detail {

void launch_tiled_bf16(const Dims& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L) {
  if (p.d == 64) launch_bf16<64>(p, Q, K, V, O, L);
  else launch_bf16<128>(p, Q, K, V, O, L);  // the host API passes d in {64, 128} only (others padded first)
}

void launch_bf16_pad(const uint16_t* src, uint16_t* dst, size_t rows, int d, int D) {
  launch_pad_bf16(src, dst, rows, d, D);
}

void launch_bf16_unpad(const float* src, float* dst, size_t rows, int d, int D) {
  launch_unpad_f32(src, dst, rows, d, D);
}

}  // namespace ladder::cuda::attention::detail
