// ladder/05-eplb/rebalance.hpp -- stage 05 entry point: rebalance_experts -> phy2log, log2phy, logcnt.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: the dispatch
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// eplb.py's rebalance_experts: the hierarchical policy when num_groups % num_nodes == 0 (prefill:
// few nodes, node-limited routing keeps a group's tokens on one node), the global policy otherwise
// (decode: large EP, groups ignored). Then log2phy is built as the inverse of (phy2log, phyrank).
#pragma once
#include <string>

#include "ladder/05-eplb/algorithm.hpp"

namespace ladder::eplb {

enum class Policy { hierarchical, global };
inline const char* policy_name(Policy p) { return p == Policy::hierarchical ? "hierarchical" : "global"; }

// The full answer of the balancer for L layers, num_log logical experts and R physical slots, plus the
// layout it was computed for (the derived views in views.hpp need it).
struct Placement {
  IndexMat phy2log;      // [L, R]        logical expert of each slot
  Array<Index> log2phy;  // [L, num_log, max_cnt]  slots of each expert by replica rank, padded with -1
  IndexMat logcnt;       // [L, num_log]  replicas per expert (>= 1)
  IndexMat phyrank;      // [L, R]        replica rank of each slot
  Policy policy = Policy::hierarchical;
  Index num_groups = 1, num_nodes = 1, num_gpus = 1;

  Index num_layers() const { return phy2log.rows(); }
  Index num_replicas() const { return phy2log.cols(); }
  Index num_log() const { return logcnt.cols(); }
  Index max_cnt() const { return log2phy.shape.empty() ? 0 : log2phy.shape.back(); }
  Index slots_per_gpu() const { return num_replicas() / num_gpus; }
  Index gpus_per_node() const { return num_gpus / num_nodes; }
  Index gpu_of_slot(Index p) const { return p / slots_per_gpu(); }
  Index node_of_gpu(Index g) const { return g / gpus_per_node(); }
  // log2phy of layer l as a [num_log, max_cnt] matrix (what one MoE layer's dispatch reads).
  IndexMat layer_log2phy(Index l) const {
    IndexMat m(num_log(), max_cnt());
    for (Index e = 0; e < num_log(); ++e)
      for (Index k = 0; k < max_cnt(); ++k)
        m(e, k) = log2phy.data[static_cast<size_t>((l * num_log() + e) * max_cnt() + k)];
    return m;
  }
};

// log2phy [L, num_log, max(logcnt)]: slot p is the phyrank[l][p]-th replica of phy2log[l][p]; the
// unused tail of each expert's row is -1 (eplb.py: scatter of arange(R) at phy2log * max_cnt + phyrank).
inline Array<Index> make_log2phy(const IndexMat& phy2log, const IndexMat& phyrank, const IndexMat& logcnt) {
  const Index L = phy2log.rows(), R = phy2log.cols(), num_log = logcnt.cols();
  const Index max_cnt = logcnt.size() ? logcnt.maxCoeff() : 0;
  Array<Index> log2phy({L, num_log, max_cnt}, Index{-1});
  for (Index l = 0; l < L; ++l)
    for (Index p = 0; p < R; ++p) {
      const Index e = phy2log(l, p), k = phyrank(l, p);
      // A wrong replication (a lab's replicate_experts: a rank >= logcnt) would write outside the array;
      // its slot is left out instead, and the tests and check.hpp name the wrong phy2log / phyrank.
      if (e < 0 || e >= num_log || k < 0 || k >= max_cnt) continue;
      log2phy.data[static_cast<size_t>((l * num_log + e) * max_cnt + k)] = p;
    }
  return log2phy;
}

inline Placement make_placement(Replication rep, Policy policy, Index num_groups, Index num_nodes, Index num_gpus) {
  Placement out;
  out.log2phy = make_log2phy(rep.phy2log, rep.rank, rep.logcnt);
  out.phy2log = std::move(rep.phy2log);
  out.phyrank = std::move(rep.rank);
  out.logcnt = std::move(rep.logcnt);
  out.policy = policy;
  out.num_groups = num_groups;
  out.num_nodes = num_nodes;
  out.num_gpus = num_gpus;
  return out;
}

// rebalance_experts(weight [L, num_log], num_replicas, num_groups, num_nodes, num_gpus) -> Placement.
// Preconditions (each raises ladder::Error): weights finite and >= 0; all counts >= 1;
// num_gpus % num_nodes == 0 (eplb.py documents it; its global branch does not check it);
// num_replicas % num_gpus == 0; num_replicas >= num_log; hierarchical only: num_log % num_groups == 0.
// In the global branch num_groups only selects the policy, as in eplb.py.
template <class T>
Placement rebalance_experts(const Mat<T>& weight, Index num_replicas, Index num_groups, Index num_nodes,
                            Index num_gpus) {
  const char* fn = "rebalance_experts";
  detail::require_weights(weight, fn);
  detail::require_positive(fn, "num_replicas", num_replicas);
  detail::require_positive(fn, "num_groups", num_groups);
  detail::require_positive(fn, "num_nodes", num_nodes);
  detail::require_positive(fn, "num_gpus", num_gpus);
  detail::require_divisible(fn, "num_gpus", num_gpus, "num_nodes", num_nodes);
  detail::require_divisible(fn, "num_replicas", num_replicas, "num_gpus", num_gpus);
  require(num_replicas >= weight.cols(),
          "eplb: {}: num_replicas = {} violates num_replicas >= num_log (num_log = {})", fn, num_replicas,
          weight.cols());
  if (num_groups % num_nodes == 0) {
    detail::require_divisible(fn, "num_log", weight.cols(), "num_groups", num_groups);
    return make_placement(rebalance_experts_hierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus),
                          Policy::hierarchical, num_groups, num_nodes, num_gpus);
  }
  return make_placement(rebalance_experts_global(weight, num_replicas, num_gpus), Policy::global, num_groups,
                        num_nodes, num_gpus);
}

}  // namespace ladder::eplb
