// cuda/src/02-attention/attention.cu -- stage 02 CUDA forward rungs naive and flash: the algorithms of ladder/02-attention/*.hpp.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward  <== this file
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Forward rungs (tiled is cuda/src/02-attention/attention_tiled_wide.cu and, the 16 x 16 kernel, attention_tiled.cu;
// the backward with recomputation cuda/src/02-attention/attention_backward.cu; what the files share,
// cuda/src/02-attention/attention_common.cuh):
//   naive  notes Alg. 0 as a standard implementation runs it: three kernels, S and P in device memory.
//   flash  notes Fig. 8: one warp per query row; the lanes split the head dim, so every lane carries
//          the same (m, d') and its own columns of o'. No S, no P, but K and V are re-read per row.
//   tiled  FA2 Alg. 1: one block per (batch x head, Q tile); K_j, V_j staged in shared memory; per-row
//          rescale by e^{m_old - m_new}, normalisation deferred to the end, L = m + log l stored for
//          the backward. Two kernels: tiled_forward_wide (64 x 64 tiles, 256 threads, register-tiled S
//          and P V, a pipelined stage loop; the default since issue 13) and tiled_forward (16 x 16
//          tiles, 128 threads; kept for side-by-side timing: ForceTiled, cuda::attention::tiled_16).
// Compiled by nvcc for sm_80/sm_90, and by g++ through cuda/simt to run on the CPU in the tests
// (SIMT_SCHEDULE=forward|reverse|random:N and TSan catch a missing barrier).
// Masking (problem.hpp): query i sees key j iff j <= i + Nk - Nq (causal, bottom-right); a row that
// sees no key has O = 0, L = m = -inf. Masked keys get P = 0 exactly (never e^{-inf - x} computed).
#include <math.h>
#include <stddef.h>

#include "attention_common.cuh"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ---- naive (Alg. 0): one kernel per line --------------------------------------------------------

// Line 1: thread per element of S [B*H, Nq, Nk]: S_ij = scale q_i . k_j, -inf where masked.
__global__ void naive_scores(Dims p, const float* Q, const float* K, float* S) {
  const size_t n = (size_t)p.B * p.H * p.Nq * p.Nk;
  const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int j = (int)(e % p.Nk), i = (int)(e / p.Nk % p.Nq);
  const size_t bh = e / ((size_t)p.Nk * p.Nq);
  if (j > last_key(p, i)) {
    S[e] = -INFINITY;
    return;
  }
  const float* q = Q + (bh * p.Nq + i) * p.d;
  const float* k = K + (bh * p.Nk + j) * p.d;
  float s = 0.0f;
  for (int c = 0; c < p.d; ++c) s += q[c] * k[c];
  S[e] = p.scale * s;
}

// Line 2: warp per row of S, the safe softmax (notes Alg. 2) with warp reductions; also L and m.
__global__ void naive_softmax(Dims p, const float* S, float* P, float* L, float* m) {
  const int lane = threadIdx.x % 32;
  const size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= (size_t)p.B * p.H * p.Nq) return;  // whole warps exit together: the shuffles stay full-mask
  const int visible = last_key(p, (int)(row % p.Nq)) + 1;  // keys [0, visible) are unmasked
  const float* s = S + row * p.Nk;
  float* pr = P + row * p.Nk;
  float mx = -INFINITY;
  for (int j = lane; j < visible; j += 32) mx = fmaxf(mx, s[j]);
  mx = warp_max(mx);
  float dsum = 0.0f;
  for (int j = lane; j < visible; j += 32) dsum += expf(s[j] - mx);
  dsum = warp_sum(dsum);
  for (int j = lane; j < p.Nk; j += 32) pr[j] = j < visible ? expf(s[j] - mx) / dsum : 0.0f;
  if (lane == 0) {
    L[row] = visible > 0 ? mx + logf(dsum) : -INFINITY;  // fully masked: mx = -inf, P = 0
    if (m) m[row] = mx;
  }
}

