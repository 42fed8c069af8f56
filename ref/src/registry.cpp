// ref/src/registry.cpp -- every stage's reference rungs, in ladder order.
#include "ladder/core/registry.hpp"

namespace ladder {

void register_softmax(Registry& r);  // ref/src/softmax_registry.cpp
void register_attention(Registry& r);  // ref/src/attention_registry.cpp
void register_mla(Registry& r);        // ref/src/mla_registry.cpp
void register_moe(Registry& r);        // ref/src/moe_registry.cpp
void register_eplb(Registry& r);     // ref/src/eplb_registry.cpp
void register_disagg(Registry& r);   // ref/src/disagg_registry.cpp

void register_ref_rungs(Registry& r) {
  register_softmax(r);
  register_attention(r);
  register_mla(r);
  register_moe(r);
  register_eplb(r);
  register_disagg(r);
}

}  // namespace ladder
