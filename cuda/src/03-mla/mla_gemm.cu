// cuda/src/03-mla/mla_gemm.cu -- stage 03 CUDA kernels: the one GEMM (gemm_batched, its split-K sum, gemm_small).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM          <== this file (the GEMM; + mla.cu, mla_flash.cu)
//
// Every matrix product of every rung of ladder/03-mla/mla.hpp -- projections, W_UK / W_UV absorption, q.k
// scores, a.V and a.c sums, AM's precomputed products -- is one GEMM: gemm_batched (a 128 x 128 output
// tile per block, 8 x 8 outputs per thread, K in steps of 8 through double-buffered shared memory, the
// next step's global loads in flight during this one's FMAs); for products whose
// 128 x 128 tiles are too few to give every SM a block but whose K is long (the step's projections,
// M = B rows), the same kernel split-K -- each block one slice of K into a partial tile, then
// gemm_split_sum adds the slices in a fixed order, no atomics; else gemm_small (16 x 16, one output per
// thread). The choice depends on the shapes only (gemm_tile, gemm_split in mla_kernels.hpp). The small
// kernels around it (RMSNorm, RoPE, softmax, copies) are mla.cu; grid_for is mla_common.cuh.
// Compiled by nvcc for sm_80/sm_90 and by g++ through cuda/simt, where the tests
// (tests/03-mla/test_mla_cuda_gemm.cpp against Eigen, test_mla_cuda.cpp through the rungs) run it in three
// schedules and under TSan; this file includes no fmt (nvcc 13 cannot compile it).
#include "mla_common.cuh"
#include "ladder/cuda/03-mla/mla_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::mla {
namespace {

constexpr int T = kGemmTile;

// The sizes of batch entry z = (o, i): g.M, g.N, g.K, each clipped to sequence o's length where
// g.lens_on_* says so (the scores of a sequence shorter than Lmax, its a.c sum over its own keys).
__device__ __forceinline__ void clip_to_length(const Gemm& g, int64_t o, int64_t& M, int64_t& N, int64_t& K) {
  if (g.lens == nullptr) return;
  const int64_t len = g.lens[o];
  if (g.lens_on_m) M = M < len ? M : len;
  if (g.lens_on_n) N = N < len ? N : len;
  if (g.lens_on_k) K = K < len ? K : len;
}

// gemm_small: the same product with one 16 x 16 output tile per block of 16 x 16 threads, one output
// per thread, K in steps of 16 -- 2 shared-memory loads per FMA, but 64 times as many blocks as
// gemm_batched. It was the launcher's choice whenever a 128 x 128 tiling left SMs idle: the step's
// projections have M = B rows (64 at the benchmark's shape), and W_O [64 x 16384] x [16384 x 5120]
// as 128 x 128 tiles is 40 blocks for 132 SMs, each running all of K = 16384 (on an H200 the
// 128-tile-only version made flash_mla's full step 7 ms slower, 35.5 -> 42.6 ms). Those products now
// take gemm_batched split-K (below); this kernel keeps the ones whose K is too short to split
// (K < 2 x kGemmSplitMinK, or too few tiles x slices to busy half the SMs).
__global__ void gemm_small(Gemm g) {
  constexpr int S = kGemmSmallTile;
  __shared__ float As[S][S + 1];  // As[m][k]; +1: no bank conflicts on the transposed read of Bs
  __shared__ float Bs[S][S + 1];  // Bs[n][k]
  const int64_t z = blockIdx.z, o = z / g.inner, i = z % g.inner;
  int64_t M = g.M, N = g.N, K = g.K;
  clip_to_length(g, o, M, N, K);
  const int64_t m0 = (int64_t)blockIdx.y * S, n0 = (int64_t)blockIdx.x * S;
  if (m0 >= M || n0 >= N) return;  // the whole block leaves together, before any barrier
  const int tx = threadIdx.x, ty = threadIdx.y;
  const float* A = g.A + o * g.a_o + i * g.a_i;
  const float* B = g.B + o * g.b_o + i * g.b_i;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += S) {
    const int64_t k = k0 + tx;
    As[ty][tx] = (m0 + ty < M && k < K) ? A[(m0 + ty) * g.a_m + k * g.a_k] : 0.0f;
    Bs[ty][tx] = (n0 + ty < N && k < K) ? B[(n0 + ty) * g.b_n + k * g.b_k] : 0.0f;
    __syncthreads();  // both tiles complete before anyone multiplies them
    for (int kk = 0; kk < S; ++kk) acc += As[ty][kk] * Bs[tx][kk];
    __syncthreads();  // everyone is done with the tiles before the next step overwrites them
  }
  const int64_t m = m0 + ty, n = n0 + tx;
  if (m < M && n < N) {
    float* c = g.C + o * g.c_o + i * g.c_i + m * g.c_m + n * g.c_n;
    if (g.accumulate)
      *c += g.alpha * acc;
    else
      *c = g.alpha * acc;
  }
}

