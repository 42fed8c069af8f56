// bench/gpu/floors.cu -- see floors.hpp. Compiled by nvcc only (the GPU build).
#include <cuda_runtime.h>

#include "floors.hpp"

namespace ladder::bench_gpu {
namespace {

__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_random_kernel(float* p, std::size_t n, std::uint64_t seed, float lo, float hi) {
  for (std::size_t i = blockIdx.x * (std::size_t)blockDim.x + threadIdx.x; i < n;
       i += (std::size_t)gridDim.x * blockDim.x) {
    const std::uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + i);
    const float u = (float)(h >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
    const float v = lo + (hi - lo) * u;
    p[i] = (h & 1) ? -v : v;
  }
}

constexpr int kChains = 8;
constexpr int kThreads = 256;

__global__ void fma_chain_kernel(float* sink, int iters) {
  float a[kChains];
  const float m = 0.999999f, c = 1e-7f * (float)(threadIdx.x + 1);
#pragma unroll
  for (int k = 0; k < kChains; ++k) a[k] = (float)(blockIdx.x + k);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < kChains; ++k) a[k] = fmaf(a[k], m, c);
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kChains; ++k) s += a[k];
  if (s == -1.0f) *sink = s;  // never true for these values; the compiler cannot know that
}

}  // namespace

void fill_random(float* p, std::size_t n, std::uint64_t seed, float lo, float hi) {
  if (n == 0) return;
  fill_random_kernel<<<4096, 256>>>(p, n, seed, lo, hi);
}

double launch_fma_chain(float* sink, int blocks, int iters) {
  fma_chain_kernel<<<blocks, kThreads>>>(sink, iters);
  return 2.0 * kChains * (double)iters * (double)blocks * kThreads;
}

}  // namespace ladder::bench_gpu
