// cuda/src/07-precision/bf16_gemm.cuh -- stage 07: the bf16 GEMM on tensor cores, C [M, N] fp32 = A [M, K]
// B [N, K]^T with A, B bf16 row-major ("NT", as the project's fp32 GEMM), on cuda/simt/tensor_core.hpp:
// mma.sync m16n8k16 bf16 -> fp32, ldmatrix.x4, cp.async.cg with commit / wait_group. Private to cuda/src
// (bf16_gemm.cu launches it); a test includes it to plant mistakes in this very kernel (Plant below).
//
// One kernel, bf16_gemm_kernel<Plant, BfCfg<BM, BN, Step, Stages, WR, WC, MinBlocks, Dynamic>>: a BM x BN tile
// of C per block, K in steps of Step, a Stages-deep cp.async ring, warps of WR x WC. The configurations
// (ladder::cuda::precision::Bf16GemmConfig picks one; the first is the default and is the kernel as it was):
//
//   config            block     step  stages  warps  ring (shared)        launch bounds
//   tile128x128       128x128   32    3       2 x 2  48 KiB static        (128, 2)
//   tile128x256       128x256   32    4       2 x 4  96 KiB dynamic       (256, 1)
//   tile256x128       256x128   32    4       4 x 2  96 KiB dynamic       (256, 1)
//   tile128x256_k64   128x256   64    3       2 x 4  144 KiB dynamic      (256, 1)
//
//   block   every warp owns a 64 x 64 tile of C, warp w rows 64 (w / (BN / 64)) .. + 63, columns
//           64 (w % (BN / 64)) .. + 63: 4 x 8 mma tiles of 16 x 8, 128 fp32 accumulators per thread. Why 64 x 64
//           per warp: per 16-wide k block a warp's ldmatrix reads 4 KiB of shared memory for 131 kFLOP (64 x 32:
//           3 KiB for 66 kFLOP); at mma.sync rates shared-memory bandwidth (128 B/clock/SM), not the tensor
//           cores, bounds the smaller warp tile. The larger blocks read each A and B element from global memory
//           once per 256 columns / rows instead of 128 (the 128 x 128 tile's L2 traffic per FLOP, halved on one
//           operand), at one block of 8 warps per SM (the register file: 256 threads x 255).
//   K loop  A's BM x Step and B's BN x Step slices of a step go to shared memory by cp.async.cg, 16 bytes (8
//           bf16) per copy, BM Step / 8 / threads + BN Step / 8 / threads per thread, in the ring: while step kt
//           is multiplied, steps kt + 1 .. kt + Stages - 1 are in flight. One commit group per step (empty past
//           the end, so wait_group<Stages - 2> always means "the next step has landed"), then one barrier per
//           step, which also orders every warp's reads of the slot about to be refilled before its refill.
//   regs    fragments in two register buffers: k block h + 1 of step kt is loaded before block h's mma issue,
//           and block 0 of step kt + 1 (after that step's wait and barrier) before the last block's, so
//           ldmatrix latency hides behind mma. ptxas (CUDA 13.0, -Xptxas -v), registers per thread / spill:
//             tile128x128      sm_80 234, sm_90 254, no spill (228 / 248 before the configurations, same
//                              operations in the same order; why ptxas allocates 6 more is not looked into;
//                              under the (128, 2) cap of 255 either way)
//             tile128x256      sm_80 248, sm_90 255, no spill
//             tile256x128      sm_80 248, sm_90 248, no spill
//             tile128x256_k64  sm_80 255, sm_90 255, 8 bytes spilled (stores and loads) on both
//   shared  Step 32: a slice row is 32 bf16 = 4 chunks of 16 bytes; chunk c of row r sits at chunk position
//           c ^ ((r / 2) % 4). ldmatrix reads 8 consecutive rows (r0 = 8 m) at one chunk per 8-lane phase:
//           without the swizzle rows r and r + 2 (128 bytes apart) share banks (4-way conflict); with it the
//           8 rows' chunks are 2 rows each in 4 different 16-byte positions, and the 2 rows of a pair are 64 bytes
//           apart, so the 8 reads hit the 8 different 16-byte bank groups. The row count (BM or BN, 128 or 256)
//           does not enter: the pattern repeats every 8 rows.
//           Step 64: a row is 64 bf16 = 8 chunks = 128 bytes, so every row starts at bank 0; chunk c of row r
//           sits at c ^ (r % 8): the 8 rows r0 .. r0 + 7 of one ldmatrix phase read one logical chunk at 8
//           different positions, the 8 bank groups, conflict-free. A cp.async phase (8 consecutive copies: one
//           row's 8 chunks, or two rows' 4) writes 8 different positions in both layouts too.
//           The default's ring, 3 x 2 x 8 KiB = 48 KiB, is static; the others are SIMT_DYNAMIC_SHARED (extern
//           __shared__) after cudaFuncSetAttribute(MaxDynamicSharedMemorySize) (bf16_gemm.cu), A's Stages
//           slices then B's, each slice a multiple of 16 bytes.
//   frags   per 16-wide k block h of a slice: A's 16 x 16 fragment of mma row tile i by one ldmatrix.x4 (lanes
//           0-15 address rows 0-15 at k 16 h + 0-7, lanes 16-31 the same rows at k 16 h + 8-15: registers a0..a3
//           of the ISA's table); B's [n][k] rows are the mma's column-major k x 8 operand as they stand, so one
//           non-transposed ldmatrix.x4 gives b0, b1 of two n tiles (lanes 0-7: n 0-7 k 0-7, 8-15: n 0-7
//           k 8-15, 16-23: n 8-15 k 0-7, 24-31: n 8-15 k 8-15).
//   edges   K % 8 == 0 (the host refuses other K): a 16-byte chunk is wholly inside or outside a row.
//           Rows past M or N and chunks past K are copied with src_bytes = 0 (zero-filled), so they add
//           products of 0; stores are masked to row < M, column < N.
//
// Accumulation order, per output c[i][j], in every configuration: acc = 0, then for k-blocks of 16 in order
// (k = 0..15, 16..31, ..., up to Step ceil(K / Step), the tail zero-filled) acc = mma(acc + the block's 16
// exact products); the order inside one mma is the hardware's (under SIMT: sequential fp32 additions,
// cuda/simt/detail/tensor_core.hpp). With Step 64 up to two more blocks than 32 ceil(K / 32) run, wholly past
// K: their 16 products are +0 and acc + 0 is exact, so tests/07-precision/bf16_gemm_check.hpp's bound (T =
// 2 ceil(K / 32) mma steps) covers it.
#pragma once
#include <stdint.h>

