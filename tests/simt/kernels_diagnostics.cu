// tests/simt/kernels_diagnostics.cu -- kernels that break a CUDA rule. Each one must stop the process
// with "simt: error: ..." naming the offending line; the *_line(s) constants hold those lines (keep
// them next to the code they point at).
#include <simt.hpp>

#include "kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {

using ladder::cuda::DeviceBuffer;

// Half the block waits at one barrier, half at another (undefined behaviour in CUDA).
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x < 64) {
    out[threadIdx.x] = 1;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();
  }
}
const int divergent_barrier_lines[2] = {__LINE__ - 6, __LINE__ - 3};

// A full mask inside a branch only lanes 0-15 take; lanes 16-31 never call the shuffle.
__global__ void partial_mask_shuffle_kernel(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}
const int partial_mask_shuffle_line = __LINE__ - 3;

// A block of 48 threads: its second warp has 16 lanes, but the mask names 32.
__global__ void partial_warp_shuffle_kernel(int* out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}
const int partial_warp_shuffle_line = __LINE__ - 2;

// Lanes 0-15 wait in __syncwarp for lanes 16-31, which wait at __syncthreads for lanes 0-15.
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x % 32 < 16) __syncwarp();
  __syncthreads();
  out[threadIdx.x] = 1;
}
const int deadlock_lines[2] = {__LINE__ - 4, __LINE__ - 3};

void divergent_barrier() {
  DeviceBuffer<int> out(128);
  simt::launch(divergent_barrier_kernel, dim3(1), dim3(128), 0, out.data());
}

void partial_mask_shuffle() {
  DeviceBuffer<int> out(32);
  simt::launch(partial_mask_shuffle_kernel, dim3(1), dim3(32), 0, out.data());
}

void partial_warp_shuffle() {
  DeviceBuffer<int> out(48);
  simt::launch(partial_warp_shuffle_kernel, dim3(1), dim3(48), 0, out.data());
}

void deadlock() {
  DeviceBuffer<int> out(64);
  simt::launch(deadlock_kernel, dim3(1), dim3(64), 0, out.data());
}

}  // namespace simt_tests
