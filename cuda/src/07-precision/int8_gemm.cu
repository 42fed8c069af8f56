// cuda/src/07-precision/int8_gemm.cu -- stage 07: the A8W8 GEMM, int8 x int8 -> int32 through __dp4a, with the
// per-token x per-channel dequantisation in its epilogue (the recipe of ladder/07-precision/a8w8.hpp).
//
// __dp4a(a, b, c) (sm_61+) is c + sum_i a_i b_i over the four signed bytes of a and of b, byte i = bits
// 8i..8i+7, in wrapping 32-bit arithmetic: one instruction for four multiply-adds. The kernel packs four
// consecutive k of a row of xq into one 32-bit word (byte i = k0 + i) and the same four k of a column of wq
// into another, in the SAME byte order, so byte i of one meets byte i of the other; k past K packs as 0.
// One 16 x 16 block per 16 x 16 output tile walks K in steps of 64 (16 words): thread (ty, tx) packs word tx
// of row ty of the A tile and word ty of column tx of the B tile into shared memory, barrier, 16 __dp4a per
// thread, barrier (the next step must not overwrite words still being read). The int32 sum is exact: every
// product is at most 2^14 in magnitude and K <= 131071 (the host refuses more), so no partial sum wraps and
// integer addition makes every order and blocking the same bits (the reference's gemm_s8s8s32). The epilogue
// writes acc and y = fl(fl(float(acc) * xs[m]) * ws[n]) in the reference's order (a8w8_gemm).
// What it is not: a fast int8 GEMM. On sm_80 / sm_90 int8 GEMMs run on the tensor cores (mma.m16n8k32.s8,
// a8w8_mma.cuh); this rung shows the recipe and dp4a's byte arithmetic (bench_gpu times it beside cuBLAS int8).
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision {
namespace {

static_assert(kGemmTile == kGemmWords, "thread (ty, tx) loads word tx of A's row ty and word ty of B's column tx");

// Four int8 values p[0], p[stride], p[2 stride], p[3 stride] as one word, byte i = p[i stride]; only the first
// `valid` (0..4) are read, the rest are 0 (k past K adds nothing to the dot product).
__device__ __forceinline__ int pack4(const int8_t* p, int64_t stride, int valid) {
  unsigned w = 0;
  for (int i = 0; i < 4 && i < valid; ++i) w |= static_cast<unsigned>(static_cast<uint8_t>(p[i * stride])) << (8 * i);
  return static_cast<int>(w);
}

__global__ void gemm_s8_dp4a_kernel(const int8_t* a, const int8_t* b, const float* xs, const float* ws, int M, int K,
                                    int N, int32_t* acc, float* y) {
  __shared__ int As[kGemmTile][kGemmWords + 1];  // As[row][word]: a[m0 + row][k0 + 4 word .. + 3]
  __shared__ int Bs[kGemmWords][kGemmTile + 1];  // Bs[word][col]: b[k0 + 4 word .. + 3][n0 + col]
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m = blockIdx.y * kGemmTile + ty, n = blockIdx.x * kGemmTile + tx;
  int sum = 0;
  for (int k0 = 0; k0 < K; k0 += 4 * kGemmWords) {
    const int ka = k0 + 4 * tx, kb = k0 + 4 * ty;  // A: word tx of row m; B: word ty of column n
    As[ty][tx] = m < M && ka < K ? pack4(a + static_cast<int64_t>(m) * K + ka, 1, K - ka) : 0;
    Bs[ty][tx] = n < N && kb < K ? pack4(b + static_cast<int64_t>(kb) * N + n, N, K - kb) : 0;
    __syncthreads();  // both tiles packed before any thread reads them
    for (int w = 0; w < kGemmWords; ++w) sum = __dp4a(As[ty][w], Bs[w][tx], sum);
    __syncthreads();  // every thread done with the tiles before the next step overwrites them
  }
  if (m < M && n < N) {
    const int64_t i = static_cast<int64_t>(m) * N + n;
    acc[i] = sum;
    const float t = static_cast<float>(sum) * xs[m];
    y[i] = t * ws[n];
  }
}

}  // namespace

namespace detail {

void launch_gemm_s8_dp4a(const int8_t* a, const int8_t* b, const float* xs, const float* ws, int M, int K, int N,
                         int32_t* acc, float* y) {
  simt::launch(gemm_s8_dp4a_kernel,
               dim3(static_cast<unsigned>((N + kGemmTile - 1) / kGemmTile), static_cast<unsigned>((M + kGemmTile - 1) / kGemmTile)),
               dim3(kGemmTile, kGemmTile), 0, a, b, xs, ws, M, K, N, acc, y);
}

}  // namespace detail
}  // namespace ladder::cuda::precision
