// cuda/src/02_attention_backward.cu -- stage 02 CUDA backward with recomputation (ladder/attention/recompute.hpp).
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward  <== this file
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// FA2 Alg. 2 in two kernels:
//   backward_D   warp per query row: D_i = rowsum(dO_i o O_i), and the row of dQ zeroed for the atomics.
//   backward_kv  one block per (batch x head, KV tile j of kBc keys): K_j, V_j staged in shared memory,
//                dK_j, dV_j accumulated in registers over the Q tiles i that see j (the inner loop):
//                  S = scale Q_i K_j^T, P = e^{S - L_i}   (recomputed, never stored)
//                  dV_j += P^T dO_i,  dP = dO_i V_j^T,  dS = P o (dP - D_i),  dK_j += scale dS^T Q_i
//                  dQ_i += scale dS K_j                   (atomicAdd into device memory)
// dQ by atomics, not a second pass: every KV block contributes to every dQ_i it sees, and the blocks
// run concurrently. A second pass (one block per Q tile, looping over KV tiles) would recompute S and
// dP, i.e. 7 tile products per tile instead of 5, for a race-free, deterministic dQ; the atomics cost
// one fp32 add per dQ element per KV tile and make dQ's summation order depend on timing (results
// differ in the last bits from run to run on a GPU, which the tolerance rule allows). FA2's CUDA
// kernel makes the same choice. Masked entries and fully masked rows (L = -inf) get P = dS = 0.
#include <math.h>
#include <stddef.h>

#include "ladder/cuda/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

__device__ __forceinline__ int last_key(const Dims& p, int i) {
  return p.causal ? min(p.Nk - 1, i + p.Nk - p.Nq) : p.Nk - 1;
}

// D = rowsum(dO o O) with lanes over the head dim; dQ's row set to 0 (the KV blocks add into it).
__global__ void backward_D(Dims p, const float* O, const float* dO, float* D, float* dQ) {
  const int lane = threadIdx.x % 32;
  const size_t row = (size_t)blockIdx.x * kRowWarps + threadIdx.x / 32;
  if (row >= (size_t)p.B * p.H * p.Nq) return;  // whole warps exit together
  float s = 0.0f;
  for (int c = lane; c < p.d; c += 32) {
    s += dO[row * p.d + c] * O[row * p.d + c];
    dQ[row * p.d + c] = 0.0f;
  }
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (lane == 0) D[row] = s;
}

constexpr int kKVPerThread = kBc * kMaxHeadDim / kTileThreads;  // dK_j, dV_j entries in registers

