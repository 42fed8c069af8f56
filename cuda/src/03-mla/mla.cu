// cuda/src/03-mla/mla.cu -- stage 03 CUDA kernels: the small kernels around the one GEMM.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM          <== this file (+ mla_gemm.cu, mla_flash.cu)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// The rungs of ladder/03-mla/mla.hpp are sequences of launches (cuda/src/03-mla/mla_host.cpp strings them
// together); every matrix product of every rung is one GEMM (cuda/src/03-mla/mla_gemm.cu: gemm_batched,
// its split-K sum, gemm_small), and flash_mla is cuda/src/03-mla/mla_flash.cu. Around the GEMM, here:
// RMSNorm (block per row), RoPE from a host-computed cos/sin table, the scale + safe softmax per
// score row (notes Alg. 2 with block reductions), and the copies the notes' rungs make (the q
// concatenation, CD's k_pe per head, A_CC's key_states). Compiled by nvcc for sm_80/sm_90 and by g++
// through cuda/simt, where the tests run it in three schedules and under TSan; this file includes no
// fmt (nvcc 13 cannot compile it).
#include <math.h>

#include "mla_common.cuh"
#include "ladder/cuda/03-mla/mla_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::mla {
namespace {

constexpr int kRowThreads = 128;  // rms_norm, scale_softmax: threads per row

// Sum and max over the block (kRowThreads threads): warp shuffles, then the warps' values in shared.
__device__ float block_sum(float v, float* part) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();  // every warp's partial is in `part`
  float total = 0.0f;
  for (int w = 0; w < kRowThreads / 32; ++w) total += part[w];
  __syncthreads();  // everyone has read `part` before it is reused
  return total;
}
__device__ float block_max(float v, float* part) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kRowThreads / 32; ++w) m = fmaxf(m, part[w]);
  __syncthreads();
  return m;
}

// RMSNorm of row r of x (n entries, row stride ld): x = gain * x / sqrt(mean(x^2) + eps).
__global__ void rms_norm_rows(float* x, const float* gain, int64_t n, int64_t ld, float eps) {
  __shared__ float part[kRowThreads / 32];
  float* row = x + (int64_t)blockIdx.x * ld;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) ss += row[j] * row[j];
  const float r = 1.0f / sqrtf(block_sum(ss, part) / (float)n + eps);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] = gain[j] * (row[j] * r);
}

// Half-split RoPE (ladder/03-mla/layers.hpp) of x [B, heads * d]; rope [B, d] = cos for i < d/2, then sin.
__global__ void rope_half_split(float* x, const float* rope, int64_t B, int64_t heads, int64_t d) {
  const int64_t half = d / 2, n = B * heads * half;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t b = t / (heads * half), i = t % half;
    float* v = x + (t / half) * d;
    const float c = rope[b * d + i], s = rope[b * d + half + i];
    const float a = v[i], bb = v[i + half];
    v[i] = a * c - bb * s;
    v[i + half] = bb * c + a * s;
  }
}

// out[r] = [a[r] (da entries) | b[r] (db entries)] for every row r.
__global__ void concat_rows(const float* a, int64_t da, const float* b, int64_t db, float* out, int64_t rows) {
  const int64_t w = da + db, n = rows * w;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = t / w, c = t % w;
    out[t] = c < da ? a[r * da + c] : b[r * db + c - da];
  }
}

