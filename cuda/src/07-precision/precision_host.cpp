// cuda/src/07-precision/precision_host.cpp -- the checked host API of the stage-07 kernels
// (ladder/cuda/07-precision/precision.hpp). Sizes are validated here, with ladder::Error naming the
// parameter, then cuda/src/07-precision/*.cu launch. The registry entry is in registry.cpp.
#include <cstdint>

#include <cmath>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/core/error.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/07-precision/precision_kernels.hpp"

namespace ladder::cuda::precision {
namespace {

constexpr int64_t kIntMax = 0x7fffffff;

// rows, cols as the kernels index them: int counts, int64 element offsets; grid limits of each launch.
void check_matrix(const char* fn, int64_t rows, int64_t cols, bool null) {
  require(rows >= 0 && rows <= kIntMax, "cuda::precision::{}: rows = {} violates 0 <= rows <= 2^31 - 1", fn, rows);
  require(cols >= 1 && cols <= kIntMax, "cuda::precision::{}: cols = {} violates 1 <= cols <= 2^31 - 1", fn, cols);
  require(rows == 0 || !null, "cuda::precision::{}: a null pointer with rows = {}", fn, rows);
}

}  // namespace

void quantize_per_token_int8(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  check_matrix("quantize_per_token_int8", rows, cols, !x || !q || !scales);
  if (rows > 0) detail::launch_quantize_rows_int8(x, static_cast<int>(rows), static_cast<int>(cols), q, scales);
}

void quantize_per_channel_int8(const float* w, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  check_matrix("quantize_per_channel_int8", rows, cols, !w || !q || !scales);
  if (rows > 0) detail::launch_quantize_cols_int8(w, static_cast<int>(rows), static_cast<int>(cols), q, scales);
}

void quantize_e4m3_1x128(const float* x, int64_t rows, int64_t cols, uint8_t* q, float* scales) {
  check_matrix("quantize_e4m3_1x128", rows, cols, !x || !q || !scales);
  require((cols + kE4m3Tile - 1) / kE4m3Tile <= 65535,
          "cuda::precision::quantize_e4m3_1x128: cols = {} violates ceil(cols / 128) <= 65535 (grid y)", cols);
  if (rows > 0) detail::launch_quantize_e4m3_1x128(x, static_cast<int>(rows), static_cast<int>(cols), q, scales);
}

void quantize_e4m3_128x128(const float* w, int64_t rows, int64_t cols, uint8_t* q, float* scales) {
  check_matrix("quantize_e4m3_128x128", rows, cols, !w || !q || !scales);
  require((cols + kE4m3Tile - 1) / kE4m3Tile <= 65535 && (rows + kE4m3Tile - 1) / kE4m3Tile <= 65535,
          "cuda::precision::quantize_e4m3_128x128: rows = {}, cols = {} violate ceil(rows / 128), ceil(cols / 128) "
          "<= 65535 (the grid)", rows, cols);
  if (rows > 0) detail::launch_quantize_e4m3_128x128(w, static_cast<int>(rows), static_cast<int>(cols), q, scales);
}

void quantize_e4m3_static(const float* x, int64_t rows, int64_t cols, float s, uint8_t* q, float* scales) {
  check_matrix("quantize_e4m3_static", rows, cols, !x || !q || !scales);
  require(std::isfinite(s) && s >= 0x1p-50f,
          "cuda::precision::quantize_e4m3_static: s = {} violates finite s >= 2^-50 (fp8 recipe's x_scale)", s);
  if (rows > 0) detail::launch_quantize_e4m3_static(x, static_cast<int>(rows), static_cast<int>(cols), s, q, scales);
}

void dequantize_per_token_int8(const int8_t* q, const float* scales, int64_t rows, int64_t cols, float* x) {
  check_matrix("dequantize_per_token_int8", rows, cols, !q || !scales || !x);
  if (rows > 0) detail::launch_dequantize_rows_int8(q, scales, static_cast<int>(rows), static_cast<int>(cols), x);
}

void dequantize_e4m3_1x128(const uint8_t* q, const float* scales, int64_t rows, int64_t cols, float* x) {
  check_matrix("dequantize_e4m3_1x128", rows, cols, !q || !scales || !x);
  if (rows > 0) detail::launch_dequantize_e4m3_1x128(q, scales, static_cast<int>(rows), static_cast<int>(cols), x);
}

void a8w8_gemm(const int8_t* xq, const float* xs, const int8_t* wq, const float* ws, int64_t M, int64_t K, int64_t N,
               int32_t* acc, float* y) {
  require(K >= 1 && K <= ladder::precision::kA8W8MaxK,
          "cuda::precision::a8w8_gemm: K = {} violates 1 <= K <= {} (a sum of K int8 x int8 products, each up to "
          "2^14, must fit int32)", K, ladder::precision::kA8W8MaxK);
  require(N >= 1 && N <= kIntMax, "cuda::precision::a8w8_gemm: N = {} violates 1 <= N <= 2^31 - 1", N);
  require(M >= 0 && (M + kGemmTile - 1) / kGemmTile <= 65535,
          "cuda::precision::a8w8_gemm: M = {} violates 0 <= M <= {} (grid y = ceil(M / 16) <= 65535)", M,
          int64_t{65535} * kGemmTile);
  require(M == 0 || (xq && xs && wq && ws && acc && y), "cuda::precision::a8w8_gemm: a null pointer with M = {}", M);
  if (M > 0)
    detail::launch_gemm_s8_dp4a(xq, wq, xs, ws, static_cast<int>(M), static_cast<int>(K), static_cast<int>(N), acc, y);
}

namespace {

// a8w8_gemm_mma's and a8w8_gemm_mma_nk's checks: a8w8_gemm's, K % 16 == 0, the grid, 16-byte aligned operands.
bool check_a8w8_mma(const char* fn, const int8_t* xq, const float* xs, const int8_t* w, const float* ws, int64_t M,
                    int64_t K, int64_t N, const int32_t* acc, const float* y) {
  require(K >= 1 && K <= ladder::precision::kA8W8MaxK,
          "cuda::precision::{}: K = {} violates 1 <= K <= {} (a sum of K int8 x int8 products, each up to 2^14, "
          "must fit int32)", fn, K, ladder::precision::kA8W8MaxK);
  require(K % 16 == 0, "cuda::precision::{}: K = {} violates K % 16 == 0 (rows of whole 16-byte cp.async chunks; "
          "a8w8_gemm takes any K)", fn, K);
  require(N >= 1 && N <= kIntMax, "cuda::precision::{}: N = {} violates 1 <= N <= 2^31 - 1", fn, N);
  require(M >= 0 && (M + kA8W8MmaTile - 1) / kA8W8MmaTile <= 65535,
          "cuda::precision::{}: M = {} violates 0 <= M <= {} (grid y = ceil(M / {}) <= 65535)", fn, M,
          int64_t{65535} * kA8W8MmaTile, kA8W8MmaTile);
  if (M == 0) return false;
  require(xq && xs && w && ws && acc && y, "cuda::precision::{}: a null pointer with M = {}", fn, M);
  require(reinterpret_cast<uintptr_t>(xq) % 16 == 0, "cuda::precision::{}: xq = {} violates 16-byte alignment "
          "(cp.async copies 16 bytes)", fn, static_cast<const void*>(xq));
  return true;
}

}  // namespace

void a8w8_gemm_mma(const int8_t* xq, const float* xs, const int8_t* wq, const float* ws, int64_t M, int64_t K,
                   int64_t N, int32_t* acc, float* y) {
  if (!check_a8w8_mma("a8w8_gemm_mma", xq, xs, wq, ws, M, K, N, acc, y)) return;
  // Scratch for wq^T, stream-ordered (freed after the launches are queued; ladder/cuda/device.hpp), 256-byte
  // aligned, rows of K % 16 == 0 bytes: every row 16-byte aligned.
  DeviceBuffer<int8_t> wt(static_cast<size_t>(N) * static_cast<size_t>(K));
  detail::launch_a8w8_transpose(wq, static_cast<int>(K), static_cast<int>(N), wt.data());
  detail::launch_a8w8_mma(xq, wt.data(), xs, ws, static_cast<int>(M), static_cast<int>(K), static_cast<int>(N), acc, y);
}

void a8w8_gemm_mma_nk(const int8_t* xq, const float* xs, const int8_t* wt, const float* ws, int64_t M, int64_t K,
                      int64_t N, int32_t* acc, float* y) {
  if (!check_a8w8_mma("a8w8_gemm_mma_nk", xq, xs, wt, ws, M, K, N, acc, y)) return;
  require(reinterpret_cast<uintptr_t>(wt) % 16 == 0, "cuda::precision::a8w8_gemm_mma_nk: wt = {} violates 16-byte "
          "alignment (cp.async copies 16 bytes)", static_cast<const void*>(wt));
  detail::launch_a8w8_mma(xq, wt, xs, ws, static_cast<int>(M), static_cast<int>(K), static_cast<int>(N), acc, y);
}

void fp8_block_gemm(const uint8_t* xq, const float* xs, const uint8_t* wq, const float* ws, int64_t M, int64_t K,
                    int64_t N, int64_t nc, float* y) {
  require(K >= 1 && K <= ladder::precision::kFp8MaxK, "cuda::precision::fp8_block_gemm: K = {} violates 1 <= K <= {}",
          K, ladder::precision::kFp8MaxK);
  require(nc >= 1 && 128 % nc == 0, "cuda::precision::fp8_block_gemm: nc = {} violates nc >= 1 and 128 % nc == 0",
          nc);
  require(N >= 1 && N <= kIntMax, "cuda::precision::fp8_block_gemm: N = {} violates 1 <= N <= 2^31 - 1", N);
  require(M >= 0 && (M + kFp8MmaTile - 1) / kFp8MmaTile <= 65535,
          "cuda::precision::fp8_block_gemm: M = {} violates 0 <= M <= {} (grid y = ceil(M / {}) <= 65535)", M,
          int64_t{65535} * kFp8MmaTile, kFp8MmaTile);
  if (M == 0) return;
  require(xq && xs && wq && ws && y, "cuda::precision::fp8_block_gemm: a null pointer with M = {}", M);
  // Scratch, stream-ordered (ladder/cuda/device.hpp), 256-byte aligned, rows of kp % 16 == 0 bytes: every row
  // 16-byte aligned, as cp.async wants. xq is used in place when it already is so.
  const int64_t kp = (K + 15) / 16 * 16;
  const int m = static_cast<int>(M), k = static_cast<int>(K), n = static_cast<int>(N), p = static_cast<int>(kp);
  DeviceBuffer<uint8_t> wt(static_cast<size_t>(N) * static_cast<size_t>(kp));
  detail::launch_fp8_transpose(wq, k, n, p, wt.data());
  if (kp == K && reinterpret_cast<uintptr_t>(xq) % 16 == 0) {
    detail::launch_fp8_mma(xq, wt.data(), xs, ws, m, p, n, static_cast<int>(nc), y);
    return;
  }
  DeviceBuffer<uint8_t> a(static_cast<size_t>(M) * static_cast<size_t>(kp));
  detail::launch_fp8_pad(xq, m, k, p, a.data());
  detail::launch_fp8_mma(a.data(), wt.data(), xs, ws, m, p, n, static_cast<int>(nc), y);
}

void bf16_gemm(const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K, float* c, Bf16GemmConfig config) {
  const int ci = static_cast<int>(config);
  require(ci >= 0 && ci < kBf16GemmConfigs,
          "cuda::precision::bf16_gemm: config = {} violates 0 <= config < {} (a Bf16GemmConfig)", ci,
          kBf16GemmConfigs);
  const int64_t rows = bf16_gemm_block_rows(config);
  require(K >= 8 && K % 8 == 0 && K <= kIntMax,
          "cuda::precision::bf16_gemm: K = {} violates K % 8 == 0 and 8 <= K <= 2^31 - 1 (rows of whole 16-byte "
          "cp.async chunks)", K);
  require(N >= 0 && N <= kIntMax, "cuda::precision::bf16_gemm: N = {} violates 0 <= N <= 2^31 - 1", N);
  require(M >= 0 && (M + rows - 1) / rows <= 65535,
          "cuda::precision::bf16_gemm: M = {} violates 0 <= M <= {} (grid y = ceil(M / {}) <= 65535)", M,
          int64_t{65535} * rows, rows);
  if (M == 0 || N == 0) return;
  require(a && b && c, "cuda::precision::bf16_gemm: a null pointer with M = {}, N = {}", M, N);
  require(reinterpret_cast<uintptr_t>(a) % 16 == 0, "cuda::precision::bf16_gemm: a = {} violates 16-byte alignment "
          "(cp.async copies 16 bytes)", static_cast<const void*>(a));
  require(reinterpret_cast<uintptr_t>(b) % 16 == 0, "cuda::precision::bf16_gemm: b = {} violates 16-byte alignment "
          "(cp.async copies 16 bytes)", static_cast<const void*>(b));
  require(detail::launch_bf16_gemm(a, b, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), c, config),
          "cuda::precision::bf16_gemm: config = {} ({}): cudaFuncSetAttribute(MaxDynamicSharedMemorySize = {} "
          "bytes) failed (a device with less shared memory per block?)", ci, bf16_gemm_config_name(config),
          bf16_gemm_smem_bytes(config));
}

}  // namespace ladder::cuda::precision
