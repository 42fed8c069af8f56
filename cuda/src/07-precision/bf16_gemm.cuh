// cuda/src/07-precision/bf16_gemm.cuh -- stage 07: the bf16 GEMM on tensor cores, C [M, N] fp32 = A [M, K]
// B [N, K]^T with A, B bf16 row-major ("NT", as the project's fp32 GEMM), on cuda/simt/tensor_core.hpp:
// mma.sync m16n8k16 bf16 -> fp32, ldmatrix.x4, cp.async.cg with commit / wait_group. Private to cuda/src
// (bf16_gemm.cu launches it); a test includes it to plant mistakes in this very kernel (Plant below).
//
//   block   128 threads = 4 warps, one 128 x 128 tile of C (blockIdx.y: rows, blockIdx.x: columns);
//           warp w owns rows 64 (w / 2) .. + 63 and columns 64 (w % 2) .. + 63: 4 x 8 mma tiles of 16 x 8,
//           128 fp32 accumulators per thread. Why 64 x 64 per warp: per 16-wide k block a warp's ldmatrix
//           reads 4 KiB of shared memory for 131 kFLOP (64 x 32: 3 KiB for 66 kFLOP); at mma.sync rates
//           shared-memory bandwidth (128 B/clock/SM), not the tensor cores, bounds the smaller warp tile.
//   K loop  steps of 32. A's 128 x 32 and B's 128 x 32 slices of a step go to shared memory by cp.async.cg,
//           16 bytes (8 bf16) per copy, 4 + 4 per thread, in a 3-stage ring: while step kt is multiplied,
//           steps kt + 1 and kt + 2 are in flight. One commit group per step (empty past the end, so
//           wait_group<1> always means "the next step has landed"), then one barrier per step, which also
//           orders every warp's reads of the slot about to be refilled before its refill.
//   regs    fragments in two register buffers: k block 1 of step kt is loaded before block 0's mma issue,
//           and block 0 of step kt + 1 (after that step's wait and barrier) before block 1's, so ldmatrix
//           latency hides behind mma. __launch_bounds__(128, 2): two blocks (8 warps) per SM; ptxas (CUDA
//           13.0) uses 228 registers on sm_80 and 248 on sm_90, no spill.
//   shared  a slice is 32 bf16 = 4 chunks of 16 bytes per row; chunk c of row r sits at chunk position
//           c ^ ((r / 2) % 4). ldmatrix reads 8 rows at one chunk per 8-lane phase: without the swizzle rows
//           r and r + 2 (64 bytes apart) share banks (4-way conflict); with it the 8 rows hit 8 different
//           16-byte bank groups. 3 stages x 2 operands x 8 KiB = 48 KiB, the static limit.
//   frags   per 16-wide k half of a slice: A's 16 x 16 fragment of mma row tile i by one ldmatrix.x4 (lanes
//           0-15 address rows 0-15 at k 0-7, lanes 16-31 the same rows at k 8-15: registers a0..a3 of the
//           ISA's table); B's [n][k] rows are the mma's column-major k x 8 operand as they stand, so one
//           non-transposed ldmatrix.x4 gives b0, b1 of two n tiles (lanes 0-7: n 0-7 k 0-7, 8-15: n 0-7
//           k 8-15, 16-23: n 8-15 k 0-7, 24-31: n 8-15 k 8-15).
//   edges   K % 8 == 0 (the host refuses other K): a 16-byte chunk is wholly inside or outside a row.
//           Rows past M or N and chunks past K are copied with src_bytes = 0 (zero-filled), so they add
//           products of 0; stores are masked to row < M, column < N.
//
// Accumulation order, per output c[i][j]: acc = 0, then for k-blocks of 16 in order (k = 0..15, 16..31,
// ..., up to 32 ceil(K / 32), the tail zero-filled) acc = mma(acc + the block's 16 exact products); the
// order inside one mma is the hardware's (under SIMT: sequential fp32 additions, cuda/simt/detail/
// tensor_core.hpp).
#pragma once
#include <stdint.h>

