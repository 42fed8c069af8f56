// ladder/cuda/07-precision/precision.hpp -- host API of the stage-07 CUDA kernels (cuda/src/07-precision/*.cu):
// the quantisers of ladder/core/quant.hpp and the A8W8 GEMM of ladder/07-precision/a8w8.hpp, on the device, and
// a bf16 GEMM on the tensor cores.
//
// Every function takes DEVICE pointers (ladder::cuda::DeviceBuffer<T>::data()), launches and returns; call
// ladder::cuda::sync() before reading results on a GPU (under SIMT the launch has finished on return).
// Results are the reference's bits: codes, scales and int32 sums exactly (one float32 division per scale,
// RNE with saturation through ladder/core/formats.hpp, integer sums that cannot overflow), and the
// dequantised values in the reference's operation order (bf16_gemm: within a stated bound). Inputs must be
// finite (the reference refuses NaN / inf; the kernels do not look). Bad sizes throw ladder::Error naming the
// parameter.
#pragma once
#include <cstdint>

namespace ladder::cuda::precision {

// x [rows, cols] -> q int8 [rows, cols], scales [rows]: quant::per_token (amax / 127, dynamic).
void quantize_per_token_int8(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scales);
// w [rows, cols] -> q int8, scales [cols]: quant::per_channel (one scale per column).
void quantize_per_channel_int8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales);
// x [rows, cols] -> E4M3 bit patterns, scales [rows, ceil(cols / 128)]: quant::tiles_1x128 (amax / 448).
void quantize_e4m3_1x128(const float* x, int64_t rows, int64_t cols, uint8_t* q, float* scales);
// w [rows, cols] -> E4M3 bit patterns, scales [ceil(rows / 128), ceil(cols / 128)]: quant::blocks_128x128.
void quantize_e4m3_128x128(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scales);
// x [rows, cols] -> E4M3 bit patterns RNE(x / s) (saturating) with one static scale s (finite, >= 2^-50), and
// scales [rows, ceil(cols / 128)] all s: fp8_block's x_scale (precision::fp8_quantize_x).
void quantize_e4m3_static(const float* x, int64_t rows, int64_t cols, float s, uint8_t* q, float* scales);
// The dequantisations (quant::dequantize): x = code * its scale, one float32 rounding.
void dequantize_per_token_int8(const int8_t* q, const float* scales, int64_t rows, int64_t cols, float* x);
void dequantize_e4m3_1x128(const uint8_t* q, const float* scales, int64_t rows, int64_t cols, float* x);
// A8W8: acc [M, N] = xq [M, K] wq [K, N] int8 -> int32 through __dp4a (exact: K <= 131071 is required), then
// y [M, N] = fl(fl(float(acc) * xs[m]) * ws[n]) (per token x per channel), as precision::a8w8_gemm.
void a8w8_gemm(const int8_t* xq, const float* xs, const int8_t* wq, const float* ws, int64_t M, int64_t K, int64_t N,
               int32_t* acc, float* y);
// The same on the tensor cores (mma.sync m16n8k32 s8 -> s32; cuda/src/07-precision/a8w8_mma.cuh): the same
// arguments and the same bits (acc is exact, y in the same order). wq [K, N] is first copied to [N, K] (k
// contiguous per column, what the mma's B operand wants) in per-call scratch. K % 16 == 0 (rows of whole
// 16-byte cp.async chunks) and xq 16-byte aligned are required, besides a8w8_gemm's K <= 131071.
void a8w8_gemm_mma(const int8_t* xq, const float* xs, const int8_t* wq, const float* ws, int64_t M, int64_t K,
                   int64_t N, int32_t* acc, float* y);
// The same with the weight already [N, K] (wt = wq^T, as serving stores it and cuBLAS's int8 "TN" takes it):
// no copy. wt 16-byte aligned too.
void a8w8_gemm_mma_nk(const int8_t* xq, const float* xs, const int8_t* wt, const float* ws, int64_t M, int64_t K,
                      int64_t N, int32_t* acc, float* y);
