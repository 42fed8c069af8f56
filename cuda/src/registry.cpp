// cuda/src/registry.cpp -- the full registry: every reference rung, then every CUDA rung.
// The CUDA rungs' host wrappers copy inputs to device buffers, launch through simt::launch (fibers on
// the CPU under g++, real kernels under nvcc) and copy the outputs back.
#include "ladder/core/registry.hpp"

namespace ladder {
namespace cuda {
void register_cuda_rungs(Registry& r);
}

const Registry& registry() {
  static const Registry reg = [] {
    Registry r;
    register_ref_rungs(r);
    cuda::register_cuda_rungs(r);
    return r;
  }();
  return reg;
}

}  // namespace ladder
