// cuda/src/cuda_registry.cpp -- every stage's CUDA rungs, in ladder order.
#include "ladder/core/registry.hpp"

namespace ladder::cuda {

void register_softmax_cuda(Registry& r);  // cuda/src/01_softmax_registry.cpp
void register_attention_cuda(Registry& r);  // cuda/src/02_attention_host.cpp
void register_mla_cuda(Registry& r);      // cuda/src/03_mla_registry.cpp
void register_moe_cuda(Registry& r);      // cuda/src/04_moe_registry.cpp

void register_cuda_rungs(Registry& r) {
  register_softmax_cuda(r);
  register_attention_cuda(r);
  register_mla_cuda(r);
  register_moe_cuda(r);
}

}  // namespace ladder::cuda
