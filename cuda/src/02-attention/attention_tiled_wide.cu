// cuda/src/02-attention/attention_tiled_wide.cu -- stage 02 CUDA forward rung tiled, the default kernel:
// tiled_forward_wide, FA2 Alg. 1 (ladder/02-attention/tiled.hpp) on 64 x 64 tiles with register-tiled
// products and one barrier per pipeline stage.
//
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward  <== this file
//
// The 16 x 16 kernel it replaced as the default (kept for timing beside it) and the rung's design notes:
// attention_tiled.cu; last_key, blocks_for, write_masked_tile: attention_common.cuh. Compiled by
// nvcc for sm_80/sm_90 and by g++ through cuda/simt (SIMT_SCHEDULE=forward|reverse|random:N and TSan
// catch a missing barrier).
#include <math.h>
#include <stddef.h>

#include "attention_common.cuh"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

// ---- tiled, wide (issue 13): 64 x 64 tiles, register-tiled products, one barrier per stage ---------
//
// tiled_forward (attention_tiled.cu) runs at 12.1 TFLOP/s on an H200, 20 % of the fp32 FMA floor (B8 N4096 d128):
// 16 x 16 tiles, 3 barriers per 16 keys, 1 shared load per FMA in S and 0.5 in P V. This kernel is the
// same algorithm (FA2 Alg. 1, the §3.7 merge, deferred normalisation, the masking rules of tiled_forward) with
// the stage-03 GEMM's shape (gemm_batched in mla_gemm.cu: k-major padded shared tiles, a register tile
// per thread, a software-pipelined loop with one barrier per stage):
//
//   block   256 threads = 16 x 16, per (batch x head, Q tile of kWideBr = 64 rows); K_j, V_j tiles of
//           kWideBc = 64 keys. Thread t: ty = t / 16, tx = t % 16 (a warp holds ty = 2 w, 2 w + 1).
//   S       S_ij [64 x 64] in registers, 4 x 4 per thread: rows 4 ty + i, keys 16 j + tx (i, j < 4).
//           The head dim streams through shared memory kWideK = 16 columns at a time: Q_i's and K_j's
//           columns c0 .. c0 + 15, stored k-major (Qc[c][row], Kc[c][key], row stride kWideLd = 66).
//           Per column c a thread loads 4 values of Q (Qc[c][4 ty + i]) and 4 of K (Kc[c][16 j + tx])
//           for 16 FMAs: 0.5 loads per FMA (tiled_forward: 1). Q_i is re-read from global memory (L2)
//           with every KV tile: the whole Q_i tile (64 x 128 floats = 32 KiB) next to P and a V_j
//           chunk would not fit 48 KiB.
//   softmax in registers, at the start of a tile's first V stage: row 4 ty + i lives in the 16
//           threads of one half-warp (same ty), which merge the row max and the row sum by 4 shuffles
//           each (xor 8, 4, 2, 1 stay inside the half-warp); all 16 hold the row's (m, l) and alpha, and
//           rescale their own O entries of the row. Masked keys (j > last_key, j >= Nk, rows >= Nq) get
//           P = 0 exactly, as in tiled_forward. P goes to shared memory Ps[64][kWidePLd = 68].
//   O       O_i [64 x 128] in registers, 4 x 8 per thread: rows 4 ty + i (the rows whose alpha the
//           thread already holds), columns 16 k + tx (k < 8). V_j streams kWideK = 16 keys at a time,
//           Vc[key][128] (zeros past d). Per key a thread loads 4 values of P (Ps[4 ty + i][key]) and
//           8 of V (Vc[key][16 k + tx]) for 32 FMAs: 0.375 loads per FMA (tiled_forward: 0.5).
//   P's rows 8 w .. 8 w + 7 are written and read only by warp w, so a __syncwarp orders them (no
//   block barrier); the warp's next write, a tile later, follows its last read in program order.
//
// Pipeline. A KV tile is nS = ceil(d / 16) S stages (Q, K columns) then 4 V stages (16 keys each); the
// stages of all visited tiles form one sequence. Stage g + 1's global loads (8 floats per thread:
// 4 of Q and 4 of K, or 8 of V) are issued into registers before stage g's FMAs, stored into the other
// of two shared buffers after them, and ONE barrier ends the stage: that buffer was last read in stage
// g - 1 (before the previous barrier) and is next read in stage g + 1 (after this one). The softmax
// runs before the first V stage's prefetch is issued: with the 8 prefetch registers live during it,
// ptxas spilled 4-8 bytes at the 128-register cap. Per thread, an S stage is 16 x 16 = 256 FMAs and a
// V stage 16 x 32 = 512, so d = 128 gives 8 x 256 + 4 x 512 = 4096 FMAs per 12 barriers per 64 keys
// (tiled_forward: 512 per 3 barriers per 16 keys, half as many FMAs per barrier), and 96 global floats
// copied per 4096 FMAs. Ragged d, Nq, Nk: zeros are loaded past d (Q, K and V columns: 0 x 0 adds
// exactly 0 to S; O's columns past d are never stored) and past Nk (K, V rows; their P is 0 anyway);
// causal: whole KV tiles past the last row's last key are not visited, and a block whose rows all see
// no key stores O = 0, L = m = -inf without a barrier. How much faster this runs than tiled_forward is
// an ESTIMATE until a GPU times it (bench_gpu prints both rows and their ratio): nothing is timed here.
//
// Banks (word a in bank a mod 32), one warp, ty in {2 w, 2 w + 1}, tx = lane % 16:
//   Qc[c][4 ty + i]      2 words (one per half-warp), banks 8 w + i and + 4 apart: broadcast, 1 wavefront.
//   Kc[c][16 j + tx]     16 consecutive words, read by both half-warps: 1 wavefront.
//   Ps[4 ty + i][key]    2 words 4 rows apart: 4 x 68 = 272 = 16 mod 32, different banks: 1 wavefront.
//   Vc[key][16 k + tx]   16 consecutive words: 1 wavefront.
//   P stores Ps[4 ty + i][16 j + tx]: words tx and tx + 16 (rows 4 apart): 32 banks. Q, K stores
//   (element e = t + 256 l: row e / 16, column e % 16, coalesced along d in global memory) go to
//   Qc[e % 16][e / 16]: word 66 c + row, bank 2 c + row mod 32 over 16 c and 2 rows: 32 banks. V stores
//   are 32 consecutive words. The row stride 66 (not 64 + 4 = 68) is what makes the transposed stores
//   conflict-free (68: 4 c + row, two-way); the reads only need the two rows of a warp in distinct banks.
// Shared memory: 2 buffers x 2 x 16 x 66 floats (a V chunk, 16 x 128, fits in one) + 64 x 68 for P
//   = (4224 + 4352) x 4 = 34,304 bytes, whatever d is (< 48 KiB, no opt-in).
// ptxas (nvcc 13.0, -Xptxas -v, the nvcc_check flags), sm_80 and sm_90: 128 registers (the cap of
//   __launch_bounds__(256, 2)), no stack, no spills; tiled_forward 64 registers on both. Per SM (64K
//   registers, 228 KiB shared): 2 blocks of 8 warps (registers; shared memory would allow 6) = 16 warps,
//   25 % occupancy, as gemm_batched; tiled_forward: 8 blocks of 4 warps = 32 warps, 50 %.
//   B8 N4096: 512 blocks over 132 SMs x 2 = 1.9 waves.
constexpr int kWideTy = kWideThreads / 16;     // 16 thread rows (4 query rows each)
constexpr int kWideLd = kWideBr + 2;           // Qc, Kc row stride (floats)
constexpr int kWidePLd = kWideBc + 4;          // Ps row stride
constexpr int kWideBuf = 2 * kWideK * kWideLd; // one pipeline buffer: Qc and Kc, or Vc
constexpr int kWideVStages = kWideBc / kWideK; // V stages per KV tile
constexpr int kWideLoads = 8;                  // global floats a thread copies per stage
static_assert(kWideTy * 4 == kWideBr && 16 * 4 == kWideBc && kWideThreads == 256, "4 x 4 blocks of S cover the tile");
static_assert(16 * 8 == kMaxHeadDim, "4 x 8 blocks of O cover [64, kMaxHeadDim]");
static_assert(kWideK * kMaxHeadDim <= kWideBuf, "a V chunk fits in one buffer");
static_assert(2 * kWideBr * kWideK == kWideLoads * kWideThreads && kWideK * kMaxHeadDim == kWideLoads * kWideThreads,
              "each thread copies 8 floats per stage, either kind");