// gemm_batched<false, kPipelined>: C_z = alpha A_z B_z^T (or += with accumulate) for the z = blockIdx.z
// of the batch, a T x T = 128 x 128 output tile per block of 256 threads, K in steps of kGemmK = 8
// through shared memory.
// Register tiling: each thread computes an 8 x 8 block of the tile (rows 8 tr.., columns 8 tc..), so per
// step of k it loads 8 values of A and 8 of B from shared memory for 64 FMAs -- 0.25 loads per FMA,
// where one output per thread (gemm_small, this kernel's only form until 2026-11) needs 2: on an H200
// that form ran a 4096^3 product at 6.3 TFLOP/s, 7.9x cuBLAS's time; this one 16.1 TFLOP/s, 3.1x. The
// tiles are stored k-major (As[k][m], Bs[k][n]) so a thread's 8 values are contiguous (vectorisable
// loads) and a warp's 32 threads read 2 rows of As (broadcast) and 16 different
// 32-byte pieces of Bs. Global loads follow whichever index is contiguous in memory (k when a_k == 1,
// else m; likewise for B), so both the q.c^T (k contiguous) and the a.c (n contiguous) products
// coalesce; padding each tile row by 4 floats keeps the k-major stores free of bank conflicts.
// Each output's sum runs over k = 0, 1, ..., K-1 in order, as before the tiling: the same rounding.
//
// Schedule (issue 13). Per K step a thread copies 4 elements of each tile from global memory (8 global
// loads per 8 x 64 = 512 FMAs) and reads 8 + 8 floats from shared memory per 64 FMAs. The old schedule
// (kPipelined = false, Gemm::pipeline = 0, kept for side-by-side timing in bench_gpu) is copy ->
// barrier -> FMAs -> barrier: each step's global-load latency is exposed between its two barriers,
// the issue's diagnosis of why it ran a 4096^3 product at 16.1 TFLOP/s (26 % of an H200's fp32
// peak, 3.1x cuBLAS's time). The pipelined one (the default) keeps two tile buffers: a prologue copies
// step 0 into buffer 0, then step s issues the 8 global loads of step s + 1 into registers, does its
// FMAs from buffer s % 2 while they are in flight, stores them into buffer (s + 1) % 2 and meets ONE
// barrier. That buffer was last read in step s - 1, before the previous barrier, and is next read in
// step s + 1, after this one. The FMAs, their operands and their order are the old schedule's, so the
// bits are the same (the tests compare the two bit for bit). Last step: no prefetch (the block's K is
// uniform, so the branch and the barrier are too); a ragged last step, lens-clipped M/N/K and a split-K
// slice load 0 past their ends exactly as before; rows_live warps skip only the FMAs. How much faster
// it runs is an ESTIMATE until a GPU times it: nothing can be timed here.
// ptxas (nvcc 13.0, -Xptxas -v), registers sm_80 / sm_90, all without spills and at 2 blocks per SM:
//   old schedule:        unsplit 116 / 114, split-K 128 / 128, 8448 bytes of shared memory (unchanged)
//   pipelined (default): unsplit 116 / 128, split-K 124 / 127, 16896 bytes (2 x 8448; < 48 KiB)
// The 8 prefetch registers fit under the cap as plain scalar loads, so no float4 layout was needed.
//
// gemm_batched<true, kPipelined>, split-K: blockIdx.z = s * batch + z. Block (s, z) runs only k in
// [s * slice, min(K_z, (s + 1) * slice)) -- slice = gemm_split_slice(K, S), a multiple of the K step --
// and stores its unscaled partial tile P_s into part [S, batch, M, N] at slab blockIdx.z; gemm_split_sum
// then forms C. A block whose slice starts past K_z (a lens-clipped K, or a forced S > K / 8) stores
// zeros, so every partial the sum reads was written. W_O at DeepSeek-V2 (M = 64, N = 5120, K = 16384):
// 40 tiles -> S = 4, 160 blocks of K = 4096 instead of 40 of K = 16384. Those products have M = 64, so
// the warps holding the tile's rows 64-127 skip their FMAs (rows_live): half of the block's FMA issue
// was on rows that are never stored. Registers: above; the same 2 blocks per SM (__launch_bounds__).
template <bool kPartial, bool kPipelined>
__global__ void __launch_bounds__(kGemmThreads, 2) gemm_batched(Gemm g, float* part, int64_t slice) {
  constexpr int KT = kGemmK, TM = kGemmRegs, TN = kGemmRegs, PAD = 4;
  constexpr int kLoads = T * KT / kGemmThreads;  // elements of each tile a thread copies per step
  constexpr int kBufs = kPipelined ? 2 : 1;
  __shared__ __align__(16) float As[kBufs][KT][T + PAD];  // As[buf][k][m]
  __shared__ __align__(16) float Bs[kBufs][KT][T + PAD];  // Bs[buf][k][n]
  const int64_t z = kPartial ? blockIdx.z % g.batch : blockIdx.z, o = z / g.inner, i = z % g.inner;
  int64_t M = g.M, N = g.N, K = g.K;
  clip_to_length(g, o, M, N, K);
  const int64_t m0 = (int64_t)blockIdx.y * T, n0 = (int64_t)blockIdx.x * T;
  if (m0 >= M || n0 >= N) return;  // the whole block leaves together, before any barrier
  const int t = threadIdx.x, tr = t / (T / TN), tc = t % (T / TN);
  const float* A = g.A + o * g.a_o + i * g.a_i;
  const float* B = g.B + o * g.b_o + i * g.b_i;
  if constexpr (kPartial) {
    // This block's slice as a K of its own: A and B start at its first k, so the loop below is the
    // unsplit one (a [k_begin, k_end) pair kept live through the loop spilled 48-56 bytes at the cap).
    const int64_t k_begin = blockIdx.z / g.batch * slice;
    K = k_begin < K ? (K - k_begin < slice ? K - k_begin : slice) : 0;
    A += k_begin * g.a_k;
    B += k_begin * g.b_k;
  }
  const bool a_kfast = g.a_k == 1, b_kfast = g.b_k == 1;  // which index of each tile is contiguous
  // A thread whose 8 rows all lie past M (the tile's bottom half for the step's M = B = 64 projections)
  // still copies its share of the tiles and meets every barrier, but skips the FMAs. tr = t / 16, so a warp
  // holds tr = 2w, 2w + 1, rows m0 + 16 w .. + 15: the test is uniform over every warp when M - m0 is a
  // multiple of 16 (M = 64), else one warp diverges. The skipped accumulators are never stored.
  const bool rows_live = m0 + tr * TM < M;
  float acc[TM][TN];
  for (int r = 0; r < TM; ++r)
    for (int c = 0; c < TN; ++c) acc[r][c] = 0.0f;
  // The step's 8 x 8 FMAs per thread from tile buffer `buf`, k ascending: the same order in both schedules.
  auto compute = [&](int buf) {
    if (rows_live)
      for (int kk = 0; kk < KT; ++kk) {
        float a[TM], b[TN];
        for (int r = 0; r < TM; ++r) a[r] = As[buf][kk][tr * TM + r];
        for (int c = 0; c < TN; ++c) b[c] = Bs[buf][kk][tc * TN + c];
        for (int r = 0; r < TM; ++r)
          for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
      }
  };
  // Element l of this thread's share of step k0's tiles: tile index e = t + 256 l, then (row, k) of the
  // tile along whichever index is contiguous in memory; 0 past M, N or K.
  auto load_a = [&](int64_t k0, int l) {
    const int e = t + kGemmThreads * l;
    const int mm = a_kfast ? e / KT : e % T, kk = a_kfast ? e % KT : e / T;
    const int64_t m = m0 + mm, k = k0 + kk;
    return (m < M && k < K) ? A[m * g.a_m + k * g.a_k] : 0.0f;
  };
  auto load_b = [&](int64_t k0, int l) {
    const int e = t + kGemmThreads * l;
    const int nn = b_kfast ? e / KT : e % T, kk = b_kfast ? e % KT : e / T;
    const int64_t n = n0 + nn, k = k0 + kk;
    return (n < N && k < K) ? B[n * g.b_n + k * g.b_k] : 0.0f;
  };
  auto store = [&](int buf, const float (&ra)[kLoads], const float (&rb)[kLoads]) {
    for (int l = 0; l < kLoads; ++l) {
      const int e = t + kGemmThreads * l;
      As[buf][a_kfast ? e % KT : e / T][a_kfast ? e / KT : e % T] = ra[l];
      Bs[buf][b_kfast ? e % KT : e / T][b_kfast ? e / KT : e % T] = rb[l];
    }
  };
  if constexpr (!kPipelined) {
    // The schedule before issue 13: copy -> barrier -> FMAs -> barrier per step; each step's global
    // latency is exposed between the two barriers. Written out as it was (not with the lambdas above):
    // its PTX is the previous kernel's up to names, so bench_gpu's old-schedule row times that kernel.
    for (int64_t k0 = 0; k0 < K; k0 += KT) {
      for (int l = 0; l < kLoads; ++l) {
        const int e = t + kGemmThreads * l;
        {
          const int mm = a_kfast ? e / KT : e % T, kk = a_kfast ? e % KT : e / T;
          const int64_t m = m0 + mm, k = k0 + kk;
          As[0][kk][mm] = (m < M && k < K) ? A[m * g.a_m + k * g.a_k] : 0.0f;
        }
        {
          const int nn = b_kfast ? e / KT : e % T, kk = b_kfast ? e % KT : e / T;
          const int64_t n = n0 + nn, k = k0 + kk;
          Bs[0][kk][nn] = (n < N && k < K) ? B[n * g.b_n + k * g.b_k] : 0.0f;
        }
      }
      __syncthreads();  // both tiles complete before anyone multiplies them
      if (rows_live)
        for (int kk = 0; kk < KT; ++kk) {
          float a[TM], b[TN];
          for (int r = 0; r < TM; ++r) a[r] = As[0][kk][tr * TM + r];
          for (int c = 0; c < TN; ++c) b[c] = Bs[0][kk][tc * TN + c];
          for (int r = 0; r < TM; ++r)
            for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
        }
      __syncthreads();  // everyone is done with the tiles before the next step overwrites them
    }
  } else if (K > 0) {  // K is the block's (uniform): every thread takes the same branch and barriers
    // Pipelined: step s multiplies buffer s % 2 while the loads of step s + 1 are in flight into
    // registers, then stores them into the other buffer; one barrier per step. Its last read of that
    // buffer was step s - 1's, before the previous barrier; step s + 1 reads it after this one.
    float ra[kLoads], rb[kLoads];
    for (int l = 0; l < kLoads; ++l) ra[l] = load_a(0, l), rb[l] = load_b(0, l);
    store(0, ra, rb);
    __syncthreads();  // step 0's tiles complete
    int buf = 0;
    for (int64_t k0 = 0; k0 < K; k0 += KT) {
      const bool next = k0 + KT < K;  // uniform over the block
      if (next)
        for (int l = 0; l < kLoads; ++l) ra[l] = load_a(k0 + KT, l), rb[l] = load_b(k0 + KT, l);
      compute(buf);
      if (next) store(buf ^ 1, ra, rb);
      __syncthreads();  // step k0 + 8's tiles complete, and everyone is done reading buffer `buf`
      buf ^= 1;
    }
  }
  // The tile out: split-K stores its unscaled partial into slab (s, z) [M, N] of `part` (alpha is
  // applied once, in the sum); otherwise C = alpha acc (+ C with accumulate).
  float* const out0 = kPartial ? part + blockIdx.z * g.M * g.N : g.C + o * g.c_o + i * g.c_i;
  const int64_t om = kPartial ? g.N : g.c_m, on = kPartial ? 1 : g.c_n;
  for (int r = 0; r < TM; ++r) {
    const int64_t m = m0 + tr * TM + r;
    if (m >= M) break;
    for (int c = 0; c < TN; ++c) {
      const int64_t n = n0 + tc * TN + c;
      if (n >= N) break;
      float* out = out0 + m * om + n * on;
      if (kPartial)
        *out = acc[r][c];
      else if (g.accumulate)
        *out += g.alpha * acc[r][c];
      else
        *out = g.alpha * acc[r][c];
    }
  }
}

