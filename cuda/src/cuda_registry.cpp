// cuda/src/cuda_registry.cpp -- every stage's CUDA rungs, in ladder order.
#include "ladder/core/registry.hpp"

namespace ladder::cuda {

void register_cuda_rungs(Registry& r) {
  (void)r;  // stage 01's kernels register here once cuda/src/01_softmax.cu lands
}

}  // namespace ladder::cuda
