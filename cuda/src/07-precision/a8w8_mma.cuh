// cuda/src/07-precision/a8w8_mma.cuh -- stage 07: the A8W8 GEMM on tensor cores, acc [M, N] int32 = xq [M, K]
// wt [N, K]^T with int8 operands (mma.sync m16n8k32 s8 x s8 -> s32), then y = fl(fl(float(acc) * xs[m]) * ws[n])
// as the reference (a8w8_gemm) and the __dp4a kernel (int8_gemm.cu). Private to cuda/src (a8w8_mma.cu launches
// it); a test includes it to plant mistakes in this very kernel (I8Plant below).
//
// Why the weight is [N, K] here when the API's wq is [K, N]: the mma's B operand is "col", 4 consecutive k of
// one column n per register (PTX ISA, mma.m16n8k32 B fragment: b0..b3 = k 4t..4t+3 of column g), so it wants
// k contiguous per column. ldmatrix .trans moves 16-bit elements and cannot transpose bytes; gathering 4 bytes
// of 4 k rows per register from a [k][n] tile (or byte-transposing 4 x 4 blocks in registers) works but costs
// 4 loads or 4 loads + 8 byte permutes per register and ties the cp.async chunks of B to N % 16 == 0. A [N, K]
// weight is what serving stores anyway (weights are quantised and laid out once, as cuBLAS's int8 "TN" wants
// them), so the kernel takes it, and the host API's a8w8_gemm_mma makes it from wq with one transposing copy
// (a8w8_transpose_kernel, a8w8_mma.cu) into scratch; a8w8_gemm_mma_nk takes it ready. Then A and B are the bf16 GEMM's
// (bf16_gemm.cuh) byte for byte: a slice row of 64 int8 is a row of 32 bf16, a k32 block is a k16 block.
//
//   block   128 threads = 4 warps, one 128 x 128 tile of C; warp w owns rows 64 (w / 2) .. + 63 and columns
//           64 (w % 2) .. + 63: 4 x 8 mma tiles of 16 x 8, 128 int32 accumulators per thread.
//   K loop  steps of 64 bytes (two k32 blocks). A's 128 x 64 and B's 128 x 64 byte slices of a step go to shared
//           memory by cp.async.cg, 16 bytes per copy, 4 + 4 per thread, in a 3-stage ring (steps kt + 1, kt + 2
//           in flight while kt is multiplied); one commit group per step (empty past the end, so wait_group<1>
//           always means "the next step has landed"), one barrier per step, which also orders every warp's
//           reads of the slot about to be refilled before its refill. Fragments in two register buffers, as
//           in the bf16 GEMM. __launch_bounds__(128, 2); ptxas (CUDA 13.0) uses 230 registers on sm_80 and
//           246 on sm_90, no spill, no stack frame.
//   shared  chunk c (bytes 16 c .. + 15) of row r at chunk position c ^ ((r / 2) % 4): the 8 rows of an
//           ldmatrix phase hit 8 different 16-byte bank groups. 3 stages x 2 operands x 8 KiB = 48 KiB.
//   frags   per k32 block: A's 16 x 32 fragment by one ldmatrix.x4 of 16-byte rows -- lanes 0-15 address rows
//           0-15 at bytes 0-15, lanes 16-31 the same rows at bytes 16-31, so matrix 0 (rows 0-7, k 0-15) is
//           a0..a3 (row g, k 4t..4t+3), matrix 1 (rows 8-15) a4..a7, matrix 2 (rows 0-7, k 16-31) a8..a11,
//           matrix 3 a12..a15: the ISA's k32 A table (tests/simt/kernels_mma.hpp k32_a). B's [n][k] rows
//           by one ldmatrix.x4 for two n tiles (lanes 0-7: n 0-7 k 0-15, 8-15: n 0-7 k 16-31, 16-23: n 8-15
//           k 0-15, 24-31: n 8-15 k 16-31): b0..b3 = k 4t..4t+3 of column g, b4..b7 = k 16 + 4t.., as k32_b.
//   edges   K % 16 == 0 (the host refuses other K): a 16-byte chunk is wholly inside or outside a row. Rows
//           past M or N and chunks past K are copied with src_bytes = 0 (zero-filled): products of 0. Stores
//           are masked to row < M, column < N.
//
// Exactness: every product is at most 2^14 in magnitude and K <= 131071 (the host refuses more), so no partial
// sum, in whatever order the tensor core adds, leaves int32; integer addition is then associative and acc is
// the exact sum, the reference's gemm_s8s8s32 and the dp4a kernel's bits. (The s8 mma wraps on overflow; no
// overflow happens.) The epilogue is the reference's two roundings in its order.
#pragma once
#include <stdint.h>

