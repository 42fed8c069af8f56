// ref/src/01-softmax/registry.cpp -- stage 01 reference rungs in the registry.
#include "ladder/core/registry.hpp"
#include "ladder/01-softmax/softmax.hpp"
#include "ladder/01-softmax/softmax_vec.hpp"

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
  // The same two algorithms on every SIMD lane with Eigen's packet exp (softmax_vec.hpp): the pair to
  // time against each other, since the scalar rungs are bound by one libm exp per element.
  r.add({"01-softmax", "safe_vec", "safe softmax, vectorised", "safe's three passes with Eigen's vectorised exp", "ref",
         RowsFns{&softmax::safe_vec_rows<float>, &softmax::safe_vec_rows<double>}, &softmax::safe_cost,
         "4 accesses/elem (3 loads + 1 store), 7 flops/elem"});
  r.add({"01-softmax", "online_vec", "online softmax, vectorised (per-lane m, d)",
         "online's fused pass with one (m, d) per SIMD lane, merged at the row end: d = d_a e^{m_a-m} + d_b e^{m_b-m}",
         // float64: the one-lane recurrence (online_rows). Split over lanes, the sum of a long row lands
         // 5 ulp from the oracle's on mixed_scales (2 ulp from the exact sum; the oracle is 3 ulp off),
         // past the float64 floor of the tolerance rule; the lanes are for float32 speed.
         "ref", RowsFns{&softmax::online_vec_rows<float>, &softmax::online_rows<double>}, &softmax::online_cost,
         "3 accesses/elem (2 loads + 1 store), 7 flops/elem"});
}

}  // namespace ladder
