// cuda/src/02-attention/attention_backward.cu -- stage 02 CUDA backward with recomputation (ladder/02-attention/recompute.hpp).
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

#include "attention_common.cuh"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

// D = rowsum(dO o O); dQ's row set to 0 (the KV blocks add into it). D is summed in the order in which
// backward_kv sums dP = dO V^T: two chains over alternate columns (c = 0, 2, 4, ... and c = 1, 3, ...),
// then their sum. Where a row's whole probability sits on one key j, O_i = V_j and dS = P (dP - D) is
// exactly 0 -- and the rounding is then exactly the same on both sides, so dQ is exactly 0 too, on a
// GPU that contracts a * b + c into one fma as on the CPU that does not. (Summed by 32 lanes and a
// butterfly, D differed from dP in the last bits on an H200: dQ 1.4e-6 off on q239_k1_d64_causal.)
__global__ void backward_D(Dims p, const float* O, const float* dO, float* D, float* dQ) {
  const int lane = threadIdx.x % 32;
  const size_t row = (size_t)blockIdx.x * kRowWarps + threadIdx.x / 32;
  if (row >= (size_t)p.B * p.H * p.Nq) return;  // whole warps exit together
  for (int c = lane; c < p.d; c += 32) dQ[row * p.d + c] = 0.0f;
  float s = 0.0f;
  if (lane < 2)
    for (int c = lane; c < p.d; c += 2) s += dO[row * p.d + c] * O[row * p.d + c];
  s += __shfl_xor_sync(0xffffffffu, s, 1);  // lane 0: chain 0 + chain 1, as backward_kv's pair
  if (lane == 0) D[row] = s;
}

// Register tiles, as in the forward (cuda/src/02-attention/attention_tiled.cu): a thread that computes an a x b block of
// a product loads a + b operands per step of its reduction for a b multiply-adds.
//   S, dP      2 x 2 entries of each per thread pair, each thread half of the head dim (columns of one
//              parity), joined by one shuffle: 8 loads for 8 FMAs (one entry per thread: 4 loads for 2).
//   dK_j, dV_j kKVRows x kKVCols entries of each per thread, in registers across the Q tiles: rows
//              kKVRows w + i of warp w, columns lane + 32 k; per query row, kKVRows loads of P and of dS
//              (broadcasts) and kKVCols of dO_i and of Q_i: 16 loads for 32 FMAs (was 4 for 2).
//   dQ_i       the same blocks of [kBr, d]: per key 4 loads of dS, 4 of K_j for 16 FMAs.
constexpr int kSColPairs = kBc / 2;                 // 2 x 2 blocks across a row pair of S
constexpr int kKVRows = kBc / (kTileThreads / 32);  // dK_j, dV_j rows per warp
constexpr int kQRows = kBr / (kTileThreads / 32);   // dQ_i rows per warp
constexpr int kKVCols = kMaxHeadDim / 32;           // columns per thread, 32 apart
static_assert(kTileThreads / 2 * 4 == kBr * kBc && kSColPairs * 2 == kBc, "the 2 x 2 blocks cover P once");
static_assert(kKVRows * (kTileThreads / 32) == kBc && kQRows * (kTileThreads / 32) == kBr && kKVCols * 32 == kMaxHeadDim,
              "the register blocks cover [kBc, d] and [kBr, d]");

