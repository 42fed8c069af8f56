// cuda/src/07-precision/fp8_mma.cuh -- stage 07: DeepSeek-V3's FP8 block-scaled GEMM (technical report §3.3) on
// tensor cores with promotion: y [M, N] = sum over chunks c of fl(v_c * fl(xs[m, kb] ws[kb, nb])), v_c the sum of
// the chunk's E4M3 code products, chunks of nc elements inside each 128-wide K block (ladder/07-precision/
// fp8_block.hpp, the recipe and its bound). Private to cuda/src (fp8_mma.cu launches it); a test includes it to
// plant mistakes in this very kernel (F8Plant below).
//
// The scheme is DeepGEMM's: per chunk the mma.sync m16n8k32 e4m3 x e4m3 -> f32 chain runs into a zeroed fp32
// fragment `part` (the tensor core's own, limited accumulator), then every element is promoted into a float32
// accumulator `acc` in registers with the two scales: acc = acc + part * fl(xs * ws), part = 0.
//   block   256 threads = 8 warps, one 128 x 128 tile of C; warp w owns rows 32 (w / 2) .. + 31 and columns
//           64 (w % 2) .. + 63: 2 x 8 mma tiles of 16 x 8, 64 fp32 `acc` and 64 fp32 `part` per thread (the int8
//           kernel's 4 warps of 64 x 64 would need 256 accumulator registers). The tile's 128 columns lie in one
//           128 x 128 weight block (n0 = 128 blockIdx.x): one weight scale per K block for the whole tile.
//           __launch_bounds__(256, 1); ptxas (CUDA 13.0, sm_90) uses 255 registers with a 40-byte spill (16 warps
//           of 32 x 32: 128 registers, a 56-128-byte spill). Tuning it on a device is left to the GPU work.
//   K loop  the int8 mma GEMM's (a8w8_mma.cuh) byte for byte: steps of 64 codes (two k32 slabs), A's and B's
//           128 x 64 byte slices by cp.async.cg into a 3-stage ring, one commit group and one barrier per step,
//           the same swizzle, the same ldmatrix.x4 fragments (an E4M3 code is a byte, as an s8 is).
//   chunks  nc divides 128. nc >= 32: a chunk is nc / 32 consecutive slabs, promoted after its last slab (or the
//           slab that ends K). nc < 32: each slab is run 32 / nc times, A's codes outside the sub-chunk masked to
//           0 (+0.0: its products add exactly), each run promoted. Slabs at or past K are skipped.
//   layout  a [M, K] codes, b [N, K] codes (k contiguous per column, what the mma's B "col" operand wants; the
//           host transposes wq [K, N]), K % 16 == 0 (the host pads K with zero codes); xs [M, kbs], ws [kbs, nbs]
//           row-major, kbs = ceil(K / 128), nbs = ceil(N / 128).
//
// The arithmetic, and why fp8_bound covers it (u_a = 2^-acc_bits for RNE, 2^(1 - acc_bits) for truncation):
// - Under SIMT the emulated mma (cuda/simt/detail/tensor_core.hpp) forms every product exactly in fp32 (E4M3
//   significands have 4 bits) and adds them to c in ascending k, each addition rounded to nearest even in fp32.
//   A chunk's chain starts from +0 and walks its k in ascending order, so v_c carries nc - 1 fp32 roundings:
//   |v_c - exact| <= gamma_{nc-1}(2^-24) A_c <= gamma_{nc-1}(u_a) A_c for every recipe (acc_bits <= 24). Every
//   partial sum is a multiple of 2^-18 below 2^25 (128 x 448^2), so fp32's RNE is exactly round_significant(.,
//   24, RNE) of the reference: for acc_bits = 24, RNE, the kernel computes the reference's bits (tested).
// - On a GPU the mma's internal order and rounding are the hardware's. The bound needs |v_c - exact| <=
//   gamma_{nc-1}(u_a) A_c: any accumulator that keeps >= acc_bits bits with RNE (>= acc_bits + 1 truncating) at
//   each of at most nc - 1 additions meets it. For the default recipe (14 bits, nc 128: gamma_127(2^-14) = 0.78 %
//   of A_c) that is DeepSeek-V3's figure for Hopper's FP8 accumulation ("around 14 bits"); one mma.sync m16n8k32
//   on an H200 measured 3.0e-7 of sum |terms| (tests/simt/test_tensor_core.cpp), far inside. A recipe with
//   acc_bits = 24 asks for fp32 accumulation itself: the H200's measured error is below its bound, but a device
//   truncating in fp32 could exceed gamma_{nc-1}(2^-24) by up to 2x on adversarial sums.
// - Promotion: t = fl(xs ws) and acc + part t are the reference's two or three float32 roundings in its order
//   (nvcc may contract them to one FMA: one rounding fewer, inside the same bound), chunks in ascending k.
#pragma once
#include <stdint.h>

