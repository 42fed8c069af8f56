// bench/gpu/bench_gpu.hpp -- what the GPU benchmark's row groups share (bench_gpu.cpp: the driver, the fp32
// rungs and the project GEMM; bench_gpu_lowp.cpp: the bf16 and int8 GEMMs on tensor cores).
#pragma once
#include <cublas_v2.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ladder/cuda/device.hpp"

namespace ladder::bench_gpu {

// One line of the table: `work` is bytes ("bytes": rate in GB/s) or FLOPs ("flops": TFLOP/s).
struct Row {
  std::string rung, shape, kind;
  double ms = 0, work = 0, floor_ms = 0, cublas_ms = NAN;
};

void check_cublas(cublasStatus_t s, const char* call);
// Median of the run's --reps calls of f, each between two CUDA events, after two untimed calls.
double time_ms(const std::function<void()>& f);
// n device floats, +-(lo .. hi), never zero (floors.hpp's fill_random).
cuda::DeviceBuffer<float> random_buffer(std::size_t n, std::uint64_t seed, float lo = 0.1f, float hi = 1.0f);

// The gemm group's tensor-core rows at n^3: bf16_gemm beside cuBLAS bf16, the A8W8 GEMMs beside cuBLAS int8.
// `c` is a device buffer of n x n floats.
void lowp_gemm_rows(std::vector<Row>& rows, cublasHandle_t h, int64_t n, float* c);

}  // namespace ladder::bench_gpu
