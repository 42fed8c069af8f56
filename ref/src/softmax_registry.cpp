// ref/src/softmax_registry.cpp -- stage 01 reference rungs in the registry.
#include "ladder/core/registry.hpp"
#include "ladder/softmax.hpp"

namespace ladder {

void register_softmax(Registry& r) {
  using softmax::RowsFns;
  r.add({"01-softmax", "naive", "naive softmax", "sum of exp, then exp/sum; overflows for large x by design", "ref",
         RowsFns{&softmax::naive_rows<float>, &softmax::naive_rows<double>}, &softmax::naive_cost,
         "3 accesses/elem (2 loads + 1 store), 4 flops/elem"});
  r.add({"01-softmax", "safe", "safe softmax (notes Alg. 2)", "max pass, sum-of-exp pass, normalise pass", "ref",
         RowsFns{&softmax::safe_rows<float>, &softmax::safe_rows<double>}, &softmax::safe_cost,
         "4 accesses/elem (3 loads + 1 store), 7 flops/elem"});
  r.add({"01-softmax", "online", "online softmax (notes Alg. 3)",
         "one fused pass for m and d (d_j = d_{j-1} e^{m_{j-1}-m_j} + e^{x_j-m_j}), then normalise", "ref",
         RowsFns{&softmax::online_rows<float>, &softmax::online_rows<double>}, &softmax::online_cost,
         "3 accesses/elem (2 loads + 1 store), 7 flops/elem"});
}

}  // namespace ladder
