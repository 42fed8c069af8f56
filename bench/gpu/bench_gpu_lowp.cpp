// bench/gpu/bench_gpu_lowp.cpp -- bench_gpu's tensor-core GEMM rows (the gemm group, after the fp32 project
// GEMM): the bf16 GEMM (cuda::precision::bf16_gemm, one row per tile configuration) beside cuBLAS bf16
// (cublasGemmEx, tensor-op math for that call only), its "÷ floor" against the fp32 FMA floor, so below 1; and
// the A8W8 GEMMs (tensor-core a8w8_gemm_mma(_nk), __dp4a a8w8_gemm) beside cuBLAS int8 (cublasGemmEx, TN).
#include <cublas_v2.h>
#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench_gpu.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::bench_gpu {

void lowp_gemm_rows(std::vector<Row>& rows, cublasHandle_t h, int64_t n, float* c) {
  using cuda::DeviceBuffer;
  // bf16 on the tensor cores (issue 42): the project's mma.sync GEMM beside cuBLAS bf16 (bf16 A, B; fp32 C;
  // fp32 compute). The handle's CUBLAS_PEDANTIC_MATH (true fp32 for the rows above) is lifted to the default
  // tensor-op math for the cuBLAS call only, and restored.
  std::vector<std::uint16_t> ha(std::size_t(n * n)), hb(std::size_t(n * n));
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  for (auto& v : ha) v = formats::to_bf16(dist(gen));
  for (auto& v : hb) v = formats::to_bf16(dist(gen));
  DeviceBuffer<std::uint16_t> A16(ha), B16(hb);
  const float one = 1, zero = 0;
  check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const double cublas_bf16_ms = time_ms([&] {  // column-major C^T [N, M] = B A^T, as sgemm_nt
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(n), int(n), &one, B16.data(), CUDA_R_16BF,
                              int(n), A16.data(), CUDA_R_16BF, int(n), &zero, c, CUDA_R_32F, int(n),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  });
  check_cublas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  // One row per tile configuration (cuda::precision::Bf16GemmConfig), each beside the same cuBLAS time: the
  // default first, under the name the earlier reports used.
  for (int ci = 0; ci < cuda::precision::kBf16GemmConfigs; ++ci) {
    const auto config = static_cast<cuda::precision::Bf16GemmConfig>(ci);
    Row r{ci == 0 ? std::string("bf16 mma GEMM (128x128 tiles, mma.sync m16n8k16, 3-stage cp.async), C = A B^T")
                  : fmt::format("bf16 mma GEMM ({}), C = A B^T", cuda::precision::bf16_gemm_config_name(config)),
          fmt::format("{0}x{0}x{0} bf16 -> fp32", n), "flops",
          time_ms([&] { cuda::precision::bf16_gemm(A16.data(), B16.data(), n, n, n, c, config); }),
          2.0 * double(n) * double(n) * double(n)};
    r.cublas_ms = cublas_bf16_ms;
    rows.push_back(r);
  }

  // int8 (issue 42): the A8W8 GEMMs -- tensor cores (mma.sync m16n8k32 s8) and __dp4a -- beside cuBLAS int8
  // (cublasGemmEx, CUDA_R_8I inputs, CUDA_R_32I output, CUBLAS_COMPUTE_32I, "TN": the weight [N, K] and the
  // activation [M, K] both k-contiguous, the layout cuBLAS's int8 path takes). cuBLAS writes acc only; the project
  // kernels also write y = fl(fl(acc xs) ws) (a second 4n^2-byte output). The mma rows: a8w8_gemm_mma_nk takes the
  // [N, K] weight as cuBLAS does; a8w8_gemm_mma takes wq [K, N] (a8w8_gemm's arguments) and copies it to [N, K] in
  // per-call scratch first, that copy timed in its row. The dp4a kernel (16 x 16 tiles on CUDA cores) is ratioed
  // against cuBLAS int8 too.
  std::vector<std::int8_t> hx(std::size_t(n * n)), hw(std::size_t(n * n));
  std::uniform_int_distribution<int> byte(-128, 127);
  for (auto& v : hx) v = static_cast<std::int8_t>(byte(gen));
  for (auto& v : hw) v = static_cast<std::int8_t>(byte(gen));
  DeviceBuffer<std::int8_t> Xq(hx), Wq(hw);  // Wq read as [K, N] by a8w8_gemm(_mma), as [N, K] by _nk and cuBLAS
  DeviceBuffer<float> xs = random_buffer(std::size_t(n), 24, 1e-3f, 1e-2f),
                      ws = random_buffer(std::size_t(n), 25, 1e-3f, 1e-2f);
  DeviceBuffer<std::int32_t> acc(std::size_t(n * n));
  const std::int32_t ione = 1, izero = 0;
  check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // Column-major acc^T [N, M] = op(A) B: A = Wq [N, K] row-major seen as K x N column-major, transposed;
  // B = Xq [M, K] row-major seen as K x M column-major; acc^T column-major is acc [M, N] row-major.
  const double cublas_i8_ms = time_ms([&] {
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(n), int(n), &ione, Wq.data(), CUDA_R_8I,
                              int(n), Xq.data(), CUDA_R_8I, int(n), &izero, acc.data(), CUDA_R_32I, int(n),
                              CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx (int8)");
  });
  check_cublas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  const std::string i8_shape = fmt::format("{0}x{0}x{0} int8 -> int32 + fp32 y", n);
  const double ops = 2.0 * double(n) * double(n) * double(n);
  Row nk{"A8W8 mma GEMM, weight [N, K] (128x128 tiles, mma.sync m16n8k32 s8, 3-stage cp.async)", i8_shape, "flops",
         time_ms([&] {
           cuda::precision::a8w8_gemm_mma_nk(Xq.data(), xs.data(), Wq.data(), ws.data(), n, n, n, acc.data(),
                                             c);
         }),
         ops};
  nk.cublas_ms = cublas_i8_ms;
  rows.push_back(nk);
  Row kn{"A8W8 mma GEMM, weight [K, N] (the same after a transposing copy to scratch)", i8_shape, "flops",
         time_ms([&] {
           cuda::precision::a8w8_gemm_mma(Xq.data(), xs.data(), Wq.data(), ws.data(), n, n, n, acc.data(), c);
         }),
         ops};
  kn.cublas_ms = cublas_i8_ms;
  rows.push_back(kn);
  Row dp{"A8W8 dp4a GEMM (16x16 tiles, __dp4a on CUDA cores)", i8_shape, "flops", time_ms([&] {
           cuda::precision::a8w8_gemm(Xq.data(), xs.data(), Wq.data(), ws.data(), n, n, n, acc.data(), c);
         }),
         ops};
  dp.cublas_ms = cublas_i8_ms;
  rows.push_back(dp);
}

}  // namespace ladder::bench_gpu
