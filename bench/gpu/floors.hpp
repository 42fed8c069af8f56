// bench/gpu/floors.hpp -- the GPU benchmark's own kernels (bench/gpu/floors.cu): random non-zero
// inputs and the FMA-bound kernel that measures the fp32 floor in the same run. Plain C++ (no fmt):
// included by the nvcc-compiled floors.cu and the g++-compiled driver.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ladder::bench_gpu {

// p[i] = +-(lo + (hi - lo) u_i), u_i in [0, 1) from a hash of (seed, i): never zero when lo > 0.
void fill_random(float* p, std::size_t n, std::uint64_t seed, float lo, float hi);

// An FMA-bound kernel on `blocks` x 256 threads, each running 8 independent chains of `iters` FMAs;
// returns the FLOPs it performs (2 per FMA). `sink` (one float, device) keeps the result observable.
double launch_fma_chain(float* sink, int blocks, int iters);

}  // namespace ladder::bench_gpu
