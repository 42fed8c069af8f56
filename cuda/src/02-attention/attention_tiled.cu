// cuda/src/02-attention/attention_tiled.cu -- stage 02 CUDA forward rung tiled (FA2 Alg. 1, ladder/02-attention/tiled.hpp).
//
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward  <== this file
//
// One block per (batch x head, Q tile); K_j, V_j staged in shared memory; per-row rescale by
// e^{m_old - m_new}, normalisation deferred to the end, L = m + log l stored for the backward. This file:
// tiled_forward (16 x 16 tiles, kept for timing beside the default: ForceTiled, cuda::attention::tiled_16);
// the default, tiled_forward_wide (64 x 64, register-tiled): attention_tiled_wide.cu. naive, flash and
// the masking rules: attention.cu; last_key, blocks_for, write_masked_tile: attention_common.cuh. Compiled by nvcc for sm_80/sm_90 and by g++ through
// cuda/simt (SIMT_SCHEDULE=forward|reverse|random:N and TSan catch a missing barrier). tiled_forward also takes a
// value head dim of its own (Dims::dv; Q_i, K_j rows of d, V_j, O rows of d_v): MLA's prefill in FlashMLA's MHA mode,
// d = 192, d_v = 128 (cuda/src/03-mla/mla_prefill.cpp).
#include <math.h>
#include <stddef.h>

#include "attention_common.cuh"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

// ---- tiled (FA2 Alg. 1): one block per (batch x head, Q tile) -------------------------------------


constexpr int kRowThreads = kTileThreads / kBr;  // threads sharing one row's softmax step (8)
static_assert(kTileThreads % kBr == 0 && 32 % kRowThreads == 0 && kBc % kRowThreads == 0,
              "a row's threads are consecutive lanes of one warp and split the tile's columns evenly");

// Register tiles. Every product reads its operands from shared memory; what limits these kernels on a
// GPU is how many shared-memory loads each multiply-add needs (the H100 profile: L1/shared 97.6 % busy,
// 14 % of issue slots used, when each FMA took two loads). A thread that computes an a x b block of a
// product loads a + b operands per step of the reduction for a b multiply-adds:
//   S = Q_i K_j^T   2 x 2 entries of S per thread pair, each thread half of the head dim (columns of
//                   one parity): 4 loads for 4 FMAs, then one shuffle joins the halves (was 2 per FMA).
//   O += P V_j      kORows x kOCols entries of O per thread, in registers for the whole KV loop: rows
//                   kORows w + i of warp w, columns lane + 32 k; per key, kORows loads of P (the same
//                   address across the warp: a broadcast) and kOCols of V_j: 8 loads for 16 FMAs.
constexpr int kSPairs = kTileThreads / 2;          // thread pairs, one 2 x 2 block of S each
constexpr int kSColPairs = kBc / 2;                // 2 x 2 blocks across a row pair of S
constexpr int kORows = kBr / (kTileThreads / 32);  // O rows per warp (and per thread)
constexpr int kOCols = kMaxHeadDim / 32;           // O columns per thread, 32 apart
static_assert(kSPairs * 4 == kBr * kBc && kSColPairs * 2 == kBc, "the 2 x 2 blocks of S cover the tile once");
static_assert(kORows * (kTileThreads / 32) == kBr && kOCols * 32 == kMaxHeadDim, "O's blocks cover [kBr, d]");

// Row stride of Q_i, K_j, V_j in shared memory: d rounded up to an odd number. Shared memory has 32
// banks of 4 bytes; word a sits in bank a mod 32 (CUDA C Programming Guide, shared-memory banks). In
// the S loop a warp's 16 thread pairs read K_j rows 2 q and 2 q + 1 (q = pair mod 8) at column
// 2 n + half: word (2 q) ld + 2 n + half lies in bank 2 q ld + half + 2 n mod 32, and because ld is a
// unit mod 32 the 8 values of 2 q ld are 8 different even banks: 16 lanes, 16 banks (the other 16 lanes
// read the same words: a broadcast). With ld = d = 128 (0 mod 32) all rows fell in one bank. Q_i's two
// row pairs per warp are 4 words in 4 banks; the O loop reads a V_j row at 32 consecutive columns.
// Cost: kBr + 2 kBc floats more shared memory. ld = tile_row_stride(d) comes from the host
// (attention_kernels.hpp is a plain C++ header).

