// simt/detail/lang.hpp -- the parts of the CUDA language that g++ lacks: execution-space keywords,
// dim3/uint3 and the built-in variables threadIdx, blockIdx, blockDim, gridDim, warpSize.
//
// Included only when the translation unit is NOT compiled by nvcc. The SIMT build must never need the
// CUDA toolkit, so dim3/uint3 are declared here instead of being taken from <vector_types.h>.
#pragma once

// A kernel is an ordinary function on the CPU: the execution-space keywords vanish.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

// One instance per OS worker thread. A worker runs its blocks one after another, so while a block
// runs, all of its CUDA threads (fibers on that worker) see the same variable, as on the GPU. Like
// GPU shared memory it is not re-initialised between blocks: a block must write before it reads.
#define __shared__ static thread_local

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// Per OS worker; the scheduler stores the running CUDA thread's index into threadIdx each time it
// switches to that thread's fiber (fibers never migrate between OS threads).
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
inline constexpr int warpSize = 32;
