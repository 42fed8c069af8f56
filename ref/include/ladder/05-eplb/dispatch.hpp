// ladder/05-eplb/dispatch.hpp -- stage 05: the data plane EPLB serves, as plain CPU loops.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: data plane
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// EPLB is a control-plane algorithm fed by statistics and consumed by the router:
//   (a) count_expert_load: the load statistics -- how many routed (token, expert) pairs each logical
//       expert received, from the gate's top-k indices; summed over a window, this is `weight`.
//   (b) map_to_physical: after rebalancing, each routed (token t, logical expert e) is sent to one of
//       e's logcnt[e] replicas. Rule: replica rank t mod logcnt[e], i.e. log2phy[e][t % logcnt[e]]
//       (round-robin by token index). It is stateless and deterministic, so a GPU kernel gives
//       bit-identical answers regardless of thread order, and consecutive tokens of a hot expert
//       alternate over its replicas. (A per-expert arrival counter would split exactly evenly but
//       needs atomics whose order, and so whose answer, varies from run to run.)
// These loops are the oracle of the CUDA kernels in cuda/src/05-eplb/eplb.cu. An index of -1 in topk
// means "no expert" (a padded or dropped slot): it is not counted and maps to -1.
#pragma once
#include <vector>

#include "ladder/05-eplb/rebalance.hpp"

namespace ladder::eplb {

// topk [T, k] logical expert ids in [0, num_log) or -1 -> counts [num_log].
inline std::vector<Index> count_expert_load(const IndexMat& topk, Index num_log) {
  require(num_log >= 1, "eplb: count_expert_load: num_log = {} violates num_log >= 1", num_log);
  std::vector<Index> counts(static_cast<size_t>(num_log), 0);
  for (Index t = 0; t < topk.rows(); ++t)
    for (Index j = 0; j < topk.cols(); ++j) {
      const Index e = topk(t, j);
      require(e >= -1 && e < num_log, "eplb: count_expert_load: topk({}, {}) = {} violates -1 <= topk < num_log = {}",
              t, j, e, num_log);
      if (e >= 0) ++counts[static_cast<size_t>(e)];
    }
  return counts;
}

// topk [T, k] -> physical slot [T, k] for layer `layer` of a placement: log2phy[e][t % logcnt[e]].
inline IndexMat map_to_physical(const IndexMat& topk, const Placement& p, Index layer) {
  require(layer >= 0 && layer < p.num_layers(), "eplb: map_to_physical: layer = {} violates 0 <= layer < {}", layer,
          p.num_layers());
  const IndexMat log2phy = p.layer_log2phy(layer);
  IndexMat phys(topk.rows(), topk.cols());
  for (Index t = 0; t < topk.rows(); ++t)
    for (Index j = 0; j < topk.cols(); ++j) {
      const Index e = topk(t, j);
      require(e >= -1 && e < p.num_log(), "eplb: map_to_physical: topk({}, {}) = {} violates -1 <= topk < num_log = {}",
              t, j, e, p.num_log());
      phys(t, j) = e < 0 ? -1 : log2phy(e, t % p.logcnt(layer, e));
    }
  return phys;
}

}  // namespace ladder::eplb