// gemm_split_sum: C(m, n) = alpha (P_0 + P_1 + ... + P_{S-1})(m, n) (+ C(m, n) with accumulate) for
// every entry z and used (m, n), one output per thread (grid-stride; consecutive threads take consecutive
// n, so the partial reads coalesce). The slices are added in the order s = 0, 1, ..., S-1 whatever the
// schedule or device: split-K results are deterministic, though not bitwise those of the unsplit
// kernel (which sums k = 0..K-1 into one accumulator) -- hence the tests' tolerance rule. Outputs past a
// sequence's clipped M x N are left as they are, as the other kernels leave them.
__global__ void gemm_split_sum(Gemm g, const float* part, int64_t S) {
  const int64_t MN = g.M * g.N, total = g.batch * MN;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t z = t / MN, m = t % MN / g.N, n = t % g.N, o = z / g.inner, i = z % g.inner;
    int64_t M = g.M, N = g.N, K = g.K;
    clip_to_length(g, o, M, N, K);
    if (m >= M || n >= N) continue;
    float sum = 0.0f;
    for (int64_t s = 0; s < S; ++s) sum += part[s * total + t];
    float* c = g.C + o * g.c_o + i * g.c_i + m * g.c_m + n * g.c_n;
    if (g.accumulate)
      *c += g.alpha * sum;
    else
      *c = g.alpha * sum;
  }
}

}  // namespace

