// ladder/05-eplb/rungs.hpp -- stage 05's four rungs as plain functions: weight [L, n] (fp64; the arithmetic
// inside is eplb.py's float32) and Config -> named int64 maps. The registry stores them
// (ref/src/05-eplb/registry.cpp) and the case contract runs them by id (ref/src/05-eplb/contract.cpp).
#pragma once
#include <string>

#include "ladder/core/error.hpp"
#include "ladder/05-eplb/eplb.hpp"

namespace ladder::eplb::rungs {

inline Array<Index> to_array(const IndexMat& m) { return Array<Index>::from(m); }

inline Mat<float> f32(const Mat<double>& w) { return detail::to_float32_weights(w); }

inline Outputs balanced_packing(const Mat<double>& w, const Config& c) {
  const Packing p = eplb::balanced_packing(f32(w), c.num_packs);
  return {{"pack_index", to_array(p.pack_index)}, {"rank_in_pack", to_array(p.rank_in_pack)}};
}

inline Outputs replicate_experts(const Mat<double>& w, const Config& c) {
  const Replication r = eplb::replicate_experts(f32(w), c.num_replicas);
  return {{"phy2log", to_array(r.phy2log)}, {"rank", to_array(r.rank)}, {"logcnt", to_array(r.logcnt)}};
}

inline Outputs placement_outputs(const Placement& p) {
  return {{"phy2log", to_array(p.phy2log)}, {"log2phy", p.log2phy}, {"logcnt", to_array(p.logcnt)}};
}

inline Outputs hierarchical(const Mat<double>& w, const Config& c) {
  return placement_outputs(make_placement(
      rebalance_experts_hierarchical(f32(w), c.num_replicas, c.num_groups, c.num_nodes, c.num_gpus),
      Policy::hierarchical, c.num_groups, c.num_nodes, c.num_gpus));
}

inline Outputs global(const Mat<double>& w, const Config& c) {
  return placement_outputs(make_placement(rebalance_experts_global(f32(w), c.num_replicas, c.num_gpus),
                                          Policy::global, 1, c.num_nodes, c.num_gpus));
}

// The rung `id` (balanced_packing | replicate_experts | hierarchical | global); Error naming them.
inline Outputs (*by_id(const std::string& id))(const Mat<double>&, const Config&) {
  if (id == "balanced_packing") return &balanced_packing;
  if (id == "replicate_experts") return &replicate_experts;
  if (id == "hierarchical") return &hierarchical;
  if (id == "global") return &global;
  throw Error("05-eplb: rung '" + id + "' violates rung in {balanced_packing, replicate_experts, hierarchical, global}");
}

}  // namespace ladder::eplb::rungs