#include "simt.hpp"
#include "tensor_core.hpp"

#if defined(__CUDACC__)
#define LADDER_I8_UNROLL _Pragma("unroll")  // register arrays need constant indices
#else
#define LADDER_I8_UNROLL
#endif

namespace ladder::cuda::precision {
namespace {

constexpr int kI8Tile = 128, kI8Step = 64, kI8Stages = 3, kI8Threads = 128;  // kI8Step: bytes (= k) per step
constexpr int kI8WarpRows = 64, kI8WarpCols = 64;
constexpr int kI8Mi = kI8WarpRows / 16, kI8Ni = kI8WarpCols / 8, kI8Chunks = kI8Step / 16;  // 4, 8, 4
constexpr int kI8Slice = kI8Tile * kI8Step;                                                 // bytes per operand
constexpr int kI8Copies = kI8Tile * kI8Chunks / kI8Threads;
static_assert(kI8Copies * kI8Threads == kI8Tile * kI8Chunks, "the threads split a slice's chunks evenly");
static_assert(kI8Stages * 2 * kI8Slice <= 48 * 1024, "the ring fits the 48 KiB static shared limit");

// The planted mistakes the tests keep (tests/07-precision/test_a8w8_mma_cuda_planted.cu); none is the kernel.
//   a_lane     A's ldmatrix lane address one row down (lane l addresses row (l + 1) % 16 of its fragment);
//   k32_order  A's registers 1 and 2 swapped (rows g + 8 at k 0-15 taken for rows g at k 16-31);
//   no_wait    the K loop's cp.async.wait_group removed;
//   store_mask the store's row mask off by one (row <= M).
enum class I8Plant { none, a_lane, k32_order, no_wait, store_mask };

// Byte offset of chunk `chunk` (bytes 16 chunk .. + 15) of row `row` in a [128][64] slice, swizzled.
__device__ __forceinline__ int i8_swizzle(int row, int chunk) {
  return row * kI8Step + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// cp.async of one step's slice: rows row0 .. row0 + 127 of g [rows, K], k0 .. k0 + 63; rows past `rows` and
// chunks past K zero-filled (the source address is then g itself, never read).
__device__ __forceinline__ void i8_load_slice(int8_t* s, const int8_t* g, int row0, int rows, int K, int k0) {
  for (int i = 0; i < kI8Copies; ++i) {
    const int id = threadIdx.x + i * kI8Threads, row = id >> 2, chunk = id & 3, k = k0 + 16 * chunk;
    const bool in = row0 + row < rows && k < K;
    simt::cp_async_cg(s + i8_swizzle(row, chunk), in ? g + static_cast<int64_t>(row0 + row) * K + k : g,
                      in ? 16 : 0);
  }
}

// The fragments of one k32 block: A's 4 row tiles, B's 8 column tiles. pa, pb: this lane's ldmatrix address
// for row tile 0 / column tiles 0-1; the others are 16 rows further (the swizzle repeats every 8 rows).
template <I8Plant P>
__device__ __forceinline__ void i8_load_fragments(unsigned (&af)[kI8Mi][4], unsigned (&bf)[kI8Ni][2],
                                                  const int8_t* pa, const int8_t* pb) {
  for (int i = 0; i < kI8Mi; ++i) {
    if constexpr (P == I8Plant::k32_order)
      simt::ldmatrix_x4(af[i][0], af[i][2], af[i][1], af[i][3], pa + 16 * i * kI8Step);
    else
      simt::ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], pa + 16 * i * kI8Step);
  }
  for (int j = 0; j < kI8Ni; j += 2)
    simt::ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], pb + 8 * j * kI8Step);
}

__device__ __forceinline__ void i8_mma(int (&acc)[kI8Mi][kI8Ni][4], const unsigned (&af)[kI8Mi][4],
                                       const unsigned (&bf)[kI8Ni][2]) {
  for (int i = 0; i < kI8Mi; ++i)
    for (int j = 0; j < kI8Ni; ++j) simt::mma_m16n8k32_s8(acc[i][j], af[i], bf[j], acc[i][j]);
}