#include "simt.hpp"
#include "tensor_core.hpp"

namespace ladder::cuda::precision {
namespace {

constexpr int kBfTile = 128, kBfStep = 32, kBfStages = 3, kBfThreads = 128;
constexpr int kBfWarpRows = 64, kBfWarpCols = 64;                                   // a warp's tile of C
constexpr int kBfMi = kBfWarpRows / 16, kBfNi = kBfWarpCols / 8, kBfChunks = kBfStep / 8;  // 4, 8, 4
constexpr int kBfSlice = kBfTile * kBfStep;                                          // bf16 per operand per stage
constexpr int kBfCopies = kBfTile * kBfChunks / kBfThreads;  // 16-byte copies per thread per operand per step
static_assert(kBfCopies * kBfThreads == kBfTile * kBfChunks, "the threads split a slice's chunks evenly");
static_assert(kBfStages * 2 * kBfSlice * 2 <= 48 * 1024, "the ring fits the 48 KiB static shared limit");

// The planted mistakes the tests keep (tests/07-precision/test_bf16_gemm_cuda.cu); none is the kernel.
enum class Plant { none, ldmatrix_row, no_wait, store_mask };

// Element offset of chunk `chunk` (k = 8 chunk .. + 7) of row `row` in a [128][32] slice, swizzled.
__device__ __forceinline__ int bf_swizzle(int row, int chunk) {
  return row * kBfStep + ((chunk ^ ((row >> 1) & 3)) << 3);
}

// cp.async of one step's slice: rows row0 .. row0 + 127 of g [rows, K], k0 .. k0 + 31; rows past `rows`
// and chunks past K zero-filled (the source address is then g itself, never read).
__device__ __forceinline__ void bf_load_slice(uint16_t* s, const uint16_t* g, int row0, int rows, int K, int k0) {
  for (int i = 0; i < kBfCopies; ++i) {
    const int id = threadIdx.x + i * kBfThreads, row = id >> 2, chunk = id & 3, k = k0 + 8 * chunk;
    const bool in = row0 + row < rows && k < K;
    simt::cp_async_cg(s + bf_swizzle(row, chunk), in ? g + static_cast<int64_t>(row0 + row) * K + k : g,
                      in ? 16 : 0);
  }
}

// The fragments of one 16-wide k block: A's 4 row tiles, B's 4 column tiles. pa, pb: this lane's ldmatrix
// address for row tile 0 / column tiles 0-1; the others are 16 rows further (the swizzle repeats every 8 rows).
__device__ __forceinline__ void bf_load_fragments(unsigned (&af)[kBfMi][4], unsigned (&bf)[kBfNi][2],
                                                  const uint16_t* pa, const uint16_t* pb) {
  for (int i = 0; i < kBfMi; ++i)
    simt::ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], pa + 16 * i * kBfStep);
  for (int j = 0; j < kBfNi; j += 2)
    simt::ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], pb + 8 * j * kBfStep);
}

__device__ __forceinline__ void bf_mma(float (&acc)[kBfMi][kBfNi][4], const unsigned (&af)[kBfMi][4],
                                       const unsigned (&bf)[kBfNi][2]) {
  for (int i = 0; i < kBfMi; ++i)
    for (int j = 0; j < kBfNi; ++j) simt::mma_m16n8k16_bf16(acc[i][j], af[i], bf[j], acc[i][j]);
}