// Row r of scores [rows, Lmax] belongs to sequence r / rows_per_seq of length L: s = scale * s for
// j < L, -inf beyond; attn = safe softmax over [0, L) (notes Alg. 2), 0 beyond. lse (optional, [rows]):
// log sum_{j < L} e^{s_j} = m + log d of the scaled row (the chunk rungs return it; mla_chunk.cpp).
// With the chunk's per-token lengths as seqlens and rows_per_seq = H, row r is head r % H of token r / H.
__global__ void scale_softmax_rows(float* scores, float* attn, int64_t Lmax, const int64_t* seqlens,
                                   int64_t rows_per_seq, float scale, float* lse) {
  __shared__ float part[kRowThreads / 32];
  const int64_t r = blockIdx.x, L = seqlens[r / rows_per_seq];
  float* s = scores + r * Lmax;
  float* a = attn + r * Lmax;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < Lmax; j += blockDim.x) {
    if (j < L) {
      s[j] *= scale;
      m = fmaxf(m, s[j]);
    } else {
      s[j] = -INFINITY;
    }
  }
  m = block_max(m, part);
  float d = 0.0f;
  for (int64_t j = threadIdx.x; j < L; j += blockDim.x) d += expf(s[j] - m);
  d = block_sum(d, part);
  for (int64_t j = threadIdx.x; j < Lmax; j += blockDim.x) a[j] = j < L ? expf(s[j] - m) / d : 0.0f;
  if (lse != nullptr && threadIdx.x == 0) lse[r] = m + logf(d);  // d: block_sum's total, the same in every thread
}

// CD's layout: K[b, h, j, nope + i] = kv[b, j, off + i] (k^R replicated per head), j < L_b.
__global__ void copy_rope_part(const float* kv, int64_t kv_dim, int64_t off, int64_t rope, float* K, int64_t dk,
                               int64_t nope, int64_t B, int64_t H, int64_t Lmax, const int64_t* seqlens) {
  const int64_t n = B * H * Lmax * rope;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = t % rope, j = (t / rope) % Lmax, bh = t / (rope * Lmax), b = bh / H;
    if (j < seqlens[b]) K[(bh * Lmax + j) * dk + nope + i] = kv[(b * Lmax + j) * kv_dim + off + i];
  }
}

// A_CC's key_states: out[b, h, j, :] = kv[b, j, :] for every head, j < L_b.
__global__ void replicate_rows(const float* kv, int64_t w, float* out, int64_t B, int64_t H, int64_t Lmax,
                               const int64_t* seqlens) {
  const int64_t n = B * H * Lmax * w;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = t % w, j = (t / w) % Lmax, b = t / (w * Lmax * H);
    if (j < seqlens[b]) out[t] = kv[(b * Lmax + j) * w + c];
  }
}

}  // namespace

namespace detail {

void launch_rms_norm(float* x, const float* gain, int64_t rows, int64_t n, int64_t ld, float eps) {
  simt::launch(rms_norm_rows, dim3((unsigned)rows), dim3(kRowThreads), 0, x, gain, n, ld, eps);
}
void launch_rope(float* x, const float* rope, int64_t B, int64_t heads, int64_t d) {
  simt::launch(rope_half_split, dim3(grid_for(B * heads * d / 2, 128)), dim3(128), 0, x, rope, B, heads, d);
}
void launch_concat_heads(const float* a, int64_t da, const float* b, int64_t db, float* out, int64_t rows) {
  simt::launch(concat_rows, dim3(grid_for(rows * (da + db), 128)), dim3(128), 0, a, da, b, db, out, rows);
}
void launch_scale_softmax(float* scores, float* attn, int64_t rows, int64_t Lmax, const int64_t* seqlens,
                          int64_t rows_per_seq, float scale, float* lse) {
  simt::launch(scale_softmax_rows, dim3((unsigned)rows), dim3(kRowThreads), 0, scores, attn, Lmax, seqlens,
               rows_per_seq, scale, lse);
}
void launch_copy_rope_part(const float* kv, int64_t kv_dim, int64_t off, int64_t rope, float* K, int64_t dk,
                           int64_t nope, int64_t B, int64_t H, int64_t Lmax, const int64_t* seqlens) {
  simt::launch(copy_rope_part, dim3(grid_for(B * H * Lmax * rope, 128)), dim3(128), 0, kv, kv_dim, off, rope, K, dk,
               nope, B, H, Lmax, seqlens);
}
void launch_replicate_rows(const float* kv, int64_t w, float* out, int64_t B, int64_t H, int64_t Lmax,
                           const int64_t* seqlens) {
  simt::launch(replicate_rows, dim3(grid_for(B * H * Lmax * w, 128)), dim3(128), 0, kv, w, out, B, H, Lmax, seqlens);
}

}  // namespace detail
}  // namespace ladder::cuda::mla