#include "simt.hpp"
#include "tensor_core.hpp"

#if defined(__CUDACC__)
#define LADDER_F8_UNROLL _Pragma("unroll")  // register arrays need constant indices
#else
#define LADDER_F8_UNROLL
#endif

// The E4M3 mma exists from sm_89; an sm_80 build compiles the kernel with a trap in its place.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define LADDER_F8_MMA 1
#endif

namespace ladder::cuda::precision {
namespace {

constexpr int kF8Tile = 128, kF8Step = 64, kF8Stages = 3, kF8Threads = 256;  // kF8Step: codes (bytes) per step
constexpr int kF8WarpRows = 32, kF8WarpCols = 64;
constexpr int kF8Mi = kF8WarpRows / 16, kF8Ni = kF8WarpCols / 8, kF8Chunks = kF8Step / 16;  // 2, 8, 4
constexpr int kF8Slice = kF8Tile * kF8Step;                                                 // bytes per operand
constexpr int kF8Copies = kF8Tile * kF8Chunks / kF8Threads;                                 // 2
static_assert(kF8Copies * kF8Threads == kF8Tile * kF8Chunks, "the threads split a slice's chunks evenly");
static_assert(kF8Stages * 2 * kF8Slice <= 48 * 1024, "the ring fits the 48 KiB static shared limit");
static_assert(kF8Tile == 128, "one weight scale block per tile's columns");

// The planted mistakes the tests keep (tests/07-precision/test_fp8_mma_cuda_planted.cu); none is the kernel.
//   a_lane      A's ldmatrix lane address one row down (lane l addresses row (l + 1) % 16 of its fragment);
//   neighbour   each K block promoted with the weight scale of the next K block (kb + 1, wrapping);
//   no_reset    `part` not zeroed after a promotion: a chunk's sum is promoted again with every later chunk;
//   no_wait     the K loop's cp.async.wait_group removed.
enum class F8Plant { none, a_lane, neighbour, no_reset, no_wait };

// Byte offset of chunk `chunk` (bytes 16 chunk .. + 15) of row `row` in a [128][64] slice, swizzled as the int8
// kernel's (a8w8_mma.cuh): the 8 rows of an ldmatrix phase hit 8 different 16-byte bank groups.
__device__ __forceinline__ int f8_swizzle(int row, int chunk) {
  return row * kF8Step + ((chunk ^ ((row >> 1) & 3)) << 4);
}

// cp.async of one step's slice: rows row0 .. row0 + 127 of g [rows, K], k0 .. k0 + 63; rows past `rows` and
// chunks past K zero-filled (the source address is then g itself, never read).
__device__ __forceinline__ void f8_load_slice(uint8_t* s, const uint8_t* g, int row0, int rows, int K, int k0) {
  for (int i = 0; i < kF8Copies; ++i) {
    const int id = threadIdx.x + i * kF8Threads, row = id >> 2, chunk = id & 3, k = k0 + 16 * chunk;
    const bool in = row0 + row < rows && k < K;
    simt::cp_async_cg(s + f8_swizzle(row, chunk), in ? g + static_cast<int64_t>(row0 + row) * K + k : g, in ? 16 : 0);
  }
}

// The fragments of one k32 slab (the int8 kernel's, a8w8_mma.cuh "frags"): A's 2 row tiles, B's 8 column tiles.
__device__ __forceinline__ void f8_load_fragments(unsigned (&af)[kF8Mi][4], unsigned (&bf)[kF8Ni][2],
                                                  const uint8_t* pa, const uint8_t* pb) {
  for (int i = 0; i < kF8Mi; ++i) simt::ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], pa + 16 * i * kF8Step);
  for (int j = 0; j < kF8Ni; j += 2)
    simt::ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], pb + 8 * j * kF8Step);
}

// A's register r of this lane holds k = 4 (lane % 4) + byte + 16 (r / 2) (PTX ISA, mma.m16n8k32 A fragment): the
// bytes whose k lies in [lo, hi) kept, the others zeroed.
__device__ __forceinline__ unsigned f8_kmask(int lane, int r, int lo, int hi) {
  unsigned m = 0;
  for (int e = 0; e < 4; ++e) {
    const int k = 4 * (lane & 3) + e + 16 * (r >> 1);
    if (k >= lo && k < hi) m |= 0xFFu << (8 * e);
  }
  return m;
}