// Shared memory: Q_i [kBr, ld] (scaled on load), K_j [kBc, ld], V_j [kBc, ldv], S/P [kBr, kBc], per-row l, alpha
// (ld, ldv: tile_row_stride of d and d_v, from the host).
// The softmax step of row r runs on its kRowThreads consecutive threads (t / kRowThreads = r), each
// taking columns t % kRowThreads, + kRowThreads, ...; they merge by shuffles and all hold the row's
// (m, l) in registers.
__global__ void __launch_bounds__(kTileThreads, 8) tiled_forward(Dims p, int ld, int ldv, const float* Q, const float* K, const float* V, float* O, float* L,
                              float* m) {
  SIMT_DYNAMIC_SHARED(float, smem);
  const int d = p.d, dv = p.dv > 0 ? p.dv : p.d;
  const int t = threadIdx.x, r0 = blockIdx.x * kBr, br = min(kBr, p.Nq - r0);
  const int warp = t / 32, lane = t % 32;
  const size_t bh = blockIdx.y;
  float* Qs = smem;
  float* Ks = Qs + kBr * ld;
  float* Vs = Ks + kBc * ld;
  float* S = Vs + kBc * ldv;
  float* ls = S + kBr * kBc;
  float* alpha = ls + kBr;
  const float* Qh = Q + (bh * p.Nq + r0) * d;
  const float* Kh = K + bh * p.Nk * d;
  const float* Vh = V + bh * p.Nk * dv;
  float* Oh = O + (bh * p.Nq + r0) * dv;

  // KV tiles this Q tile visits (causal: whole tiles past the last row's last key are skipped).
  const int kmax = last_key(p, r0 + br - 1);
  const int tiles = kmax < 0 ? 0 : kmax / kBc + 1;
  if (tiles == 0) {  // every row fully masked (the same for the whole block): O = 0, L = m = -inf
    write_masked_tile(p, bh, r0, br, Oh, L, m, kTileThreads);
    return;
  }

  for (int e = t; e < kBr * d; e += kTileThreads)  // load Q_i
    Qs[e / d * ld + e % d] = e / d < br ? p.scale * Qh[e] : 0.0f;
  const int row = t / kRowThreads, sub = t % kRowThreads;  // this thread's row in the softmax step
  float mi = -INFINITY, li = 0.0f;                          // row's (m, l), the same in its threads
  // This thread's 2 x 2 block of S: rows 2 sr, 2 sr + 1, columns 2 sc, 2 sc + 1, head-dim columns of
  // parity `half`.
  const int half = t & 1, sr = (t >> 1) / kSColPairs, sc = (t >> 1) % kSColPairs;
  float o[kORows][kOCols];  // O_i rows kORows warp + i, columns lane + 32 k
  for (int i = 0; i < kORows; ++i)
    for (int k = 0; k < kOCols; ++k) o[i][k] = 0.0f;

  for (int jt = 0; jt < tiles; ++jt) {  // the inner loop over KV blocks j (FA2: Q block outer)
    const int c0 = jt * kBc, bc = min(kBc, p.Nk - c0);
    for (int e = t; e < kBc * d; e += kTileThreads)  // load K_j, V_j; rows past Nk are zeros
      Ks[e / d * ld + e % d] = e / d < bc ? Kh[(size_t)c0 * d + e] : 0.0f;
    for (int e = t; e < kBc * dv; e += kTileThreads) Vs[e / dv * ldv + e % dv] = e / dv < bc ? Vh[(size_t)c0 * dv + e] : 0.0f;
    __syncthreads();  // Q_i (first tile), K_j, V_j are in shared memory before S reads them
    {  // S_ij = (scale Q_i) K_j^T, a 2 x 2 block per thread pair
      const float* q0 = Qs + 2 * sr * ld;
      const float* q1 = q0 + ld;
      const float* k0 = Ks + 2 * sc * ld;
      const float* k1 = k0 + ld;
      float s00 = 0.0f, s01 = 0.0f, s10 = 0.0f, s11 = 0.0f;
      for (int c = half; c < d; c += 2) {
        const float a0 = q0[c], a1 = q1[c], b0 = k0[c], b1 = k1[c];
        s00 += a0 * b0, s01 += a0 * b1, s10 += a1 * b0, s11 += a1 * b1;
      }
      s00 += __shfl_xor_sync(0xffffffffu, s00, 1);  // the pair's two halves of the head dim
      s01 += __shfl_xor_sync(0xffffffffu, s01, 1);
      s10 += __shfl_xor_sync(0xffffffffu, s10, 1);
      s11 += __shfl_xor_sync(0xffffffffu, s11, 1);
      if (half == 0) {
        float* s = S + 2 * sr * kBc + 2 * sc;
        s[0] = s00, s[1] = s01, s[kBc] = s10, s[kBc + 1] = s11;
      }
    }
    __syncthreads();  // S is complete before the row's threads read it
    {  // the §3.7 merge for row `row`: m_new, P = e^{S - m_new}, l, alpha = e^{m_old - m_new}
      float* srow = S + row * kBc;
      const int visible = row < br ? max(0, min(last_key(p, r0 + row) - c0 + 1, bc)) : 0;
      float m_new = mi;  // stays m_old (and alpha 1, P 0) when none of the row is in the tile
      for (int j = sub; j < visible; j += kRowThreads) m_new = fmaxf(m_new, srow[j]);
      for (int off = kRowThreads / 2; off > 0; off >>= 1)  // every lane shuffles: full mask is legal
        m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, off));
      const float a = visible == 0 ? 1.0f : expf(mi - m_new);  // 0 while m_old = -inf
      float rowsum = 0.0f;
      for (int j = sub; j < kBc; j += kRowThreads) {
        srow[j] = j < visible ? expf(srow[j] - m_new) : 0.0f;
        rowsum += srow[j];
      }
      for (int off = kRowThreads / 2; off > 0; off >>= 1) rowsum += __shfl_xor_sync(0xffffffffu, rowsum, off);
      li = a * li + rowsum;
      mi = m_new;
      if (sub == 0) ls[row] = li, alpha[row] = a;
    }
    __syncthreads();  // P and alpha are written before every thread updates its O entries
    for (int i = 0; i < kORows; ++i) {  // O_i = diag(alpha) O_i + P~_ij V_j
      const float a = alpha[kORows * warp + i];
      for (int k = 0; k < kOCols; ++k) o[i][k] *= a;
    }
    for (int j = 0; j < kBc; ++j) {
      float v[kOCols];
      for (int k = 0; k < kOCols; ++k) v[k] = lane + 32 * k < dv ? Vs[j * ldv + lane + 32 * k] : 0.0f;
      for (int i = 0; i < kORows; ++i) {
        const float pij = S[(kORows * warp + i) * kBc + j];
        for (int k = 0; k < kOCols; ++k) o[i][k] += pij * v[k];
      }
    }
    __syncthreads();  // everyone is done with K_j, V_j, S before the next tile overwrites them
  }

  for (int i = 0; i < kORows; ++i) {  // deferred normalisation: O_i / l (l = 0: fully masked row)
    const int r = kORows * warp + i;
    if (r >= br) break;
    const float l = ls[r];
    for (int k = 0; k < kOCols; ++k)
      if (lane + 32 * k < dv) Oh[r * dv + lane + 32 * k] = l == 0.0f ? 0.0f : o[i][k] / l;
  }
  if (sub == 0 && row < br) {
    L[bh * p.Nq + r0 + row] = li == 0.0f ? -INFINITY : mi + logf(li);
    if (m) m[bh * p.Nq + r0 + row] = mi;
  }
}

}  // namespace

namespace detail {

void launch_tiled(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const int ld = tile_row_stride(p.d), ldv = tile_row_stride(p.dv > 0 ? p.dv : p.d);
  const size_t smem = sizeof(float) * ((size_t)(kBr + kBc) * ld + (size_t)kBc * ldv + kBr * kBc + 2 * kBr);
  const dim3 grid(blocks_for((size_t)p.Nq, kBr), (unsigned)(p.B * p.H));
  simt::launch(tiled_forward, grid, dim3(kTileThreads), smem, p, ld, ldv, Q, K, V, O, L, m);
}

}  // namespace detail
}  // namespace ladder::cuda::attention
