// ladder/cuda/07-precision/precision_kernels.hpp -- the stage-07 kernels' launch functions, unchecked and free
// of fmt (the .cu files include only this). Call the checked API in ladder/cuda/07-precision/precision.hpp.
// All pointers are device pointers; matrices row-major; the recipes are those of ladder/core/quant.hpp and
// ladder/07-precision/a8w8.hpp (the kernels compute the same bits).
#pragma once
#include <cstdint>

#include "ladder/cuda/07-precision/precision.hpp"  // Bf16GemmConfig

namespace ladder::cuda::precision {

inline constexpr int kRowThreads = 256;  // per-token int8: one block of 256 threads per row
inline constexpr int kColThreadsX = 32;  // per-channel int8: 32 columns per block ...
inline constexpr int kColThreadsY = 8;   // ... and 8 threads down each column
inline constexpr int kE4m3Tile = 128;    // DeepSeek-V3's 1 x 128 activation tile: one block of 128 threads each
inline constexpr int kE4m3BlockThreads = 256;  // the 128 x 128 weight blocks: one block of 256 threads each
inline constexpr int kGemmTile = 16;     // the dp4a GEMM: 16 x 16 outputs per block of 16 x 16 threads ...
inline constexpr int kGemmWords = 16;    // ... K in steps of 16 packed words = 64 int8 values
inline constexpr int kElemThreads = 256; // the dequantisation kernels (one element per thread, grid-stride)
inline constexpr int kBf16GemmTile = 128; // the bf16 tensor-core GEMM: one 128 x 128 tile of C per block
inline constexpr int kA8W8MmaTile = 128;  // the int8 tensor-core GEMM: the same
inline constexpr int kFp8MmaTile = 128;   // the FP8 block-scaled tensor-core GEMM: the same

namespace detail {
// q [rows, cols] int8 codes, scales [rows]: s = amax / 127 per row (1 for an all-zero row), q = RNE(x / s).
void launch_quantize_rows_int8(const float* x, int rows, int cols, int8_t* q, float* scales);
// The same per column: scales [cols] (a weight matrix [K, N], one scale per output channel).
void launch_quantize_cols_int8(const float* w, int rows, int cols, int8_t* q, float* scales);
// E4M3 codes (bit patterns) [rows, cols] and scales [rows, ceil(cols / 128)]: s = amax / 448 per 1 x 128 tile.
void launch_quantize_e4m3_1x128(const float* x, int rows, int cols, uint8_t* q, float* scales);
// E4M3 codes [rows, cols] and scales [ceil(rows / 128), ceil(cols / 128)]: s = amax / 448 per 128 x 128 block.
void launch_quantize_e4m3_128x128(const float* w, int rows, int cols, uint8_t* q, float* scales);
// E4M3 codes = RNE(x / s) with one given scale s; scales [rows, ceil(cols / 128)] all set to s.
void launch_quantize_e4m3_static(const float* x, int rows, int cols, float s, uint8_t* q, float* scales);
// x = float(q) * scales[row]; and x = e4m3(q) * scales[row, col / 128].
void launch_dequantize_rows_int8(const int8_t* q, const float* scales, int rows, int cols, float* x);
void launch_dequantize_e4m3_1x128(const uint8_t* q, const float* scales, int rows, int cols, float* x);
// acc [M, N] = a [M, K] b [K, N] in int32 through __dp4a, and y = fl(fl(float(acc) * xs[m]) * ws[n]).
void launch_gemm_s8_dp4a(const int8_t* a, const int8_t* b, const float* xs, const float* ws, int M, int K, int N,
                         int32_t* acc, float* y);
// c [M, N] fp32 = a [M, K] b [N, K]^T, bf16 bit patterns, on mma.sync m16n8k16 (bf16_gemm.cuh); K % 8 == 0,
// a and b 16-byte aligned.
// `config` one of Bf16GemmConfig's; false when the dynamic shared memory opt-in failed (nothing launched).
bool launch_bf16_gemm(const uint16_t* a, const uint16_t* b, int M, int N, int K, float* c, Bf16GemmConfig config);
// wt [N, K] = wq [K, N]^T (int8): the weight layout the tensor-core A8W8 GEMM takes.
void launch_a8w8_transpose(const int8_t* wq, int K, int N, int8_t* wt);
// acc [M, N] = a [M, K] wt [N, K]^T in int32 on mma.sync m16n8k32 s8 (a8w8_mma.cuh), y as launch_gemm_s8_dp4a's;
// K % 16 == 0, a and wt 16-byte aligned.
void launch_a8w8_mma(const int8_t* a, const int8_t* wt, const float* xs, const float* ws, int M, int K, int N,
                     int32_t* acc, float* y);
// out [rows, kp] = in [rows, k] with zero codes in columns k .. kp - 1; wt [N, kp] = wq [K, N]^T, zero past K.
void launch_fp8_pad(const uint8_t* in, int rows, int k, int kp, uint8_t* out);
void launch_fp8_transpose(const uint8_t* wq, int K, int N, int kp, uint8_t* wt);
// y [M, N] = the FP8 block-scaled product of a [M, K] and wt [N, K]^T E4M3 codes on mma.sync m16n8k32 e4m3 with
// promotion every nc (fp8_mma.cuh); xs [M, ceil(K / 128)], ws [ceil(K / 128), ceil(N / 128)]; K % 16 == 0, a
// and wt 16-byte aligned; sm_89 or newer on a GPU.
void launch_fp8_mma(const uint8_t* a, const uint8_t* wt, const float* xs, const float* ws, int M, int K, int N, int nc,
                    float* y);
}  // namespace detail

}  // namespace ladder::cuda::precision
