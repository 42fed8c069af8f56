// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// cuda/src/02-attention/attention_bf16.cuh -- stage 02: the tiled attention forward in bf16 on tensor cores, in
// FlashAttention-2's order (Dao 2023, Alg. 1 and §3.3), on cuda/simt/tensor_core.hpp (ldmatrix, mma.sync m16n8k16
// bf16 -> fp32, cp.async). The kernel template lives here so that tests/02-attention/test_attention_bf16_planted.cu
// can instantiate it with a planted mistake; attention_bf16.cu instantiates the correct one and launches it.
//
//   02 attention   naive -> flash -> tiled (fp32 CUDA cores) -> tiled_bf16 (tensor cores)  <== this file
//
// Inputs Q [B,H,Nq,d], K, V [B,H,Nk,d] are bf16 bit patterns (uint16_t); O [B,H,Nq,d] and L [B,H,Nq] are fp32
// with the semantics of the fp32 rungs (causal aligned bottom-right, a fully masked row has O = 0, L = -inf).
// S = Q K^T and O = P V are bf16 x bf16 products accumulated in fp32 by the mma; the softmax is fp32; P is
// rounded to bf16 once, in registers, to be the A operand of P V (the only rounding beyond fp32's).
//
// Block: 4 warps (128 threads) per (batch x head, 64 query rows); warp w owns rows 16 w .. 16 w + 15.
//   Q     the block's 64 x d tile is copied once (cp.async) and each warp loads its 16 rows into registers as
//         mma A fragments (ldmatrix.x4): qf[d / 16][4], 32 registers at d = 128.
//   K, V  tiles of 64 keys x d through shared memory. The loads form one sequence of items K_0, V_0, K_1,
//         V_1, ... in a ring of three 64 x d regions (Q's region is the third once Q sits in registers):
//         item i goes to region (i + 1) % 3. Step s (one per item) is: wait_group<1> (item s complete; item
//         s + 1 may still be in flight), __syncthreads (item s visible to all; every warp is done with item
//         s - 1), issue item s + 2 into item s - 1's region, commit, compute on item s. So two items (one
//         whole K, V tile) are in flight behind each compute, with one barrier per item, and shared memory is
//         3 x 64 x d x 2 bytes = 48 KiB at d = 128 (24 KiB at d = 64): the default limit, no opt-in.
//   S     S_j = Q K_j^T: per warp 16 x 64 = 8 n-tiles of m16n8, 32 fp32 registers per lane. K_j's rows are
//         the mma's "col" B operand as stored (key-major, d contiguous): ldmatrix.x4 without .trans gives
//         the B fragments of two n-tiles (16 keys) for one k16 step of d.
//   softmax in fp32 on the S fragments, in log2 units: s' = S * scale * log2(e), p = exp2(s' - m'). A lane
//         holds 16 entries of rows g and g + 8 (g = lane / 4); the row max is shared by the 4 lanes of a
//         quad (__shfl_xor_sync 1, 2); the row sum l stays per lane (every lane of a quad uses the same
//         m', so the partial sums rescale alike) and is summed over the quad once, at the end.
//   P V   the C fragment of S's n-tiles 2k, 2k + 1 (rows g, g + 8; keys 2t, 2t + 1 of each) is exactly the
//         A fragment of a k16 step (FA2's register reuse): P goes to bf16 pairs (cvt.rn.bf16x2.f32) and
//         straight into the mma, never through shared memory. V_j is stored key-major, the B operand
//         wants pairs of keys per register: ldmatrix.x4.trans gives two d n-tiles of one k16 step.
//   O     fp32 in registers, d / 8 n-tiles (64 registers at d = 128), rescaled by alpha = exp2(m'_old - m')
//         per tile, divided by l at the end; L = ln 2 * (m' + log2 l), evaluated in double and rounded once.
// Masks: causal tiles past the block's last row's last key are not visited; a tile that holds a key some
// row of the block may not see (causal diagonal, or the tail past Nk) gets s' = -inf there. K, V rows past
// Nk and Q rows past Nq are zero-filled by cp.async (src_bytes = 0), so 0 * V adds nothing (never NaN).
// Causal blocks run in reverse order (the longest rows first) to balance the last wave.
//
// Shared memory rows are d bf16 = d / 8 chunks of 16 bytes, XOR-swizzled: logical chunk c of row r sits at
// chunk c ^ (r % 8). Every ldmatrix reads 8 rows at one logical chunk, which land in 8 distinct 16-byte
// columns of a 128-byte line (all 32 banks once): conflict-free without padding (padding would push d = 128
// past 48 KiB). The cp.async stores (8 consecutive threads: one row's 8 chunks of a 128-byte line) are too.
// ptxas (nvcc 13.0, -Xptxas -v, the nvcc_check flags), __launch_bounds__(128, 1): d = 128 uses 242 (sm_80) / 246
// (sm_90) registers, d = 64 162 / 163; no stack, no spills. (__launch_bounds__(128) alone left d = 64 at 128
// registers with 24 bytes spilled on sm_90.) Per SM at d = 128: 2 blocks (registers; 64K / (128 x 246)), 8 warps.
// How fast this runs against SDPA's flash backend is for a GPU run to say (bench_gpu, gpu-check's report).
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attention_common.cuh"
#include "ladder/core/formats.hpp"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"
#include "tensor_core.hpp"

