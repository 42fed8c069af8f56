// cuda/src/03-mla/mla_host_parts.hpp -- host-side pieces of the stage-03 CUDA rungs that more than one host file
// strings into launches (defined in mla_host.cpp and mla_prefill.cpp; used by mla_prefill.cpp and mla_chunk.cpp).
// Private to cuda/src, never installed.
#pragma once
#include <cstdint>
#include <vector>

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

// q_abs [B, H, kv_lora]: q_abs_h = q^C_h W_UK(h), one batch entry per head.
Buf absorb_query(const Weights& W, const float* q_nope, int64_t B);

// u [B, hidden] = W_O [W_UV(h) o^lat_h]_h from o^lat [B, H, kv_lora].
void absorbed_output(const Weights& W, const float* o_lat, int64_t B, float* u);

// A_CC_ME's attention (AM's, chunk_absorbed's): one GEMM batch entry per query token z < s.B, scores
// out.scores [s.B, H, s.Lmax] = q_abs c^T + q^R k^R^T over the first s.seqlens[z] rows of the cache at kv + z *
// kv_stride (rows [c^KV | k^R], kv_lora + rope floats), the softmax into out.attn, o^lat [s.B, H, kv_lora] = a c.
// A decode step passes kv_stride = s.Lmax * (kv_lora + rope) (a cache per sequence), a chunk's tokens of one
// sequence 0 (one shared cache, s.seqlens then each token's visible length). lse (optional): [s.B, H].
void attend_latent_me(const Weights& W, const Step& s, const float* q_abs, const float* q_pe, const float* kv,
                      int64_t kv_stride, const Out& out, float* o_lat, float* lse);

// The chunk rungs' argument check (ladder::Error naming the parameter; fn names the rung); returns N = sum q_lens.
int64_t check_chunk(const Weights& W, const std::vector<int64_t>& q_lens, const std::vector<int64_t>& prefix,
                    int64_t Lmax, const void* h, const void* rope, const void* kv, bool write_rows, const void* u,
                    const void* lse, const char* fn);

// The chunk's cache rows [n, kv_lora + rope] = [RMSNorm(W_DKV[:kv_lora] h) | RoPE(W_DKV[kv_lora:] h)] at rows
// (ladder/03-mla/layers.hpp kv_entries); rope [n, rope] holds each token's cos / sin.
void chunk_rows(const Weights& W, const float* h, const float* rope, int64_t n, float* rows);

}  // namespace ladder::cuda::mla