__global__ void __launch_bounds__(kWideThreads, 2)
    tiled_forward_wide(Dims p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  SIMT_DYNAMIC_SHARED(float, smem);
  const int d = p.d, t = threadIdx.x, ty = t / 16, tx = t % 16;
  const int r0 = blockIdx.x * kWideBr, br = min(kWideBr, p.Nq - r0);
  const size_t bh = blockIdx.y;
  float* Ps = smem + 2 * kWideBuf;
  const float* Qh = Q + (bh * p.Nq + r0) * d;
  const float* Kh = K + bh * p.Nk * d;
  const float* Vh = V + bh * p.Nk * d;
  float* Oh = O + (bh * p.Nq + r0) * d;

  const int kmax = last_key(p, r0 + br - 1);  // causal: tiles past the last row's last key are skipped
  const int tiles = kmax < 0 ? 0 : kmax / kWideBc + 1;
  if (tiles == 0) {  // every row fully masked (the same for the whole block): O = 0, L = m = -inf
    write_masked_tile(p, bh, r0, br, Oh, L, m, kWideThreads);
    return;
  }
  const int nS = (d + kWideK - 1) / kWideK, per_tile = nS + kWideVStages, stages = tiles * per_tile;

  // Stage g's 8 global floats into registers: S stage (columns 16 s ..) 4 of Q_i (scaled) and 4 of K_j,
  // element e = t + 256 l -> row e / 16, column e % 16; V stage (keys 16 v ..) 8 of V_j, element
  // e = t + 256 l -> key e / 128, column e % 128. Zeros past Nq, Nk and d.
  auto fetch = [&](int g, float (&x)[kWideLoads]) {
    const int jt = g / per_tile, s = g % per_tile, c0 = jt * kWideBc;
    if (s < nS) {
      for (int l = 0; l < 4; ++l) {
        const int e = t + kWideThreads * l, row = e / kWideK, c = s * kWideK + e % kWideK;
        x[l] = row < br && c < d ? p.scale * Qh[(size_t)row * d + c] : 0.0f;
        x[4 + l] = c0 + row < p.Nk && c < d ? Kh[(size_t)(c0 + row) * d + c] : 0.0f;
      }
    } else {
      const int k0 = c0 + (s - nS) * kWideK;
      for (int l = 0; l < kWideLoads; ++l) {
        const int e = t + kWideThreads * l, key = k0 + e / kMaxHeadDim, c = e % kMaxHeadDim;
        x[l] = key < p.Nk && c < d ? Vh[(size_t)key * d + c] : 0.0f;
      }
    }
  };
  auto stash = [&](int g, const float (&x)[kWideLoads]) {  // into buffer g % 2
    float* buf = smem + (g & 1) * kWideBuf;
    if (g % per_tile < nS) {
      for (int l = 0; l < 4; ++l) {
        const int e = t + kWideThreads * l, row = e / kWideK, c = e % kWideK;
        buf[c * kWideLd + row] = x[l];                         // Qc[c][row]
        buf[(kWideK + c) * kWideLd + row] = x[4 + l];          // Kc[c][key]
      }
    } else {
      for (int l = 0; l < kWideLoads; ++l) buf[t + kWideThreads * l] = x[l];  // Vc[key][c], 128 per key
    }
  };

  float mi[4], li[4], o[4][8], s[4][4];  // rows 4 ty + i: (m, l); O columns 16 k + tx; S keys 16 j + tx
  for (int i = 0; i < 4; ++i) {
    mi[i] = -INFINITY, li[i] = 0.0f;
    for (int k = 0; k < 8; ++k) o[i][k] = 0.0f;
  }

  float x[kWideLoads];
  fetch(0, x);
  stash(0, x);
  __syncthreads();  // stage 0's buffer is complete
  for (int g = 0; g < stages; ++g) {
    const int jt = g / per_tile, st = g % per_tile;
    if (st == nS) {  // S_ij complete: the §3.7 merge per row, P to shared memory (before the fetch: registers)
      const int c0 = jt * kWideBc, bc = min(kWideBc, p.Nk - c0);
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * ty + i, last = r < br ? last_key(p, r0 + r) : -1;  // -1: no key (or past Nq)
        const int visible = max(0, min(last - c0 + 1, bc));  // the same in the row's 16 threads
        float m_new = mi[i];  // stays m_old (alpha 1, P 0) when none of the row is in the tile
        for (int j = 0; j < 4; ++j)
          if (16 * j + tx < visible) m_new = fmaxf(m_new, s[i][j]);
        for (int off = 8; off > 0; off >>= 1)  // every lane shuffles; xor < 16 stays in the half-warp
          m_new = fmaxf(m_new, __shfl_xor_sync(0xffffffffu, m_new, off));
        const float alpha = visible == 0 ? 1.0f : expf(mi[i] - m_new);  // 0 while m_old = -inf
        float rowsum = 0.0f;
        for (int j = 0; j < 4; ++j) {
          const float pij = 16 * j + tx < visible ? expf(s[i][j] - m_new) : 0.0f;
          Ps[r * kWidePLd + 16 * j + tx] = pij;
          rowsum += pij;
        }
        for (int off = 8; off > 0; off >>= 1) rowsum += __shfl_xor_sync(0xffffffffu, rowsum, off);
        li[i] = alpha * li[i] + rowsum;
        mi[i] = m_new;
        for (int k = 0; k < 8; ++k) o[i][k] *= alpha;  // O_i = diag(alpha) O_i, before + P V_j
      }
      __syncwarp();  // P's rows 8 w .. 8 w + 7 are written and read by warp w only
    }
    if (g + 1 < stages) fetch(g + 1, x);  // in flight during this stage's FMAs
    const float* buf = smem + (g & 1) * kWideBuf;
    if (st < nS) {  // S += Qc Kc^T over this stage's 16 head-dim columns
      if (st == 0)
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
      const float* Qc = buf;
      const float* Kc = buf + kWideK * kWideLd;
      for (int c = 0; c < kWideK; ++c) {
        float a[4], b[4];
        for (int i = 0; i < 4; ++i) a[i] = Qc[c * kWideLd + 4 * ty + i];
        for (int j = 0; j < 4; ++j) b[j] = Kc[c * kWideLd + 16 * j + tx];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) s[i][j] += a[i] * b[j];
      }
    } else {  // O += P[:, 16 v ..] Vc over this stage's 16 keys
      const float* Pv = Ps + (st - nS) * kWideK;
      for (int j = 0; j < kWideK; ++j) {
        float pr[4], v[8];
        for (int i = 0; i < 4; ++i) pr[i] = Pv[(4 * ty + i) * kWidePLd + j];
        for (int k = 0; k < 8; ++k) v[k] = buf[j * kMaxHeadDim + 16 * k + tx];
        for (int i = 0; i < 4; ++i)
          for (int k = 0; k < 8; ++k) o[i][k] += pr[i] * v[k];
      }
    }
    if (g + 1 < stages) stash(g + 1, x);
    __syncthreads();  // stage g + 1's buffer is complete, and nobody reads buffer g % 2 any more
  }

  for (int i = 0; i < 4; ++i) {  // deferred normalisation: O_i / l (l = 0: fully masked row)
    const int r = 4 * ty + i;
    if (r >= br) break;
    for (int k = 0; k < 8; ++k)
      if (16 * k + tx < d) Oh[(size_t)r * d + 16 * k + tx] = li[i] == 0.0f ? 0.0f : o[i][k] / li[i];
    if (tx == 0) {
      L[bh * p.Nq + r0 + r] = li[i] == 0.0f ? -INFINITY : mi[i] + logf(li[i]);
      if (m) m[bh * p.Nq + r0 + r] = mi[i];
    }
  }
}

}  // namespace

namespace detail {

void launch_tiled_wide(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const size_t smem = sizeof(float) * (2 * (size_t)kWideBuf + (size_t)kWideBr * kWidePLd);  // 34,304 bytes
  const dim3 grid(blocks_for((size_t)p.Nq, kWideBr), (unsigned)(p.B * p.H));
  simt::launch(tiled_forward_wide, grid, dim3(kWideThreads), smem, p, Q, K, V, O, L, m);
}

}  // namespace detail
}  // namespace ladder::cuda::attention