// Shared memory: K_j, V_j [kBc, ld]; Q_i (scaled on load), dO_i [kBr, ld]; P, dS [kBr, kBc]; L_i, D_i [kBr].
// ld = tile_row_stride(d), odd: in the P/dS loop a warp's 16 thread pairs read K_j and V_j rows 2 q and
// 2 q + 1 (q = pair mod 8) at column 2 n + half, words in 16 different banks because ld is a unit mod 32
// (with ld = d = 128 the 8 rows fell in one bank; CUDA C Programming Guide, shared-memory banks); Q_i and
// dO_i rows are 4 words in 4 banks. The dK/dV and dQ loops read rows at 32 consecutive columns.
__global__ void __launch_bounds__(kTileThreads, 6) backward_kv(Dims p, int ld, const float* Q, const float* K,
                                                               const float* V, const float* dO, const float* L,
                                                               const float* D, float* dQ, float* dK, float* dV) {
  SIMT_DYNAMIC_SHARED(float, smem);
  const int d = p.d, t = threadIdx.x, c0 = blockIdx.x * kBc, bc = min(kBc, p.Nk - c0);
  const int warp = t / 32, lane = t % 32;
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
  // This thread's 2 x 2 block of P and dS: rows 2 sr, 2 sr + 1, columns 2 sc, 2 sc + 1.
  const int half = t & 1, sr = (t >> 1) / kSColPairs, sc = (t >> 1) % kSColPairs;
  float dk[kKVRows][kKVCols], dv[kKVRows][kKVCols];  // rows kKVRows warp + i of dK_j, dV_j
  for (int i = 0; i < kKVRows; ++i)
    for (int k = 0; k < kKVCols; ++k) dk[i][k] = dv[i][k] = 0.0f;

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
    {  // P = e^{S - L}, dS = P o (dO V^T - D), a 2 x 2 block per thread pair
      float s[2][2] = {}, dp[2][2] = {};
      for (int c = half; c < d; c += 2) {
        const float q0 = Qs[2 * sr * ld + c], q1 = Qs[(2 * sr + 1) * ld + c];
        const float o0 = dOs[2 * sr * ld + c], o1 = dOs[(2 * sr + 1) * ld + c];
        const float k0 = Ks[2 * sc * ld + c], k1 = Ks[(2 * sc + 1) * ld + c];
        const float v0 = Vs[2 * sc * ld + c], v1 = Vs[(2 * sc + 1) * ld + c];
        s[0][0] += q0 * k0, s[0][1] += q0 * k1, s[1][0] += q1 * k0, s[1][1] += q1 * k1;
        dp[0][0] += o0 * v0, dp[0][1] += o0 * v1, dp[1][0] += o1 * v0, dp[1][1] += o1 * v1;
      }
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {  // the pair's two halves of the head dim; both threads hold the sums
          s[a][b] += __shfl_xor_sync(0xffffffffu, s[a][b], 1);
          dp[a][b] += __shfl_xor_sync(0xffffffffu, dp[a][b], 1);
        }
      for (int a = 0; a < 2; ++a)
        for (int b = half; b < 2; b += 2) {  // each thread of the pair writes one column of the block
          const int r = 2 * sr + a, j = 2 * sc + b;
          float pe = 0.0f, ds = 0.0f;
          if (r < br && j < bc && c0 + j <= last_key(p, r0 + r) && Ls[r] != -INFINITY) {
            pe = expf(s[a][b] - Ls[r]);
            ds = pe * (dp[a][b] - Ds[r]);
          }
          P[r * kBc + j] = pe;
          dS[r * kBc + j] = ds;
        }
    }
    __syncthreads();  // P and dS are complete before the products read their columns and rows
    for (int r = 0; r < kBr; ++r) {  // dV_j += P^T dO_i, dK_j += dS^T (scale Q_i)
      float o[kKVCols], q[kKVCols];
      for (int k = 0; k < kKVCols; ++k) {
        const bool in = lane + 32 * k < d;
        o[k] = in ? dOs[r * ld + lane + 32 * k] : 0.0f;
        q[k] = in ? Qs[r * ld + lane + 32 * k] : 0.0f;
      }
      for (int i = 0; i < kKVRows; ++i) {
        const float pr = P[r * kBc + kKVRows * warp + i], dsr = dS[r * kBc + kKVRows * warp + i];
        for (int k = 0; k < kKVCols; ++k) dv[i][k] += pr * o[k], dk[i][k] += dsr * q[k];
      }
    }
    {  // dQ_i += scale dS K_j, shared with other KV blocks
      float a[kQRows][kKVCols] = {};
      for (int j = 0; j < kBc; ++j) {
        float kj[kKVCols];
        for (int k = 0; k < kKVCols; ++k) kj[k] = lane + 32 * k < d ? Ks[j * ld + lane + 32 * k] : 0.0f;
        for (int i = 0; i < kQRows; ++i) {
          const float dsij = dS[(kQRows * warp + i) * kBc + j];
          for (int k = 0; k < kKVCols; ++k) a[i][k] += dsij * kj[k];
        }
      }
      for (int i = 0; i < kQRows; ++i) {
        const int r = kQRows * warp + i;
        if (r >= br) break;
        for (int k = 0; k < kKVCols; ++k)
          if (lane + 32 * k < d) atomicAdd(&dQ[(qrow0 + r0 + r) * d + lane + 32 * k], p.scale * a[i][k]);
      }
    }
    __syncthreads();  // everyone is done with Q_i, dO_i, P, dS before the next Q tile overwrites them
  }

  for (int i = 0; i < kKVRows; ++i) {
    const int j = kKVRows * warp + i;
    if (j >= bc) break;
    for (int k = 0; k < kKVCols; ++k) {
      const int c = lane + 32 * k;
      if (c >= d) continue;
      dK[(bh * p.Nk + c0 + j) * d + c] = dk[i][k];
      dV[(bh * p.Nk + c0 + j) * d + c] = dv[i][k];
    }
  }
}

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
