// cuda/src/03_mla_flash.cu -- stage 03 CUDA rung flash_mla: the fused split-KV decode kernel and the
// combine kernel (the algorithm of ladder/mla/flash.hpp).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla)       <== this file (flash_mla)
//
// flash_split: a block per (split s, sequence b, head group of kFlashHeads heads). The group's query
// rows Q = [q_abs | q^R] (576 dims at DeepSeek-V2 shapes) stay in shared memory; the split's tokens
// (a whole number of 64-row pages, never past L_b) stream through shared memory kFlashTileTokens rows
// at a time, read through the block table -- once per head group: the G heads reuse each row loaded.
// Per tile:
//   1. the block copies the tile's rows in;                                        barrier
//   2. scores S[g, t] = scale * Q_g . row_t, four lanes per (head, token) pair, each a strided partial
//      dot product, summed by shuffles (G T 4 = 128: every thread works);        barrier
//   3. one thread per head: m' = max(m, max_t S), P = e^{S - m'}, l = l e^{m - m'} + sum P,
//      alpha = e^{m - m'};                                                          barrier
//   4. every thread: o[g, r] = alpha_g o[g, r] + sum_t P[g, t] row_t[r] for its columns r < kv_lora
//      (V is the first kv_lora dims of the same row: K = V);                        barrier
// then writes o_s = o / l and lse_s = m + log l. All H heads of a group reuse each row they load --
// the 2 H FLOPs per cached element that make MLA compute-bound on a GPU once h_q s_q >= ~128 (FlashMLA).
// flash_combine: a block per (b, h) merges the splits: lse = log sum_s e^{lse_s},
// o^lat = sum_s e^{lse_s - lse} o_s.
// Shared memory per block (flash_split_smem_bytes): (G + T) ld + G T + 3 G floats, ld = D rounded up
// to 4 mod 32: 28.0 KB at DeepSeek-V2 shapes (G = 4, T = 8, D = 576, ld = 580), so 8 blocks of 4 warps
// fit in an H100 SM's 228 KiB (16 tokens and ld = D took 46.4 KB: 4 blocks). Banks (CUDA C Programming
// Guide, shared-memory banks: word a is in bank a mod 32): in step 2, lane l of warp g reads token
// t = l / 4 at dim part + 4 i (part = l % 4), word t ld + part + 4 i, bank 4 t + part + 4 i (mod 32):
// 32 different banks; with ld = 576 = 0 mod 32 the tokens shared a bank. Its q reads are 4 words in 4
// banks, broadcast to 8 lanes each. Step 4 reads consecutive columns of one row: consecutive banks.
#include <math.h>