namespace detail {

void launch_gemm(const Gemm& g, float* workspace) {
  if (gemm_tile(g) == T) {
    const int64_t S = gemm_split(g);
    const dim3 grid((unsigned)((g.N + T - 1) / T), (unsigned)((g.M + T - 1) / T), (unsigned)(g.batch * S));
    const bool pipelined = g.pipeline != 0;  // -1 (default) or 1: the pipelined schedule; 0: the old one
    if (S == 1) {
      simt::launch(pipelined ? gemm_batched<false, true> : gemm_batched<false, false>, grid, dim3(kGemmThreads), 0, g,
                   static_cast<float*>(nullptr), g.K);
    } else {  // partial tiles into workspace [S, batch, M, N], then their sum into C (a launch apart: ordered)
      simt::launch(pipelined ? gemm_batched<true, true> : gemm_batched<true, false>, grid, dim3(kGemmThreads), 0, g,
                   workspace, gemm_split_slice(g.K, S));
      simt::launch(gemm_split_sum, dim3(grid_for(g.batch * g.M * g.N, 256)), dim3(256), 0, g,
                   static_cast<const float*>(workspace), S);
    }
  } else {
    constexpr int S = kGemmSmallTile;
    const dim3 grid((unsigned)((g.N + S - 1) / S), (unsigned)((g.M + S - 1) / S), (unsigned)g.batch);
    simt::launch(gemm_small, grid, dim3(S, S), 0, g);
  }
}

}  // namespace detail
}  // namespace ladder::cuda::mla
