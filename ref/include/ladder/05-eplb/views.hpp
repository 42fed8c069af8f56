// ladder/05-eplb/views.hpp -- stage 05: what a placement means for the hardware (loads, imbalance).
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: derived views
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// The load model is eplb.py's own (tokens_per_phy in rebalance_experts_hierarchical): the tokens of
// expert e are split evenly over its logcnt replicas, so a replica of e carries weight[e] / logcnt[e].
// Replicas per expert is Placement::logcnt itself.
#pragma once
#include <algorithm>

#include "ladder/05-eplb/rebalance.hpp"

namespace ladder::eplb {

// Load of every GPU after EPLB, [L, num_gpus].
template <class T>
Mat<double> gpu_loads(const Mat<T>& weight, const Placement& p) {
  require(weight.rows() == p.num_layers() && weight.cols() == p.num_log(),
          "eplb: gpu_loads: weight shape [{}, {}] violates weight shape == [num_layers, num_log] = [{}, {}]",
          weight.rows(), weight.cols(), p.num_layers(), p.num_log());
  Mat<double> loads = Mat<double>::Zero(p.num_layers(), p.num_gpus);
  for (Index l = 0; l < p.num_layers(); ++l)
    for (Index s = 0; s < p.num_replicas(); ++s) {
      const Index e = p.phy2log(l, s);
      loads(l, p.gpu_of_slot(s)) += static_cast<double>(weight(l, e)) / static_cast<double>(p.logcnt(l, e));
    }
  return loads;
}

// Load of every GPU without EPLB, [L, num_gpus]: no replicas, expert e on GPU floor(e * num_gpus /
// num_log) -- contiguous blocks whose sizes differ by at most one (the static expert-parallel layout).
template <class T>
Mat<double> static_gpu_loads(const Mat<T>& weight, Index num_gpus) {
  require(num_gpus >= 1, "eplb: static_gpu_loads: num_gpus = {} violates num_gpus >= 1", num_gpus);
  const Index n = weight.cols();
  Mat<double> loads = Mat<double>::Zero(weight.rows(), num_gpus);
  for (Index l = 0; l < weight.rows(); ++l)
    for (Index e = 0; e < n; ++e) loads(l, e * num_gpus / n) += static_cast<double>(weight(l, e));
  return loads;
}

// Per-node load [L, num_nodes] from per-GPU loads: GPU g is on node g / (num_gpus / num_nodes).
inline Mat<double> node_loads(const Mat<double>& gpu_loads, Index num_nodes) {
  require(num_nodes >= 1, "eplb: node_loads: num_nodes = {} violates num_nodes >= 1", num_nodes);
  const Index G = gpu_loads.cols();
  require(G % num_nodes == 0, "eplb: node_loads: num_gpus = {} violates num_gpus % num_nodes == 0 (num_nodes = {})",
          G, num_nodes);
  Mat<double> loads = Mat<double>::Zero(gpu_loads.rows(), num_nodes);
  for (Index l = 0; l < gpu_loads.rows(); ++l)
    for (Index g = 0; g < G; ++g) loads(l, g / (G / num_nodes)) += gpu_loads(l, g);
  return loads;
}

// Imbalance = max / mean of the loads of one layer (1 = perfect; a layer with no load counts as 1).
// MoE layers run one after another and each waits for its slowest GPU, so the whole model's slowdown
// against perfect balance is sum_l max_l / sum_l mean_l ("overall"); "worst" is the worst layer.
struct Imbalance {
  Vec<double> per_layer;
  double overall = 1;
  double worst = 1;
};

inline Imbalance imbalance(const Mat<double>& loads) {
  Imbalance r;
  r.per_layer = Vec<double>::Ones(loads.rows());
  double sum_max = 0, sum_mean = 0;
  for (Index l = 0; l < loads.rows(); ++l) {
    const double mx = loads.row(l).maxCoeff(), mean = loads.row(l).mean();
    if (mean > 0) r.per_layer(l) = mx / mean;
    sum_max += mx;
    sum_mean += mean;
  }
  if (sum_mean > 0) r.overall = sum_max / sum_mean;
  if (loads.rows() > 0) r.worst = r.per_layer.maxCoeff();
  return r;
}

// Node of every expert group, [L, num_groups]: the node holding all replicas of the group's experts,
// or -1 if they span several nodes (never for the hierarchical policy; common for the global one).
inline IndexMat group_nodes(const Placement& p, Index num_groups) {
  require(num_groups >= 1 && p.num_log() % num_groups == 0,
          "eplb: group_nodes: num_groups = {} violates num_log % num_groups == 0 (num_log = {})", num_groups,
          p.num_log());
  const Index group_size = p.num_log() / num_groups;
  IndexMat nodes = IndexMat::Constant(p.num_layers(), num_groups, -2);  // -2: not seen yet
  for (Index l = 0; l < p.num_layers(); ++l)
    for (Index s = 0; s < p.num_replicas(); ++s) {
      const Index g = p.phy2log(l, s) / group_size, node = p.node_of_gpu(p.gpu_of_slot(s));
      Index& slot = nodes(l, g);
      slot = (slot == -2 || slot == node) ? node : -1;
    }
  return nodes;
}

}  // namespace ladder::eplb