#include "ladder/cuda/mla_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::mla {
namespace {

constexpr int G = kFlashHeads, TT = kFlashTileTokens, kDot = kFlashDotThreads, kPage = 64;
constexpr int kMaxCols = 4;  // columns of o per thread: kv_lora <= kMaxCols * kFlashThreads (512 at V2)

__global__ void flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                            const int64_t* seqlens, int64_t H, int64_t R, int64_t D, int64_t ld,
                            int64_t split_blocks, float scale, float* o_parts, float* lse_parts) {
  SIMT_DYNAMIC_SHARED(float, smem);  // ld = flash_row_stride(D), from the host (a plain C++ header)
  float* q_s = smem;            // [G, ld]
  float* tile = q_s + G * ld;   // [TT, ld]
  float* p_s = tile + TT * ld;  // [G, TT]: scores, then probabilities
  float* m_s = p_s + G * TT;    // [G] running max
  float* l_s = m_s + G;         // [G] running denominator
  float* a_s = l_s + G;         // [G] this tile's rescale e^{m - m'}
  const int64_t s = blockIdx.x, b = blockIdx.y, h0 = (int64_t)blockIdx.z * G, B = gridDim.y;
  const int64_t L = seqlens[b], j0 = s * split_blocks * kPage;
  if (j0 >= L) return;  // sequence b has fewer splits: the whole block leaves before any barrier
  const int64_t j1 = L < j0 + split_blocks * kPage ? L : j0 + split_blocks * kPage;
  const int gh = (int)(H - h0 < G ? H - h0 : G);
  const int tid = threadIdx.x, nt = blockDim.x;
  const int sg = tid / kDot / TT, st = tid / kDot % TT, part = tid % kDot;  // step 2: score (sg, st)

  for (int64_t x = tid; x < gh * D; x += nt) q_s[x / D * ld + x % D] = Q[(b * H + h0) * D + x];
  if (tid < gh) m_s[tid] = -INFINITY, l_s[tid] = 0.0f;
  float o[G][kMaxCols];
  for (int g = 0; g < G; ++g)
    for (int c = 0; c < kMaxCols; ++c) o[g][c] = 0.0f;
  __syncthreads();  // q_s, m_s, l_s are set before the first tile uses them

  for (int64_t j = j0; j < j1; j += TT) {
    const int n = (int)(j1 - j < TT ? j1 - j : TT);
    for (int64_t x = tid; x < n * D; x += nt) {  // a tile never crosses a page: 64 % TT == 0
      const int64_t tok = j + x / D;
      const int64_t blk = block_table[b * max_blocks + tok / kPage];
      tile[x / D * ld + x % D] = blocks[(blk * kPage + tok % kPage) * D + x % D];
    }
    __syncthreads();  // 1: the tile is complete before the scores read it
    {
      const bool mine = sg < gh && st < n;
      float acc = 0.0f;
      if (mine)
        for (int64_t d = part; d < D; d += kDot) acc += q_s[sg * ld + d] * tile[st * ld + d];
      for (int off = kDot / 2; off > 0; off >>= 1)  // every lane shuffles: the full mask is legal
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (mine && part == 0) p_s[sg * TT + st] = scale * acc;
    }
    __syncthreads();  // 2: every score is in p_s before the softmax step reads its row
    if (tid < gh) {
      float* row = p_s + tid * TT;
      float m_new = m_s[tid];
      for (int t = 0; t < n; ++t) m_new = fmaxf(m_new, row[t]);
      float sum = 0.0f;
      for (int t = 0; t < n; ++t) sum += (row[t] = expf(row[t] - m_new));
      a_s[tid] = expf(m_s[tid] - m_new);  // 0 on the first tile (m = -inf)
      l_s[tid] = l_s[tid] * a_s[tid] + sum;
      m_s[tid] = m_new;
    }
    __syncthreads();  // 3: P, alpha, m, l are written before every thread updates its columns
    for (int g = 0; g < gh; ++g)
      for (int c = 0; c < kMaxCols; ++c) {
        const int64_t r = tid + (int64_t)c * nt;
        if (r >= R) break;
        float acc = o[g][c] * a_s[g];
        for (int t = 0; t < n; ++t) acc += p_s[g * TT + t] * tile[t * ld + r];
        o[g][c] = acc;
      }
    __syncthreads();  // 4: everyone is done with tile and p_s before the next tile overwrites them
  }
  for (int g = 0; g < gh; ++g) {
    float* out = o_parts + ((s * B + b) * H + h0 + g) * R;
    for (int c = 0; c < kMaxCols; ++c) {
      const int64_t r = tid + (int64_t)c * nt;
      if (r < R) out[r] = o[g][c] / l_s[g];
    }
  }
  if (tid < gh) lse_parts[(s * B + b) * H + h0 + tid] = m_s[tid] + logf(l_s[tid]);
}

// A block per (b, h): the splits of sequence b merged by log-sum-exp.
__global__ void flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t H,
                              int64_t R, int64_t split_blocks, float* o_lat, float* lse) {
  const int64_t b = blockIdx.x, h = blockIdx.y, B = gridDim.x;
  const int64_t pages = (seqlens[b] + kPage - 1) / kPage, splits = (pages + split_blocks - 1) / split_blocks;
  float mx = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) mx = fmaxf(mx, lse_parts[(s * B + b) * H + h]);
  float sum = 0.0f;
  for (int64_t s = 0; s < splits; ++s) sum += expf(lse_parts[(s * B + b) * H + h] - mx);
  const float total = mx + logf(sum);
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    float acc = 0.0f;
    for (int64_t s = 0; s < splits; ++s)
      acc += expf(lse_parts[(s * B + b) * H + h] - total) * o_parts[((s * B + b) * H + h) * R + r];
    o_lat[(b * H + h) * R + r] = acc;
  }
  if (threadIdx.x == 0) lse[b * H + h] = total;
}

}  // namespace

namespace detail {

void launch_flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                        const int64_t* seqlens, int64_t B, int64_t H, int64_t R, int64_t D, int64_t split_blocks,
                        int64_t max_splits, float scale, float* o_parts, float* lse_parts) {
  const size_t smem = (size_t)flash_split_smem_bytes(D);
  const dim3 grid((unsigned)max_splits, (unsigned)B, (unsigned)((H + G - 1) / G));
  simt::launch(flash_split, grid, dim3(kFlashThreads), smem, Q, blocks, block_table, max_blocks, seqlens, H, R, D,
               flash_row_stride(D), split_blocks, scale, o_parts, lse_parts);
}

void launch_flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t B,
                          int64_t H, int64_t R, int64_t split_blocks, float* o_lat, float* lse) {
  simt::launch(flash_combine, dim3((unsigned)B, (unsigned)H), dim3(128), 0, o_parts, lse_parts, seqlens, H, R,
               split_blocks, o_lat, lse);
}

}  // namespace detail
}  // namespace ladder::cuda::mla