// The bf16 GEMM's tile configurations (each stated in cuda/src/07-precision/bf16_gemm.cuh): block tile of C,
// k step, cp.async ring stages, warps of 64 x 64. The first is the default; the others need the dynamic shared
// memory opt-in (cudaFuncSetAttribute, which the launch does).
enum class Bf16GemmConfig : int {
  tile128x128 = 0,      // 128 x 128, k 32, 3 stages, 4 warps: 48 KiB static shared memory
  tile128x256 = 1,      // 128 x 256, k 32, 4 stages, 8 warps: 96 KiB dynamic
  tile256x128 = 2,      // 256 x 128, k 32, 4 stages, 8 warps: 96 KiB dynamic
  tile128x256_k64 = 3,  // 128 x 256, k 64, 3 stages, 8 warps: 144 KiB dynamic
};
inline constexpr int kBf16GemmConfigs = 4;
inline constexpr int bf16_gemm_block_rows(Bf16GemmConfig c) { return c == Bf16GemmConfig::tile256x128 ? 256 : 128; }
inline constexpr int bf16_gemm_smem_bytes(Bf16GemmConfig c) {
  return c == Bf16GemmConfig::tile128x128 ? 3 * 256 * 32 * 2
         : c == Bf16GemmConfig::tile128x256_k64 ? 3 * 384 * 64 * 2 : 4 * 384 * 32 * 2;
}
inline constexpr const char* bf16_gemm_config_name(Bf16GemmConfig c) {
  switch (c) {
    case Bf16GemmConfig::tile128x128: return "128x128 k32 3-stage, 4 warps, 48 KiB static";
    case Bf16GemmConfig::tile128x256: return "128x256 k32 4-stage, 8 warps, 96 KiB dynamic";
    case Bf16GemmConfig::tile256x128: return "256x128 k32 4-stage, 8 warps, 96 KiB dynamic";
    case Bf16GemmConfig::tile128x256_k64: return "128x256 k64 3-stage, 8 warps, 144 KiB dynamic";
  }
  return "not a configuration";
}
// c [M, N] fp32 = a [M, K] b [N, K]^T ("NT", as the fp32 GEMM), a and b bf16 bit patterns, row-major, on the
// tensor cores (mma.sync m16n8k16, fp32 accumulation; order and tiling in cuda/src/07-precision/bf16_gemm.cuh).
// Not the reference's bits: each mma's internal order is the hardware's, so the result is judged by a bound.
// K % 8 == 0 (rows of whole 16-byte cp.async chunks) and a, b 16-byte aligned are required.
// `config` picks the tile configuration (Bf16GemmConfig above; every one accumulates in the same order, so the
// same bound holds); a value that is none of them is refused naming `config`.
void bf16_gemm(const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K, float* c,
               Bf16GemmConfig config = Bf16GemmConfig::tile128x128);
// DeepSeek-V3's FP8 block-scaled GEMM on the tensor cores (mma.sync m16n8k32 e4m3 -> f32, promotion every nc
// elements; cuda/src/07-precision/fp8_mma.cuh): xq [M, K] E4M3 codes with xs [M, ceil(K / 128)] (1 x 128 tiles),
// wq [K, N] codes with ws [ceil(K / 128), ceil(N / 128)] (128 x 128 blocks), y [M, N] float32. Not the
// reference's bits in general: judged by precision::fp8_bound for any recipe with this nc (on the emulator, the
// bits of the recipe with acc_bits = 24, RNE). wq is copied to [N, K'] and, when K % 16 != 0, xq to [M, K'] (K'
// = K rounded up to 16, zero codes after K) in per-call scratch. nc divides 128; 1 <= K <= 2^20; on a GPU,
// sm_89 or newer (the kernel traps on older devices).
void fp8_block_gemm(const uint8_t* xq, const float* xs, const uint8_t* wq, const float* ws, int64_t M, int64_t K,
                    int64_t N, int64_t nc, float* y);

}  // namespace ladder::cuda::precision