template <Plant P>
__global__ void __launch_bounds__(kBfThreads, 2) bf16_gemm_kernel(const uint16_t* a, const uint16_t* b, int M, int N,
                                                                  int K, float* c) {
  __shared__ __align__(16) uint16_t As[kBfStages][kBfSlice];
  __shared__ __align__(16) uint16_t Bs[kBfStages][kBfSlice];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = blockIdx.y * kBfTile, n0 = blockIdx.x * kBfTile;
  const int wm = (warp >> 1) * kBfWarpRows, wn = (warp & 1) * kBfWarpCols;
  const int steps = (K + kBfStep - 1) / kBfStep;

  float acc[kBfMi][kBfNi][4];
  for (int i = 0; i < kBfMi; ++i)
    for (int j = 0; j < kBfNi; ++j)
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // This lane's ldmatrix.x4 addresses in a slice, for k block h = 0, 1 of a step: A row a_row, chunk
  // 2 h + lane / 16; B row b_row, chunk 2 h + (lane / 8) % 2 (swizzled).
  const int a_row = wm + (P == Plant::ldmatrix_row ? (lane + 1) & 15 : lane & 15);
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3);
  const int a_off[2] = {bf_swizzle(a_row, lane >> 4), bf_swizzle(a_row, 2 + (lane >> 4))};
  const int b_off[2] = {bf_swizzle(b_row, (lane >> 3) & 1), bf_swizzle(b_row, 2 + ((lane >> 3) & 1))};
  // Fragments in two register buffers: k block 1 of a step (or block 0 of the next step) is loaded while
  // the mma of the block before it run.
  unsigned af[2][kBfMi][4], bf[2][kBfNi][2];

  for (int s = 0; s < kBfStages - 1; ++s) {
    if (s < steps) {
      bf_load_slice(As[s], a, m0, M, K, s * kBfStep);
      bf_load_slice(Bs[s], b, n0, N, K, s * kBfStep);
    }
    simt::cp_async_commit_group();
  }
  if constexpr (P != Plant::no_wait) simt::cp_async_wait_group<kBfStages - 2>();  // step 0 has landed ...
  __syncthreads();                                                                 // ... for every thread
  bf_load_fragments(af[0], bf[0], As[0] + a_off[0], Bs[0] + b_off[0]);
  for (int kt = 0; kt < steps; ++kt) {
    const int slot = kt % kBfStages;
    bf_load_fragments(af[1], bf[1], As[slot] + a_off[1], Bs[slot] + b_off[1]);
    // Refill the slot of step kt - 1: every warp read it before the barrier it passed in step kt - 1.
    const int next = kt + kBfStages - 1;
    if (next < steps) {
      bf_load_slice(As[next % kBfStages], a, m0, M, K, next * kBfStep);
      bf_load_slice(Bs[next % kBfStages], b, n0, N, K, next * kBfStep);
    }
    simt::cp_async_commit_group();  // one group per step, empty past the end: wait_group<1> counts right
    bf_mma(acc, af[0], bf[0]);      // k block 0 of step kt
    if (kt + 1 < steps) {
      if constexpr (P != Plant::no_wait) simt::cp_async_wait_group<kBfStages - 2>();  // step kt + 1 has landed
      __syncthreads();  // ... for every thread's copies; and every warp is done with step kt's block-1 loads
      bf_load_fragments(af[0], bf[0], As[(kt + 1) % kBfStages] + a_off[0], Bs[(kt + 1) % kBfStages] + b_off[0]);
    }
    bf_mma(acc, af[1], bf[1]);  // k block 1 of step kt
  }
  simt::cp_async_wait_group<0>();  // only empty groups remain: nothing in flight when the block exits

  // acc[i][j][e] is C's row wm + 16 i + lane / 4 + 8 (e / 2), column wn + 8 j + 2 (lane % 4) + e % 2.
  for (int i = 0; i < kBfMi; ++i)
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = m0 + wm + 16 * i + (lane >> 2) + 8 * e2;
      if (P == Plant::store_mask ? row > M : row >= M) continue;
      float* crow = c + static_cast<int64_t>(row) * N;
      for (int j = 0; j < kBfNi; ++j)
        for (int e1 = 0; e1 < 2; ++e1) {
          const int col = n0 + wn + 8 * j + 2 * (lane & 3) + e1;
          if (col < N) crow[col] = acc[i][j][2 * e2 + e1];
        }
    }
}

}  // namespace
}  // namespace ladder::cuda::precision