// Shared memory: K_j, V_j [kBc, ld]; Q_i (scaled on load), dO_i [kBr, ld]; P, dS [kBr, kBc]; L_i, D_i [kBr].
// Thread t owns the dK_j, dV_j entries t, t + kTileThreads, ... of [kBc, d].
// ld = tile_row_stride(d), odd: in the P/dS loop lane l reads K_j, V_j row (l mod 16) at column c, word
// (l mod 16) ld + c, in bank (l mod 16) ld + c mod 32 -- 16 banks, as ld is a unit mod 32 (with ld = d =
// 128 it was one bank: 16-way conflicts; CUDA C Programming Guide, shared-memory banks); Q_i, dO_i rows
// l / 16 are two words in two banks. The dK/dV and dQ loops read rows at consecutive columns.
__global__ void backward_kv(Dims p, int ld, const float* Q, const float* K, const float* V, const float* dO, const float* L,
                            const float* D, float* dQ, float* dK, float* dV) {
  SIMT_DYNAMIC_SHARED(float, smem);
  const int d = p.d, t = threadIdx.x, c0 = blockIdx.x * kBc, bc = min(kBc, p.Nk - c0);
  const size_t bh = blockIdx.y, qrow0 = bh * p.Nq;
  float* Ks = smem;
  float* Vs = Ks + kBc * ld;
  float* Qs = Vs + kBc * ld;
  float* dOs = Qs + kBr * ld;
  float* P = dOs + kBr * ld;
  float* dS = P + kBr * kBc;
  float* Ls = dS + kBr * kBc;
  float* Ds = Ls + kBr;

  for (int e = t; e < kBc * d; e += kTileThreads) {  // load K_j, V_j (ordered by the loop's first barrier)
    const bool in = e / d < bc;
    Ks[e / d * ld + e % d] = in ? K[(bh * p.Nk + c0) * d + e] : 0.0f;
    Vs[e / d * ld + e % d] = in ? V[(bh * p.Nk + c0) * d + e] : 0.0f;
  }
  float dk[kKVPerThread], dv[kKVPerThread];
  for (int k = 0; k < kKVPerThread; ++k) dk[k] = dv[k] = 0.0f;

  // Q tiles that see key c0 and later (causal: rows before first_row(c0) see none of this tile).
  const int first_row = p.causal ? max(0, c0 - (p.Nk - p.Nq)) : 0;
  for (int r0 = first_row / kBr * kBr; r0 < p.Nq; r0 += kBr) {
    const int br = min(kBr, p.Nq - r0);
    for (int e = t; e < kBr * d; e += kTileThreads) {  // load Q_i (scaled), dO_i; rows past Nq are zeros
      const bool in = e / d < br;
      Qs[e / d * ld + e % d] = in ? p.scale * Q[(qrow0 + r0) * d + e] : 0.0f;
      dOs[e / d * ld + e % d] = in ? dO[(qrow0 + r0) * d + e] : 0.0f;
    }
    if (t < kBr) {
      Ls[t] = t < br ? L[qrow0 + r0 + t] : -INFINITY;
      Ds[t] = t < br ? D[qrow0 + r0 + t] : 0.0f;
    }
    __syncthreads();  // Q_i, dO_i, L_i, D_i (and K_j, V_j on the first pass) are in shared memory
    for (int e = t; e < kBr * kBc; e += kTileThreads) {  // P = e^{S - L}, dS = P o (dO V^T - D), per entry
      const int r = e / kBc, j = e % kBc;
      float pe = 0.0f, ds = 0.0f;
      if (r < br && j < bc && c0 + j <= last_key(p, r0 + r) && Ls[r] != -INFINITY) {
        float s = 0.0f, dp = 0.0f;
        for (int c = 0; c < d; ++c) {
          s += Qs[r * ld + c] * Ks[j * ld + c];
          dp += dOs[r * ld + c] * Vs[j * ld + c];
        }
        pe = expf(s - Ls[r]);
        ds = pe * (dp - Ds[r]);
      }
      P[e] = pe;
      dS[e] = ds;
    }
    __syncthreads();  // P and dS are complete before the products read their columns and rows
    for (int k = 0; k < kKVPerThread; ++k) {  // dV_j += P^T dO_i, dK_j += dS^T (scale Q_i)
      const int e = t + k * kTileThreads;
      if (e >= kBc * d) break;
      const int j = e / d, c = e % d;
      float av = 0.0f, ak = 0.0f;
      for (int r = 0; r < kBr; ++r) {
        av += P[r * kBc + j] * dOs[r * ld + c];
        ak += dS[r * kBc + j] * Qs[r * ld + c];
      }
      dv[k] += av;
      dk[k] += ak;
    }
    for (int e = t; e < br * d; e += kTileThreads) {  // dQ_i += scale dS K_j, shared with other KV blocks
      const int r = e / d, c = e % d;
      float a = 0.0f;
      for (int j = 0; j < kBc; ++j) a += dS[r * kBc + j] * Ks[j * ld + c];
      atomicAdd(&dQ[(qrow0 + r0) * d + e], p.scale * a);
    }
    __syncthreads();  // everyone is done with Q_i, dO_i, P, dS before the next Q tile overwrites them
  }

  for (int k = 0; k < kKVPerThread; ++k) {
    const int e = t + k * kTileThreads;
    if (e >= bc * d) break;
    dK[(bh * p.Nk + c0) * d + e] = dk[k];
    dV[(bh * p.Nk + c0) * d + e] = dv[k];
  }
}

unsigned blocks_for(size_t n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

}  // namespace

namespace detail {

void launch_backward_D(const Dims& p, const float* O, const float* dO, float* D, float* dQ) {
  const size_t rows = (size_t)p.B * p.H * p.Nq;
  simt::launch(backward_D, dim3(blocks_for(rows, kRowWarps)), dim3(32 * kRowWarps), 0, p, O, dO, D, dQ);
}

void launch_backward_kv(const Dims& p, const float* Q, const float* K, const float* V, const float* dO,
                        const float* L, const float* D, float* dQ, float* dK, float* dV) {
  const int ld = tile_row_stride(p.d);
  const size_t smem = sizeof(float) * ((size_t)(2 * kBc + 2 * kBr) * ld + 2 * kBr * kBc + 2 * kBr);
  const dim3 grid(blocks_for((size_t)p.Nk, kBc), (unsigned)(p.B * p.H));
  simt::launch(backward_kv, grid, dim3(kTileThreads), smem, p, ld, Q, K, V, dO, L, D, dQ, dK, dV);
}

}  // namespace detail
}  // namespace ladder::cuda::attention
