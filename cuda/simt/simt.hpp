// simt.hpp -- the one header a CUDA kernel file of ladder includes: the same .cu compiles with nvcc
// for a real GPU and with g++ for the CPU.
//
//   simt::launch(kernel, grid, block, smem_bytes, args...)   instead of kernel<<<grid, block, smem>>>(args...)
//   SIMT_DYNAMIC_SHARED(T, name);                            instead of extern __shared__ T name[];
//
// nvcc: both are plain CUDA (a launch is asynchronous; synchronize before reading results).
// g++:  every CUDA thread is a fiber, blocks are spread over OS workers, and a launch returns when
//       the grid has finished. Supported: threadIdx/blockIdx/blockDim/gridDim/warpSize, __shared__,
//       __syncthreads, __syncwarp, __shfl(_up/_down/_xor)_sync, __ballot/__any/__all_sync, atomics,
//       the common math intrinsics, __dp4a, cudaFuncSetAttribute's dynamic shared memory opt-in above 48 KiB (an
//       sm_80's 166912 bytes at most); tensor_core.hpp adds ldmatrix, mma.sync and cp.async. Breaking a
//       CUDA rule aborts with "simt: error: ... file:line".
//       Options: SIMT_SCHEDULE=forward|reverse|random[:SEED], SIMT_THREADS=N, SIMT_STACK_KB=N, or
//       simt::set_config(). Build with -DSIMT_TSAN -fsanitize=thread for the TSan mode.
#pragma once

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

// One byte array for every kernel in the file (two kernels declaring `extern __shared__` arrays of
// different types under one name would not compile); `name` is a pointer in both builds.
#define SIMT_DYNAMIC_SHARED(T, name)                                   \
  extern __shared__ __align__(16) unsigned char simt_dynamic_shared[]; \
  T* const name = reinterpret_cast<T*>(simt_dynamic_shared)

namespace simt {
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem, A&&... args) {
  kernel<<<grid, block, smem>>>(std::forward<A>(args)...);
}
}  // namespace simt

#else

#include "detail/atomics.hpp"
#include "detail/config.hpp"
#include "detail/intrinsics.hpp"
#include "detail/lang.hpp"
#include "detail/launch.hpp"
#include "detail/scheduler.hpp"
#include "detail/warp.hpp"

#define SIMT_DYNAMIC_SHARED(T, name) \
  T* const name = ::simt::detail::dynamic_shared<T>(std::source_location::current())

#endif
