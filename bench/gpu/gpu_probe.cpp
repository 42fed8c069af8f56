// bench/gpu/gpu_probe.cpp -- is there a CUDA device? Prints one line per device (name, compute
// capability, SMs, memory) and the driver and runtime versions; exits 1 with "no CUDA device: <why>"
// otherwise. scripts/gpu-check runs it before the tests.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0");
    return 1;
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::printf("driver API %d.%d, runtime %d.%d\n", driver / 1000, driver % 1000 / 10, runtime / 1000,
              runtime % 1000 / 10);
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    std::printf("device %d: %s, sm_%d%d, %d SMs, %.1f GiB\n", i, p.name, p.major, p.minor, p.multiProcessorCount,
                static_cast<double>(p.totalGlobalMem) / (1 << 30));
  }
  return 0;
}