// acc [M, N] = a [M, K] b [N, K]^T exactly, y = fl(fl(float(acc) * xs[m]) * ws[n]). K % 16 == 0, a and b
// 16-byte aligned, K <= 131071 (the host checks).
template <I8Plant P>
__global__ void __launch_bounds__(kI8Threads, 2)
    a8w8_mma_kernel(const int8_t* a, const int8_t* b, const float* xs, const float* ws, int M, int N, int K,
                    int32_t* acc_out, float* y) {
  __shared__ __align__(16) int8_t As[kI8Stages][kI8Slice];
  __shared__ __align__(16) int8_t Bs[kI8Stages][kI8Slice];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = blockIdx.y * kI8Tile, n0 = blockIdx.x * kI8Tile;
  const int wm = (warp >> 1) * kI8WarpRows, wn = (warp & 1) * kI8WarpCols;
  const int steps = (K + kI8Step - 1) / kI8Step;

  int acc[kI8Mi][kI8Ni][4];
  for (int i = 0; i < kI8Mi; ++i)
    for (int j = 0; j < kI8Ni; ++j)
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

  // This lane's ldmatrix.x4 addresses in a slice, for k32 block h = 0, 1 of a step: A row a_row, chunk
  // 2 h + lane / 16; B row b_row, chunk 2 h + (lane / 8) % 2 (swizzled).
  const int a_row = wm + (P == I8Plant::a_lane ? (lane + 1) & 15 : lane & 15);
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3);
  const int a_off[2] = {i8_swizzle(a_row, lane >> 4), i8_swizzle(a_row, 2 + (lane >> 4))};
  const int b_off[2] = {i8_swizzle(b_row, (lane >> 3) & 1), i8_swizzle(b_row, 2 + ((lane >> 3) & 1))};
  unsigned af[2][kI8Mi][4], bf[2][kI8Ni][2];

  for (int s = 0; s < kI8Stages - 1; ++s) {
    if (s < steps) {
      i8_load_slice(As[s], a, m0, M, K, s * kI8Step);
      i8_load_slice(Bs[s], b, n0, N, K, s * kI8Step);
    }
    simt::cp_async_commit_group();
  }
  if constexpr (P != I8Plant::no_wait) simt::cp_async_wait_group<kI8Stages - 2>();  // step 0 has landed ...
  __syncthreads();                                                                   // ... for every thread
  i8_load_fragments<P>(af[0], bf[0], As[0] + a_off[0], Bs[0] + b_off[0]);
  for (int kt = 0; kt < steps; ++kt) {
    const int slot = kt % kI8Stages;
    i8_load_fragments<P>(af[1], bf[1], As[slot] + a_off[1], Bs[slot] + b_off[1]);
    // Refill the slot of step kt - 1: every warp read it before the barrier it passed in step kt - 1.
    const int next = kt + kI8Stages - 1;
    if (next < steps) {
      i8_load_slice(As[next % kI8Stages], a, m0, M, K, next * kI8Step);
      i8_load_slice(Bs[next % kI8Stages], b, n0, N, K, next * kI8Step);
    }
    simt::cp_async_commit_group();  // one group per step, empty past the end: wait_group<1> counts right
    i8_mma(acc, af[0], bf[0]);      // k32 block 0 of step kt
    if (kt + 1 < steps) {
      if constexpr (P != I8Plant::no_wait) simt::cp_async_wait_group<kI8Stages - 2>();  // step kt + 1 landed
      __syncthreads();  // ... for every thread's copies; and every warp is done with step kt's block-1 loads
      i8_load_fragments<P>(af[0], bf[0], As[(kt + 1) % kI8Stages] + a_off[0], Bs[(kt + 1) % kI8Stages] + b_off[0]);
    }
    i8_mma(acc, af[1], bf[1]);  // k32 block 1 of step kt
  }
  simt::cp_async_wait_group<0>();  // only empty groups remain: nothing in flight when the block exits

  // acc[i][j][e] is C's row wm + 16 i + lane / 4 + 8 (e / 2), column wn + 8 j + 2 (lane % 4) + e % 2. Unrolled
  // by pragma (LADDER_I8_UNROLL): without it nvcc 13.0 kept these loops (y's arithmetic makes the body too big
  // for its heuristic), indexed acc at run time and put it in a 512-byte stack frame.
  LADDER_I8_UNROLL
  for (int i = 0; i < kI8Mi; ++i) {
    LADDER_I8_UNROLL
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = m0 + wm + 16 * i + (lane >> 2) + 8 * e2;
      if (P == I8Plant::store_mask ? row > M : row >= M) continue;
      const float xr = xs[row];
      const int64_t base = static_cast<int64_t>(row) * N;
      LADDER_I8_UNROLL
      for (int j = 0; j < kI8Ni; ++j) {
        LADDER_I8_UNROLL
        for (int e1 = 0; e1 < 2; ++e1) {
          const int col = n0 + wn + 8 * j + 2 * (lane & 3) + e1;
          if (col < N) {
            const int sum = acc[i][j][2 * e2 + e1];
            acc_out[base + col] = sum;
            const float t = static_cast<float>(sum) * xr;  // the reference's order: fl(fl(acc xs) ws)
            y[base + col] = t * ws[col];
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ladder::cuda::precision