#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"
#include "tensor_core.hpp"

namespace ladder::cuda::precision {
namespace {

// One tile configuration: block tile BM x BN of C, k step, ring stages, warp tile WR x WC (the warps: BM / WR
// rows of BN / WC), blocks per SM for __launch_bounds__, and whether the ring is dynamic shared memory.
template <int BM, int BN, int Step, int Stages, int WR, int WC, int MinBlocks, bool Dynamic>
struct BfCfg {
  static constexpr int kBM = BM, kBN = BN, kStep = Step, kStages = Stages, kWarpRows = WR, kWarpCols = WC;
  static constexpr int kWarpsN = BN / WC, kWarps = (BM / WR) * (BN / WC), kThreads = 32 * kWarps;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr bool kDynamic = Dynamic;
  static constexpr int kMi = WR / 16, kNi = WC / 8, kChunks = Step / 8, kBlocks = Step / 16;  // per warp, per step
  static constexpr int kChunkShift = Step == 32 ? 2 : 3, kWarpShift = kWarpsN == 2 ? 1 : 2;  // log2 kChunks, kWarpsN
  static constexpr int kSliceA = BM * Step, kSliceB = BN * Step;  // bf16 per operand per stage
  static constexpr int kCopiesA = BM * kChunks / kThreads, kCopiesB = BN * kChunks / kThreads;  // per thread
  static constexpr int kSmemBytes = Stages * (kSliceA + kSliceB) * 2;
  static_assert(BM % WR == 0 && BN % WC == 0 && WR % 16 == 0 && WC % 16 == 0, "whole mma tiles per warp");
  static_assert(kCopiesA * kThreads == BM * kChunks && kCopiesB * kThreads == BN * kChunks,
                "the threads split a slice's chunks evenly");
  static_assert((Step == 32 || Step == 64) && kBlocks % 2 == 0, "the swizzles below; two fragment buffers");
  static_assert(Stages >= 2 && (kWarpsN == 2 || kWarpsN == 4), "a ring; warps per row of warps by a shift");
  static_assert(Dynamic || kSmemBytes <= 48 * 1024, "a static ring fits the 48 KiB static shared limit");
  static_assert(kSmemBytes <= 166912, "the opt-in limit of sm_80 (the smaller of the two targets)");
};
using BfDefault = BfCfg<128, 128, 32, 3, 64, 64, 2, false>;  // Bf16GemmConfig::tile128x128 (the default)
using Bf128x256 = BfCfg<128, 256, 32, 4, 64, 64, 1, true>;   // Bf16GemmConfig::tile128x256
using Bf256x128 = BfCfg<256, 128, 32, 4, 64, 64, 1, true>;   // Bf16GemmConfig::tile256x128
using Bf128x256k64 = BfCfg<128, 256, 64, 3, 64, 64, 1, true>;  // Bf16GemmConfig::tile128x256_k64

// The default's names, as before the configurations (a test launches the kernel with them).
constexpr int kBfTile = BfDefault::kBM, kBfStep = BfDefault::kStep, kBfStages = BfDefault::kStages;
constexpr int kBfThreads = BfDefault::kThreads;
static_assert(BfDefault::kSmemBytes == 48 * 1024 && kBfThreads == 128, "the default is unchanged");

// The planted mistakes the tests keep (tests/07-precision/test_bf16_gemm_cuda_planted.cu); none is the kernel.
// no_optin is the kernel too, a separate instantiation whose launch never gets cudaFuncSetAttribute.
enum class Plant { none, ldmatrix_row, no_wait, store_mask, no_optin };

// Element offset of chunk `chunk` (k = 8 chunk .. + 7) of row `row` in a [rows][Step] slice, swizzled.
template <int Step>
__device__ __forceinline__ int bf_swizzle(int row, int chunk) {
  if constexpr (Step == 32) return row * Step + ((chunk ^ ((row >> 1) & 3)) << 3);
  else return row * Step + ((chunk ^ (row & 7)) << 3);
}

// cp.async of one step's slice: rows row0 .. row0 + Rows - 1 of g [rows, K], k0 .. k0 + Step - 1; rows past
// `rows` and chunks past K zero-filled (the source address is then g itself, never read).
template <class C, int Rows>
__device__ __forceinline__ void bf_load_slice(uint16_t* s, const uint16_t* g, int row0, int rows, int K, int k0) {
  for (int i = 0; i < Rows * C::kChunks / C::kThreads; ++i) {
    const int id = threadIdx.x + i * C::kThreads, row = id >> C::kChunkShift, chunk = id & (C::kChunks - 1);
    const int k = k0 + 8 * chunk;
    const bool in = row0 + row < rows && k < K;
    simt::cp_async_cg(s + bf_swizzle<C::kStep>(row, chunk),
                      in ? g + static_cast<int64_t>(row0 + row) * K + k : g, in ? 16 : 0);
  }
}

// The fragments of one 16-wide k block: A's kMi row tiles, B's kNi column tiles. pa, pb: this lane's ldmatrix
// address for row tile 0 / column tiles 0-1; the others are 16 rows further (both swizzles repeat every 8 rows).
template <class C>
__device__ __forceinline__ void bf_load_fragments(unsigned (&af)[C::kMi][4], unsigned (&bf)[C::kNi][2],
                                                  const uint16_t* pa, const uint16_t* pb) {
  for (int i = 0; i < C::kMi; ++i)
    simt::ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], pa + 16 * i * C::kStep);
  for (int j = 0; j < C::kNi; j += 2)
    simt::ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], pb + 8 * j * C::kStep);
}