#if defined(__CUDACC__)
#define LADDER_BF16_UNROLL _Pragma("unroll")
#else
#define LADDER_BF16_UNROLL
#endif

namespace ladder::cuda::attention {
namespace {

inline constexpr int kBf16Rows = 64, kBf16Keys = 64, kBf16Threads = 128;

// Planted mistakes (tests/02-attention/test_attention_bf16_planted.cu); the library runs Bf16Plant::none.
// p_truncate (tests/07-precision/test_attn_bf16_cuda_planted.cu): P rounded toward zero where RNE is declared.
enum class Bf16Plant { none, missing_wait, missing_barrier, quad_mask, causal_off_by_one, p_truncate };

// Two floats to a bf16x2 register, round to nearest even, `lo` in the low half (the lower index).
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
#if defined(__CUDACC__)
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return unsigned(ladder::formats::to_bf16(lo)) | unsigned(ladder::formats::to_bf16(hi)) << 16;
#endif
}

// P's pair for the P V mma: RNE, or (planted) the upper halves of the floats, bf16 rounded toward zero.
template <Bf16Plant Plant>
__device__ __forceinline__ unsigned pack_p(float lo, float hi) {
  if constexpr (Plant == Bf16Plant::p_truncate)
    return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
  else
    return pack_bf16x2(lo, hi);
}

// Element offset of logical 16-byte chunk c of row r in a swizzled 64 x D tile.
template <int D>
__device__ __forceinline__ int swizzled(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <int D, Bf16Plant Plant = Bf16Plant::none>
__global__ void __launch_bounds__(kBf16Threads, 1)
    tiled_forward_bf16(Dims p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L) {
  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  constexpr int kChunks = D / 8, kTile = kBf16Rows * D, kPerThread = kBf16Keys * kChunks / kBf16Threads;
  SIMT_DYNAMIC_SHARED(uint16_t, smem);
  const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, tq = lane % 4;
  const int qt = p.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int r0 = qt * kBf16Rows, br = min(kBf16Rows, p.Nq - r0);
  const size_t bh = blockIdx.y;
  const uint16_t* Qh = Q + (bh * p.Nq + r0) * D;
  const uint16_t* Kh = K + bh * p.Nk * D;
  const uint16_t* Vh = V + bh * p.Nk * D;
  float* Oh = O + (bh * p.Nq + r0) * D;

  const int kmax = last_key(p, r0 + br - 1);
  const int tiles = kmax < 0 ? 0 : kmax / kBf16Keys + 1;
  if (tiles == 0) {  // every row of the block fully masked (causal, Nq > Nk): O = 0, L = -inf
    write_masked_tile(p, bh, r0, br, Oh, L, nullptr, kBf16Threads);
    return;
  }
  // The first key some row of the block may not see: tiles from there on are masked element by element.
  const int mask_from = min(last_key(p, r0) + 1, p.Nk);

  // 64 rows of a [rows, D] bf16 array into a swizzled region; rows >= `valid` zero-filled.
  auto load = [&](uint16_t* dst, const uint16_t* src, int valid) {
    LADDER_BF16_UNROLL
    for (int i = 0; i < kPerThread; ++i) {
      const int e = t + kBf16Threads * i, row = e / kChunks, c = e % kChunks;
      const bool ok = row < valid;
      simt::cp_async_cg(dst + swizzled<D>(row, c), src + size_t(ok ? row : 0) * D + c * 8, ok ? 16 : 0);
    }
  };
  auto region = [&](int item) { return smem + ((item + 1) % 3) * kTile; };
  auto issue = [&](int item) {  // item 2 j: K_j, 2 j + 1: V_j
    const int c0 = (item / 2) * kBf16Keys;
    load(region(item), (item % 2 ? Vh : Kh) + size_t(c0) * D, p.Nk - c0);
  };

  load(smem, Qh, br);  // region 0
  issue(0);
  simt::cp_async_commit_group();  // Q, K_0
  issue(1);
  simt::cp_async_commit_group();  // V_0
  simt::cp_async_wait_group<1>();
  __syncthreads();

  unsigned qf[D / 16][4];  // the warp's 16 rows of Q as A fragments, one per k16 step of d
  {
    const int row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    LADDER_BF16_UNROLL
    for (int kk = 0; kk < D / 16; ++kk)
      simt::ldmatrix_x4(qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], smem + swizzled<D>(row, 2 * kk + (lane >> 4)));
  }

  // S in log2 units: exp(x) = exp2(x log2 e). The factor in double, rounded once to float: S scale_log2 is then
  // fp32 S times scale times (1 + e), |e| <= u + 2^-52, as a recipe that scales in natural units (stage 07's
  // attn_bf16 rung relies on it; float(p.scale * float(log2 e)) would add the constant's own error, 0.22 u).
  const float scale_log2 = float(double(p.scale) * 1.4426950408889634);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g, g + 8: running max (log2 units), sum
  float o[D / 8][4];
  LADDER_BF16_UNROLL
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  unsigned pf[kBf16Keys / 16][4];  // P as A fragments, one per k16 step of keys

  for (int s = 0; s < 2 * tiles; ++s) {
    if constexpr (Plant != Bf16Plant::missing_wait) simt::cp_async_wait_group<1>();  // item s complete
    if (Plant != Bf16Plant::missing_barrier || s == 0)
      __syncthreads();  // item s visible to all warps; all are done with item s - 1 (and with Q, at s = 0)
    if (s + 2 < 2 * tiles) issue(s + 2);  // into item s - 1's region
    simt::cp_async_commit_group();        // possibly empty: every step commits one group, so <1> stays right
    const uint16_t* tile = region(s);
    const int c0 = (s / 2) * kBf16Keys;
    if (s % 2 == 0) {  // S = Q K_j^T, then the online softmax
      float sc[kBf16Keys / 8][4];
      LADDER_BF16_UNROLL
      for (int n = 0; n < kBf16Keys / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
      // TODO(lab: tiled_bf16): S_j = Q K_j^T on the tensor cores: for each k16 step kk of d and each pair of n-tiles (16 keys 16 n2 ..), one ldmatrix_x4 of K_j's rows from `tile` (key-major, swizzled: swizzled<D>(row, chunk)) gives the B fragments of both n-tiles -- lane l names key 16 n2 + (l % 8) + 8 (l / 16) at chunk 2 kk + (l / 8) % 2, so registers 0, 1 are keys 16 n2 .. + 7 (d rows 0-7, 8-15 of the step) and 2, 3 the next 8 keys -- then two mma_m16n8k16_bf16 with qf[kk] accumulate into sc[2 n2] and sc[2 n2 + 1] (chapter 02 §11).
      const bool masked = c0 + kBf16Keys > mask_from;
      float mx[2] = {-INFINITY, -INFINITY};
      LADDER_BF16_UNROLL
      for (int n = 0; n < kBf16Keys / 8; ++n)
        LADDER_BF16_UNROLL
        for (int i = 0; i < 4; ++i) {
          float x = sc[n][i] * scale_log2;
          if (masked) {
            const int row = r0 + 16 * warp + g + 8 * (i >> 1), k = c0 + 8 * n + 2 * tq + (i & 1);
            int last = last_key(p, row);
            if constexpr (Plant == Bf16Plant::causal_off_by_one) last += p.causal;
            if (k > last || k >= p.Nk) x = -INFINITY;
          }
          sc[n][i] = x;
          mx[i >> 1] = fmaxf(mx[i >> 1], x);
        }
      float alpha[2], mu[2];
      LADDER_BF16_UNROLL
      for (int h = 0; h < 2; ++h) {
        constexpr int first = Plant == Bf16Plant::quad_mask ? 4 : 1;  // planted: mixes rows g and g ^ 1
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], first));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float m_new = fmaxf(m[h], mx[h]);
        mu[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no visible key yet: p = 0, alpha = 0, no NaN
        alpha[h] = exp2f(m[h] - mu[h]);
        m[h] = m_new;
        l[h] *= alpha[h];
      }
      LADDER_BF16_UNROLL
      for (int n = 0; n < kBf16Keys / 8; ++n)
        LADDER_BF16_UNROLL
        for (int i = 0; i < 4; ++i) {
          sc[n][i] = exp2f(sc[n][i] - mu[i >> 1]);
          l[i >> 1] += sc[n][i];
        }
      LADDER_BF16_UNROLL
      for (int k = 0; k < kBf16Keys / 16; ++k) {
        pf[k][0] = pack_p<Plant>(sc[2 * k][0], sc[2 * k][1]);          // row g,     keys 16 k + 2 tq, + 1
        pf[k][1] = pack_p<Plant>(sc[2 * k][2], sc[2 * k][3]);          // row g + 8
        pf[k][2] = pack_p<Plant>(sc[2 * k + 1][0], sc[2 * k + 1][1]);  // row g,     keys 16 k + 8 + 2 tq, + 1
        pf[k][3] = pack_p<Plant>(sc[2 * k + 1][2], sc[2 * k + 1][3]);  // row g + 8
      }
      LADDER_BF16_UNROLL
      for (int n = 0; n < D / 8; ++n) {
        o[n][0] *= alpha[0], o[n][1] *= alpha[0];
        o[n][2] *= alpha[1], o[n][3] *= alpha[1];
      }
    } else {  // O += P V_j
      const int key = (lane & 7) + 8 * ((lane >> 3) & 1), chunk = lane >> 4;
      LADDER_BF16_UNROLL
      for (int k = 0; k < kBf16Keys / 16; ++k) {
        LADDER_BF16_UNROLL
        for (int n2 = 0; n2 < D / 16; ++n2) {
          unsigned b[4];
          simt::ldmatrix_x4_trans(b[0], b[1], b[2], b[3], tile + swizzled<D>(16 * k + key, 2 * n2 + chunk));
          const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          simt::mma_m16n8k16_bf16(o[2 * n2], pf[k], b0, o[2 * n2]);
          simt::mma_m16n8k16_bf16(o[2 * n2 + 1], pf[k], b1, o[2 * n2 + 1]);
        }
      }
    }
  }
  simt::cp_async_wait_all();  // nothing is in flight (the last steps committed empty groups); PTX wants it drained