// part += A B over one slab (or the sub-chunk [lo, hi) of it when masking).
__device__ __forceinline__ void f8_mma(float (&part)[kF8Mi][kF8Ni][4], const unsigned (&af)[kF8Mi][4],
                                       const unsigned (&bf)[kF8Ni][2], bool masked, int lo, int hi) {
#if defined(LADDER_F8_MMA)
  unsigned a[kF8Mi][4];
  const int lane = threadIdx.x & 31;
  for (int i = 0; i < kF8Mi; ++i)
    for (int r = 0; r < 4; ++r) a[i][r] = masked ? af[i][r] & f8_kmask(lane, r, lo, hi) : af[i][r];
  for (int i = 0; i < kF8Mi; ++i)
    for (int j = 0; j < kF8Ni; ++j) simt::mma_m16n8k32_e4m3(part[i][j], a[i], bf[j], part[i][j]);
#else
  (void)part, (void)af, (void)bf, (void)masked, (void)lo, (void)hi;
  __trap();  // no E4M3 mma before sm_89 (the host API says so; the GPU build's sm_80 code never runs it)
#endif
}

// acc += part * fl(xs[row, kb] ws[kb, nb]) for this thread's rows, then part = 0 (row r of tile i, half e2: C's
// row wm + 16 i + lane / 4 + 8 e2; rows past M have part = 0 and take scale 0).
template <F8Plant P>
__device__ __forceinline__ void f8_promote(float (&acc)[kF8Mi][kF8Ni][4], float (&part)[kF8Mi][kF8Ni][4],
                                           const float* xs, const float* ws, int row0, int M, int kb, int kbs,
                                           int nbs) {
  const int wkb = P == F8Plant::neighbour ? (kb + 1) % kbs : kb;
  const float w = ws[static_cast<int64_t>(wkb) * nbs + blockIdx.x];
  LADDER_F8_UNROLL
  for (int i = 0; i < kF8Mi; ++i) {
    LADDER_F8_UNROLL
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = row0 + 16 * i + 8 * e2;
      const float t = row < M ? xs[static_cast<int64_t>(row) * kbs + kb] * w : 0.0f;  // the reference's fl(xs ws)
      LADDER_F8_UNROLL
      for (int j = 0; j < kF8Ni; ++j) {
        LADDER_F8_UNROLL
        for (int e1 = 0; e1 < 2; ++e1) {
          float& p = part[i][j][2 * e2 + e1];
          acc[i][j][2 * e2 + e1] = acc[i][j][2 * e2 + e1] + p * t;
          if constexpr (P != F8Plant::no_reset) p = 0.0f;
        }
      }
    }
  }
}

// One k32 slab starting at k0 (< K): its mma runs into part and the promotions its chunks end with.
template <F8Plant P>
__device__ __forceinline__ void f8_slab(float (&acc)[kF8Mi][kF8Ni][4], float (&part)[kF8Mi][kF8Ni][4],
                                        const unsigned (&af)[kF8Mi][4], const unsigned (&bf)[kF8Ni][2], int k0, int K,
                                        int nc, const float* xs, const float* ws, int row0, int M, int kbs, int nbs) {
  if (nc >= 32) {
    f8_mma(part, af, bf, false, 0, 32);
    if ((k0 + 32) % nc == 0 || k0 + 32 >= K) f8_promote<P>(acc, part, xs, ws, row0, M, k0 / 128, kbs, nbs);
    return;
  }
  for (int lo = 0; lo < 32 && k0 + lo < K; lo += nc) {
    f8_mma(part, af, bf, true, lo, lo + nc);
    f8_promote<P>(acc, part, xs, ws, row0, M, k0 / 128, kbs, nbs);
  }
}