template <class C>
__device__ __forceinline__ void bf_mma(float (&acc)[C::kMi][C::kNi][4], const unsigned (&af)[C::kMi][4],
                                       const unsigned (&bf)[C::kNi][2]) {
  for (int i = 0; i < C::kMi; ++i)
    for (int j = 0; j < C::kNi; ++j) simt::mma_m16n8k16_bf16(acc[i][j], af[i], bf[j], acc[i][j]);
}

template <Plant P, class C = BfDefault>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) bf16_gemm_kernel(const uint16_t* a, const uint16_t* b,
                                                                              int M, int N, int K, float* c) {
  constexpr int S = C::kStages, Step = C::kStep, KB = C::kBlocks;
  uint16_t* As;  // [S][kSliceA]
  uint16_t* Bs;  // [S][kSliceB]
  if constexpr (C::kDynamic) {
    SIMT_DYNAMIC_SHARED(uint16_t, ring);
    As = ring;
    Bs = ring + S * C::kSliceA;
  } else {
    __shared__ __align__(16) uint16_t as[S * C::kSliceA];
    __shared__ __align__(16) uint16_t bs[S * C::kSliceB];
    As = as;
    Bs = bs;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = blockIdx.y * C::kBM, n0 = blockIdx.x * C::kBN;
  const int wm = (warp >> C::kWarpShift) * C::kWarpRows, wn = (warp & (C::kWarpsN - 1)) * C::kWarpCols;
  const int steps = (K + Step - 1) / Step;

  float acc[C::kMi][C::kNi][4];
  for (int i = 0; i < C::kMi; ++i)
    for (int j = 0; j < C::kNi; ++j)
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // This lane's ldmatrix.x4 addresses in a slice, for k block h = 0 .. KB - 1 of a step: A row a_row, chunk
  // 2 h + lane / 16; B row b_row, chunk 2 h + (lane / 8) % 2 (swizzled).
  const int a_row = wm + (P == Plant::ldmatrix_row ? (lane + 1) & 15 : lane & 15);
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3);
  int a_off[KB], b_off[KB];
  for (int h = 0; h < KB; ++h) {
    a_off[h] = bf_swizzle<Step>(a_row, 2 * h + (lane >> 4));
    b_off[h] = bf_swizzle<Step>(b_row, 2 * h + ((lane >> 3) & 1));
  }
  // Fragments in two register buffers: k block h + 1 of a step (or block 0 of the next step) is loaded while
  // the mma of block h run.
  unsigned af[2][C::kMi][4], bf[2][C::kNi][2];

  for (int s = 0; s < S - 1; ++s) {
    if (s < steps) {
      bf_load_slice<C, C::kBM>(As + s * C::kSliceA, a, m0, M, K, s * Step);
      bf_load_slice<C, C::kBN>(Bs + s * C::kSliceB, b, n0, N, K, s * Step);
    }
    simt::cp_async_commit_group();
  }
  if constexpr (P != Plant::no_wait) simt::cp_async_wait_group<S - 2>();  // step 0 has landed ...
  __syncthreads();                                                         // ... for every thread
  bf_load_fragments<C>(af[0], bf[0], As + a_off[0], Bs + b_off[0]);
  for (int kt = 0; kt < steps; ++kt) {
    const int slot = kt % S;
#if defined(__CUDACC__)
#pragma unroll  // h constant in each copy: af[cur], a_off[h] stay registers (else 272 bytes of stack per thread)
#endif
    for (int h = 0; h < KB; ++h) {
      const int cur = h & 1;  // KB is even: block 0 of every step is in buffer 0
      if (h + 1 < KB) {
        bf_load_fragments<C>(af[cur ^ 1], bf[cur ^ 1], As + slot * C::kSliceA + a_off[h + 1],
                             Bs + slot * C::kSliceB + b_off[h + 1]);
      } else if (kt + 1 < steps) {
        if constexpr (P != Plant::no_wait) simt::cp_async_wait_group<S - 2>();  // step kt + 1 has landed
        __syncthreads();  // ... for every thread's copies; and every warp is done with step kt's loads
        const int next_slot = (kt + 1) % S;
        bf_load_fragments<C>(af[0], bf[0], As + next_slot * C::kSliceA + a_off[0],
                             Bs + next_slot * C::kSliceB + b_off[0]);
      }
      if (h == 0) {
        // Refill the slot of step kt - 1: every warp read it before the barrier it passed in step kt - 1.
        const int next = kt + S - 1;
        if (next < steps) {
          bf_load_slice<C, C::kBM>(As + (next % S) * C::kSliceA, a, m0, M, K, next * Step);
          bf_load_slice<C, C::kBN>(Bs + (next % S) * C::kSliceB, b, n0, N, K, next * Step);
        }
        simt::cp_async_commit_group();  // one group per step, empty past the end: wait_group<S - 2> counts right
      }
      bf_mma<C>(acc, af[cur], bf[cur]);  // k block h of step kt
    }
  }
  simt::cp_async_wait_group<0>();  // only empty groups remain: nothing in flight when the block exits

  // acc[i][j][e] is C's row wm + 16 i + lane / 4 + 8 (e / 2), column wn + 8 j + 2 (lane % 4) + e % 2.
  for (int i = 0; i < C::kMi; ++i)
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = m0 + wm + 16 * i + (lane >> 2) + 8 * e2;
      if (P == Plant::store_mask ? row > M : row >= M) continue;
      float* crow = c + static_cast<int64_t>(row) * N;
      for (int j = 0; j < C::kNi; ++j)
        for (int e1 = 0; e1 < 2; ++e1) {
          const int col = n0 + wn + 8 * j + 2 * (lane & 3) + e1;
          if (col < N) crow[col] = acc[i][j][2 * e2 + e1];
        }
    }
}

}  // namespace
}  // namespace ladder::cuda::precision