  LADDER_BF16_UNROLL
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  LADDER_BF16_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * warp + g + 8 * h;
    if (row >= br) continue;
    const float inv = l[h] == 0.0f ? 0.0f : 1.0f / l[h];  // l = 0: a fully masked row, O = 0
    float* out = Oh + size_t(row) * D + 2 * tq;
    LADDER_BF16_UNROLL
    for (int n = 0; n < D / 8; ++n) out[8 * n] = o[n][2 * h] * inv, out[8 * n + 1] = o[n][2 * h + 1] * inv;
    // L = ln 2 (m' + log2 l) in double, rounded once to float (as fl(m + log l) in natural units, up to 2^-51 |L|).
    if (tq == 0)
      L[bh * p.Nq + r0 + row] =
          l[h] == 0.0f ? -INFINITY : float(0.6931471805599453 * (double(m[h]) + double(log2f(l[h]))));
  }
}

inline size_t bf16_shared_bytes(int d) { return size_t(3) * kBf16Rows * size_t(d) * sizeof(uint16_t); }

template <int D, Bf16Plant Plant = Bf16Plant::none>
void launch_bf16(const Dims& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L) {
  const dim3 grid(blocks_for(size_t(p.Nq), kBf16Rows), unsigned(p.B * p.H));
  simt::launch(tiled_forward_bf16<D, Plant>, grid, dim3(kBf16Threads), bf16_shared_bytes(D), p, Q, K, V, O, L);
}

}  // namespace
}  // namespace ladder::cuda::attention