// Line 3: thread per element of O [B*H, Nq, d]: O_ic = sum_j P_ij V_jc.
__global__ void naive_pv(Dims p, const float* P, const float* V, float* O) {
  const size_t n = (size_t)p.B * p.H * p.Nq * p.d;
  const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int c = (int)(e % p.d);
  const size_t row = e / p.d, bh = row / p.Nq;
  const float* pr = P + row * p.Nk;
  const float* v = V + bh * p.Nk * p.d + c;
  float o = 0.0f;
  for (int j = 0; j < p.Nk; ++j) o += pr[j] * v[(size_t)j * p.d];
  O[e] = o;
}

// ---- flash (Fig. 8): one warp per query row -----------------------------------------------------

constexpr int kColsPerLane = kMaxHeadDim / 32;

// Lane l owns columns l, l + 32, ... of q and o'. x_j = scale q . k_j is a warp sum, after which every
// lane holds the same x_j, m and d' and updates its own columns of o' (Fig. 8, lines 4-7).
__global__ void flash_row(Dims p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const int lane = threadIdx.x % 32;
  const size_t row = (size_t)blockIdx.x * kRowWarps + threadIdx.x / 32;
  if (row >= (size_t)p.B * p.H * p.Nq) return;  // whole warps exit together
  const size_t bh = row / p.Nq;
  const float* Kh = K + bh * p.Nk * p.d;
  const float* Vh = V + bh * p.Nk * p.d;
  float q[kColsPerLane], o[kColsPerLane];
  for (int k = 0; k < kColsPerLane; ++k) {
    const int c = lane + 32 * k;
    q[k] = c < p.d ? Q[row * p.d + c] : 0.0f;
    o[k] = 0.0f;  // o'_0 = 0
  }
  float mi = -INFINITY, di = 0.0f;  // m_0 = -inf, d'_0 = 0
  const int last = last_key(p, (int)(row % p.Nq));
  for (int j = 0; j <= last; ++j) {
    float part = 0.0f;
    for (int k = 0; k < kColsPerLane; ++k)
      if (lane + 32 * k < p.d) part += q[k] * Kh[(size_t)j * p.d + lane + 32 * k];
    const float x = p.scale * warp_sum(part);
    const float m_new = fmaxf(mi, x);
    const float dr = di * expf(mi - m_new);  // d'_{j-1} e^{m_{j-1} - m_j}; 0 at the first key
    const float e = expf(x - m_new);
    const float d_new = dr + e;  // d'_j
    const float w = e / d_new;   // o'_j = o'_{j-1} (1 - w_j) + w_j v_j, as o'_{j-1} + w_j (v_j - o'_{j-1}) (flash.hpp)
    for (int k = 0; k < kColsPerLane; ++k)
      if (lane + 32 * k < p.d) o[k] = fmaf(w, Vh[(size_t)j * p.d + lane + 32 * k] - o[k], o[k]);
    mi = m_new;
    di = d_new;
  }
  for (int k = 0; k < kColsPerLane; ++k)
    if (lane + 32 * k < p.d) O[row * p.d + lane + 32 * k] = o[k];
  if (lane == 0) {
    L[row] = mi + logf(di);  // fully masked: -inf + log 0 = -inf
    if (m) m[row] = mi;
  }
}

}  // namespace

namespace detail {

void launch_naive_scores(const Dims& p, const float* Q, const float* K, float* S) {
  const size_t n = (size_t)p.B * p.H * p.Nq * p.Nk;
  simt::launch(naive_scores, dim3(blocks_for(n, 256)), dim3(256), 0, p, Q, K, S);
}

void launch_naive_softmax(const Dims& p, const float* S, float* P, float* L, float* m) {
  const size_t rows = (size_t)p.B * p.H * p.Nq;
  simt::launch(naive_softmax, dim3(blocks_for(rows, kRowWarps)), dim3(32 * kRowWarps), 0, p, S, P, L, m);
}

void launch_naive_pv(const Dims& p, const float* P, const float* V, float* O) {
  const size_t n = (size_t)p.B * p.H * p.Nq * p.d;
  simt::launch(naive_pv, dim3(blocks_for(n, 256)), dim3(256), 0, p, P, V, O);
}

void launch_flash_row(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const size_t rows = (size_t)p.B * p.H * p.Nq;
  simt::launch(flash_row, dim3(blocks_for(rows, kRowWarps)), dim3(32 * kRowWarps), 0, p, Q, K, V, O, L, m);
}

}  // namespace detail
}  // namespace ladder::cuda::attention