// y [M, N] = the block-scaled product of a [M, K] and b [N, K] (layouts above), chunks of nc (a divisor of 128).
template <F8Plant P>
__global__ void __launch_bounds__(kF8Threads, 1)
    fp8_mma_kernel(const uint8_t* a, const uint8_t* b, const float* xs, const float* ws, int M, int N, int K, int nc,
                   float* y) {
  __shared__ __align__(16) uint8_t As[kF8Stages][kF8Slice];
  __shared__ __align__(16) uint8_t Bs[kF8Stages][kF8Slice];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m0 = blockIdx.y * kF8Tile, n0 = blockIdx.x * kF8Tile;
  const int wm = (warp >> 1) * kF8WarpRows, wn = (warp & 1) * kF8WarpCols;
  const int steps = (K + kF8Step - 1) / kF8Step, kbs = (K + 127) / 128, nbs = (N + 127) / 128;
  const int row0 = m0 + wm + (lane >> 2);  // this thread's first row of C

  float acc[kF8Mi][kF8Ni][4], part[kF8Mi][kF8Ni][4];
  for (int i = 0; i < kF8Mi; ++i)
    for (int j = 0; j < kF8Ni; ++j)
      for (int e = 0; e < 4; ++e) acc[i][j][e] = part[i][j][e] = 0.0f;

  // This lane's ldmatrix.x4 addresses in a slice for slab h = 0, 1 of a step (the int8 kernel's).
  const int a_row = wm + (P == F8Plant::a_lane ? (lane + 1) & 15 : lane & 15);
  const int b_row = wn + (lane & 7) + ((lane >> 4) << 3);
  const int a_off[2] = {f8_swizzle(a_row, lane >> 4), f8_swizzle(a_row, 2 + (lane >> 4))};
  const int b_off[2] = {f8_swizzle(b_row, (lane >> 3) & 1), f8_swizzle(b_row, 2 + ((lane >> 3) & 1))};
  unsigned af[2][kF8Mi][4], bf[2][kF8Ni][2];

  for (int s = 0; s < kF8Stages - 1; ++s) {
    if (s < steps) {
      f8_load_slice(As[s], a, m0, M, K, s * kF8Step);
      f8_load_slice(Bs[s], b, n0, N, K, s * kF8Step);
    }
    simt::cp_async_commit_group();
  }
  if constexpr (P != F8Plant::no_wait) simt::cp_async_wait_group<kF8Stages - 2>();  // step 0 has landed ...
  __syncthreads();                                                                   // ... for every thread
  f8_load_fragments(af[0], bf[0], As[0] + a_off[0], Bs[0] + b_off[0]);
  for (int kt = 0; kt < steps; ++kt) {
    const int slot = kt % kF8Stages, k0 = kt * kF8Step;
    f8_load_fragments(af[1], bf[1], As[slot] + a_off[1], Bs[slot] + b_off[1]);
    const int next = kt + kF8Stages - 1;  // refill the slot of step kt - 1 (read before the last barrier)
    if (next < steps) {
      f8_load_slice(As[next % kF8Stages], a, m0, M, K, next * kF8Step);
      f8_load_slice(Bs[next % kF8Stages], b, n0, N, K, next * kF8Step);
    }
    simt::cp_async_commit_group();  // one group per step, empty past the end: wait_group<1> counts right
    f8_slab<P>(acc, part, af[0], bf[0], k0, K, nc, xs, ws, row0, M, kbs, nbs);  // slab 0 of step kt
    if (kt + 1 < steps) {
      if constexpr (P != F8Plant::no_wait) simt::cp_async_wait_group<kF8Stages - 2>();  // step kt + 1 landed
      __syncthreads();  // ... for every thread's copies; and every warp is done with step kt's slab-1 loads
      f8_load_fragments(af[0], bf[0], As[(kt + 1) % kF8Stages] + a_off[0], Bs[(kt + 1) % kF8Stages] + b_off[0]);
    }
    if (k0 + 32 < K) f8_slab<P>(acc, part, af[1], bf[1], k0 + 32, K, nc, xs, ws, row0, M, kbs, nbs);  // slab 1
  }
  simt::cp_async_wait_group<0>();  // only empty groups remain: nothing in flight when the block exits

  // acc[i][j][e] is C's row row0 + 16 i + 8 (e / 2), column n0 + wn + 8 j + 2 (lane % 4) + e % 2.
  LADDER_F8_UNROLL
  for (int i = 0; i < kF8Mi; ++i) {
    LADDER_F8_UNROLL
    for (int e2 = 0; e2 < 2; ++e2) {
      const int row = row0 + 16 * i + 8 * e2;
      if (row >= M) continue;
      LADDER_F8_UNROLL
      for (int j = 0; j < kF8Ni; ++j) {
        LADDER_F8_UNROLL
        for (int e1 = 0; e1 < 2; ++e1) {
          const int col = n0 + wn + 8 * j + 2 * (lane & 3) + e1;
          if (col < N) y[static_cast<int64_t>(row) * N + col] = acc[i][j][2 * e2 + e1];
        }
      }
    }
  }
}

}  // namespace
}  // namespace ladder::cuda::precision
