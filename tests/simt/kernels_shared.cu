// tests/simt/kernels_shared.cu -- a kernel that uses all of the dynamic shared memory it is launched with, for
// the opt-in above 48 KiB (cudaFuncSetAttribute, cuda/simt/detail/func_attributes.hpp). The same code is CUDA:
// nvcc compiles it for sm_80 and sm_90 (nvcc_check).
#include <simt.hpp>

#include <cstddef>
#include <stdexcept>

#include "kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {
namespace {

// Word i of the dynamic shared memory holds i (every thread writes its words), then thread 0 sums them all:
// words (words - 1) / 2 when the whole region is there.
template <int Which>
__global__ void fill_shared(unsigned words, unsigned long long* out) {
  SIMT_DYNAMIC_SHARED(unsigned, s);
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) s[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long t = 0;
    for (unsigned i = 0; i < words; ++i) t += s[i];
    *out = t;
  }
}

template <int Which>
unsigned long long run(std::size_t bytes) {
  ladder::cuda::DeviceBuffer<unsigned long long> out(1);
  simt::launch(fill_shared<Which>, dim3(1), dim3(256), bytes, static_cast<unsigned>(bytes / 4), out.data());
  ladder::cuda::sync();
  return out.to_host()[0];
}

}  // namespace

unsigned long long shared_sum_plain(std::size_t bytes) { return run<0>(bytes); }

unsigned long long shared_sum_optin(std::size_t bytes, int optin) {
  if (cudaFuncSetAttribute(fill_shared<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin) != cudaSuccess)
    throw std::invalid_argument("cudaFuncSetAttribute(fill_shared<1>, MaxDynamicSharedMemorySize) failed");
  return run<1>(bytes);
}

}  // namespace simt_tests
