// cuda/src/03-mla/mla_host_parts.hpp -- host-side pieces of the stage-03 CUDA rungs that more than one host file
// strings into launches (defined in mla_host.cpp; used by mla_prefill.cpp). Private to cuda/src, never installed.
#pragma once
#include <cstdint>

#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"

namespace ladder::cuda::mla {

using Buf = DeviceBuffer<float>;

// y [M, N] = x [M, K] W^T, W an nn.Linear weight [N, K].
void linear(const float* x, int64_t M, int64_t K, const float* W, int64_t N, float* y);

// c^Q = RMSNorm(W_DQ h), q^C = W_UQ c^Q (if wanted), q^R = RoPE(W_QR c^Q): layers.hpp. Step: B tokens, h, rope.
struct Query {
  Buf cQ, q_nope, q_pe;
};
Query query(const Weights& W, const Step& s, bool nope);

}  // namespace ladder::cuda::mla
