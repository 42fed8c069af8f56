// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/05-eplb/algorithm.hpp -- stage 05, the expert-parallel load balancer (EPLB): the four rungs.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: all four rungs
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Source: DeepSeek's eplb.py (deepseek-ai/EPLB: balanced_packing, replicate_experts,
// rebalance_experts_hierarchical, rebalance_experts), as read in Huiming's notes
// "DeepSeek Expert Parallelism Load Balancer (EPLB) Code Reading" (the code reading). The chapter
// chapters/05-eplb/README.md walks through the code reading's worked example with these functions.
//
// Vocabulary (the sources' own): a *logical* expert is one the model defines; a *physical* expert
// (replica, slot) is a copy placed on a GPU. phy2log[l][p] = logical expert held by slot p of layer l;
// logcnt[l][e] = number of replicas of e; log2phy[l][e][k] = slot of the k-th replica of e, padded
// with -1; phyrank[l][p] = k such that log2phy[l][phy2log[l][p]][k] == p. Slot p lives on GPU
// p / (R / num_gpus); GPU g lives on node g / (num_gpus / num_nodes).
//
// Deliberate differences from eplb.py (nothing else differs):
//  * Sorts are STABLE: descending weight, ties -> lowest index first. eplb.py calls torch.sort, which is
//    not stable, so on tied weights it may visit tied items in another order. Within one
//    balanced_packing call the pack loads do not depend on that order (the greedy looks only at
//    weights); only WHICH of the tied items lands in which pack can differ. For the common tie --
//    two replicas of the same expert -- that changes only phyrank / log2phy; for tied different
//    experts (or tied groups in step 1) phy2log differs too. argmax ties (replicate_experts) take the
//    lowest id in both (torch.max returns the first maximal index).
//  * Arithmetic in T. eplb.py computes in float32 (rebalance_experts: weight.float()), and the oracle
//    does too: the registry rungs, the goldens and `ladder eplb` call the T = float templates on
//    to_float32_weights(w). Float32 is not a detail: once a load is divided by a replica count,
//    double and float32 can order two pack loads differently (4 + 8/3 and 10/3 + 10/3 are equal in
//    double, not in float32), and about 2 % of random inputs then give another phy2log. T = double
//    remains available for exact-arithmetic studies. Group sums are taken left to right (torch sums
//    in another order; for integer token counts below 2^24 every order gives the same float32).
//  * Preconditions throw ladder::Error naming the parameter, the value and the constraint (eplb.py
//    asserts some of them and silently misbehaves on the rest, e.g. negative or NaN weights).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::eplb {

using Index = int64_t;
using IndexMat = Mat<Index>;

// balanced_packing's result, both [X, n]: item i of row x goes to pack pack_index(x, i) at position
// rank_in_pack(x, i) (the order in which the greedy filled that pack).
struct Packing {
  IndexMat pack_index;
  IndexMat rank_in_pack;
};

// replicate_experts' and the rebalance policies' result (eplb.py returns the same triple):
// phy2log [X, num_phy], rank [X, num_phy] (replica rank of each slot), logcnt [X, num_log].
struct Replication {
  IndexMat phy2log;
  IndexMat rank;
  IndexMat logcnt;
};

namespace detail {

// Weights are token counts (or any load): finite and >= 0; at least one layer and one item.
template <class T>
void require_weights(const Mat<T>& w, const char* fn) {
  require(w.rows() >= 1, "eplb: {}: weight.rows (num_layers) = {} violates num_layers >= 1", fn, w.rows());
  require(w.cols() >= 1, "eplb: {}: weight.cols = {} violates weight.cols >= 1", fn, w.cols());
  for (Index i = 0; i < w.rows(); ++i)
    for (Index j = 0; j < w.cols(); ++j) {
      const double v = static_cast<double>(w(i, j));
      require(std::isfinite(v) && v >= 0, "eplb: {}: weight({}, {}) = {} violates weight finite and >= 0", fn, i, j,
              v);
    }
}

// eplb.py's weight.float(): the loads as float32, refusing values float32 cannot hold (a weight or a
// layer's total above FLT_MAX would become inf inside a group or pack sum).
inline Mat<float> to_float32_weights(const Mat<double>& w, const char* what = "weight") {
  require_weights(w, "to_float32_weights");
  const double fmax = static_cast<double>(std::numeric_limits<float>::max());
  for (Index i = 0; i < w.rows(); ++i) {
    double row = 0;
    for (Index j = 0; j < w.cols(); ++j) {
      require(w(i, j) <= fmax, "eplb: {}[{}][{}] = {} violates weight <= {:.8g} (eplb.py computes in float32)", what, i,
              j, w(i, j), fmax);
      row += w(i, j);
    }
    require(row <= fmax, "eplb: {} row {} sums to {} violates sum <= {:.8g} (eplb.py's float32 group and pack sums)",
            what, i, row, fmax);
  }
  return w.cast<float>();
}

inline void require_positive(const char* fn, const char* name, Index v) {
  require(v >= 1, "eplb: {}: {} = {} violates {} >= 1", fn, name, v, name);
}

inline void require_divisible(const char* fn, const char* name, Index v, const char* by_name, Index by) {
  require(v % by == 0, "eplb: {}: {} = {} violates {} % {} == 0 ({} = {})", fn, name, v, name, by_name, by_name, by);
}

// Item indices of one row in descending weight order; std::stable_sort keeps equal weights in
// ascending index order (eplb.py: weight.sort(-1, descending=True), which is not stable).
template <class T>
std::vector<Index> descending_order(const T* row, Index n) {
  std::vector<Index> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), Index{0});
  std::stable_sort(idx.begin(), idx.end(), [row](Index a, Index b) { return row[a] > row[b]; });
  return idx;
}

// Threads only pay when a call does milliseconds of work: at DeepSeek-V3 scale one rebalance is about
// a millisecond in all, and a parallel region on a busy machine can cost more than that (a descheduled
// thread stalls the barrier), so smaller calls run on one thread. Rows are independent either way, so
// the result never depends on the thread count.
inline constexpr double kParallelWork = 1 << 22;

// Row-wise inverse of a permutation matrix (eplb.py's inverse(): inv[x, perm[x, i]] = i). The maps
// come from the packing rung; one that is not a permutation (a bug in a lab's balanced_packing, say)
// is reported as ladder::Error instead of being used as an index.
inline IndexMat inverse_rows(const IndexMat& perm) {
  IndexMat inv = IndexMat::Constant(perm.rows(), perm.cols(), -1);
  for (Index x = 0; x < perm.rows(); ++x)
    for (Index i = 0; i < perm.cols(); ++i) {
      const Index v = perm(x, i);
      require(v >= 0 && v < perm.cols() && inv(x, v) < 0,
              "eplb: packing map row {} is not a permutation of 0..{} (entry {} = {}): check balanced_packing",
              x, perm.cols() - 1, i, v);
      inv(x, v) = i;
    }
  return inv;
}

}  // namespace detail

// Rung 1 -- balanced_packing(weight [X, n], num_packs) -> Packing.
// Pack n weighted items into num_packs packs of exactly n / num_packs items each, greedily: items in
// descending weight order, each to the currently lightest pack that still has room (ties: lowest pack
// id, as Python's min() over pack ids). With one item per pack the result is the identity.
template <class T>
LADDER_LAB_ENTRY Packing balanced_packing(const Mat<T>& weight, Index num_packs) {
  const char* fn = "balanced_packing";
  detail::require_weights(weight, fn);
  detail::require_positive(fn, "num_packs", num_packs);
  const Index X = weight.rows(), n = weight.cols();
  detail::require_divisible(fn, "weight.cols", n, "num_packs", num_packs);
  const Index per_pack = n / num_packs;

  Packing out{IndexMat(X, n), IndexMat(X, n)};
  if (per_pack == 1) {  // eplb.py's shortcut: pack i holds item i
    for (Index x = 0; x < X; ++x)
      for (Index i = 0; i < n; ++i) out.pack_index(x, i) = i, out.rank_in_pack(x, i) = 0;
    return out;
  }
  const bool parallel = static_cast<double>(X) * static_cast<double>(n) * static_cast<double>(num_packs) >=
                        detail::kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (Index x = 0; x < X; ++x) {  // rows are independent: any thread count gives the same result
    // TODO(lab: balanced_packing): the greedy above, row x: set out.pack_index(x, i) and out.rank_in_pack(x, i).
  }
  return out;
}

// Rung 2 -- replicate_experts(weight [X, num_log], num_phy) -> Replication.
// Slots 0..num_log-1 hold experts 0..num_log-1 (rank 0); each further slot goes to the expert with the
// largest load per replica, argmax_e weight[e] / logcnt[e] (ties: lowest id). This greedy minimises
// max_e weight[e] / logcnt[e] over all logcnt >= 1 with sum num_phy (tests check it by brute force).
template <class T>
LADDER_LAB_ENTRY Replication replicate_experts(const Mat<T>& weight, Index num_phy) {
  const char* fn = "replicate_experts";
  detail::require_weights(weight, fn);
  const Index X = weight.rows(), num_log = weight.cols();
  require(num_phy >= num_log, "eplb: {}: num_phy = {} violates num_phy >= num_log (num_log = {})", fn, num_phy,
          num_log);

  Replication out{IndexMat(X, num_phy), IndexMat::Zero(X, num_phy), IndexMat::Ones(X, num_log)};
  const bool parallel = static_cast<double>(X) * static_cast<double>(num_phy - num_log) *
                            static_cast<double>(num_log) >= detail::kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (Index x = 0; x < X; ++x) {
    // TODO(lab: replicate_experts): the greedy above, row x: set out.phy2log, out.rank and out.logcnt of row x.
  }
  return out;
}

// The intermediates of rebalance_experts_hierarchical, under eplb.py's names (the code reading
// prints tokens_per_group, tokens_per_phy and pphy2phy for its worked example; the chapter walks them).
// Rows of the per-node matrices are l * num_nodes + node.
template <class T>
struct HierarchicalTrace {
  Mat<T> tokens_per_group;  // [L, num_groups]                step 1 input
  Packing group_pack;       // [L, num_groups]                group -> node, rank within node
  IndexMat log2mlog;        // [L, num_log]                   logical id -> node-major id
  Mat<T> tokens_per_mlog;   // [L * num_nodes, num_log / N]    step 2 input
  Replication node_rep;     // phy2mlog, phyrank, mlogcnt      step 2 output
  Mat<T> tokens_per_phy;    // [L * num_nodes, R / N]          step 3 input
  IndexMat pphy2phy;        // [L * num_nodes, R / N]          slot within node -> replica
};

// Rung 3 -- rebalance_experts_hierarchical(weight [L, num_log], num_physical, num_groups, num_nodes,
// num_gpus) -> Replication with phy2log [L, num_physical], rank (phyrank), logcnt [L, num_log].
//   Step 1: sum each group's load; balanced_packing puts num_groups / num_nodes groups on each node.
//   Step 2: per node, replicate_experts spreads the node's num_physical / num_nodes slots over the
//           node's experts (a group's replicas therefore never leave its node).
//   Step 3: per node, balanced_packing puts the replicas, each carrying weight / logcnt, on the node's
//           GPUs, num_physical / num_gpus per GPU.
// Internally experts are renumbered node by node ("mlog" = middle logical id, eplb.py's naming):
// node k owns mlog ids [k * num_log / num_nodes, (k + 1) * num_log / num_nodes).
// Pass `trace` to receive the intermediates.
template <class T>
Replication rebalance_experts_hierarchical(const Mat<T>& weight, Index num_physical, Index num_groups,
                                           Index num_nodes, Index num_gpus, HierarchicalTrace<T>* trace = nullptr) {
  const char* fn = "rebalance_experts_hierarchical";
  detail::require_weights(weight, fn);
  detail::require_positive(fn, "num_physical", num_physical);
  detail::require_positive(fn, "num_groups", num_groups);
  detail::require_positive(fn, "num_nodes", num_nodes);
  detail::require_positive(fn, "num_gpus", num_gpus);
  const Index L = weight.rows(), num_log = weight.cols();
  detail::require_divisible(fn, "num_log", num_log, "num_groups", num_groups);
  detail::require_divisible(fn, "num_groups", num_groups, "num_nodes", num_nodes);
  detail::require_divisible(fn, "num_gpus", num_gpus, "num_nodes", num_nodes);
  detail::require_divisible(fn, "num_physical", num_physical, "num_gpus", num_gpus);
  require(num_physical >= num_log, "eplb: {}: num_physical = {} violates num_physical >= num_log (num_log = {})", fn,
          num_physical, num_log);

  const Index group_size = num_log / num_groups, groups_per_node = num_groups / num_nodes;
  const Index log_per_node = num_log / num_nodes, phy_per_node = num_physical / num_nodes;
  const Index gpus_per_node = num_gpus / num_nodes, phy_per_gpu = num_physical / num_gpus;

  // Step 1: tokens_per_group [L, num_groups], packed onto nodes.
  Mat<T> tokens_per_group = Mat<T>::Zero(L, num_groups);
  for (Index l = 0; l < L; ++l)
    for (Index g = 0; g < num_groups; ++g)
      for (Index k = 0; k < group_size; ++k) tokens_per_group(l, g) += weight(l, g * group_size + k);
  const Packing group_pack = balanced_packing(tokens_per_group, num_nodes);

  // Group g sits on node pack_index at position rank_in_pack, so its k-th expert gets
  // mlog = (node * groups_per_node + rank_in_pack) * group_size + k.
  IndexMat log2mlog(L, num_log);
  for (Index l = 0; l < L; ++l)
    for (Index g = 0; g < num_groups; ++g)
      for (Index k = 0; k < group_size; ++k)
        log2mlog(l, g * group_size + k) =
            (group_pack.pack_index(l, g) * groups_per_node + group_pack.rank_in_pack(l, g)) * group_size + k;
  const IndexMat mlog2log = detail::inverse_rows(log2mlog);

  // Step 2: tokens_per_mlog [L * num_nodes, log_per_node]; row l * num_nodes + k is node k of layer l.
  Mat<T> tokens_per_mlog(L * num_nodes, log_per_node);
  for (Index l = 0; l < L; ++l)
    for (Index m = 0; m < num_log; ++m)
      tokens_per_mlog(l * num_nodes + m / log_per_node, m % log_per_node) = weight(l, mlog2log(l, m));
  const Replication node_rep = replicate_experts(tokens_per_mlog, phy_per_node);

  // Step 3: tokens_per_phy [L * num_nodes, phy_per_node] = load of each replica, packed onto GPUs.
  Mat<T> tokens_per_phy(L * num_nodes, phy_per_node);
  for (Index r = 0; r < L * num_nodes; ++r)
    for (Index p = 0; p < phy_per_node; ++p) {
      const Index m = node_rep.phy2log(r, p);
      require(m >= 0 && m < log_per_node, "eplb: replicate_experts put expert {} in slot {} of row {} (valid: 0..{})",
              m, p, r, log_per_node - 1);
      tokens_per_phy(r, p) = tokens_per_mlog(r, m) / static_cast<T>(node_rep.logcnt(r, m));
    }
  const Packing gpu_pack = balanced_packing(tokens_per_phy, gpus_per_node);
  IndexMat phy2pphy(L * num_nodes, phy_per_node);  // replica p -> its slot within the node
  for (Index r = 0; r < L * num_nodes; ++r)
    for (Index p = 0; p < phy_per_node; ++p)
      phy2pphy(r, p) = gpu_pack.pack_index(r, p) * phy_per_gpu + gpu_pack.rank_in_pack(r, p);
  const IndexMat pphy2phy = detail::inverse_rows(phy2pphy);

  // Back to logical ids and global slot numbers.
  Replication out{IndexMat(L, num_physical), IndexMat(L, num_physical), IndexMat(L, num_log)};
  for (Index l = 0; l < L; ++l)
    for (Index k = 0; k < num_nodes; ++k) {
      const Index r = l * num_nodes + k;
      for (Index q = 0; q < phy_per_node; ++q) {
        const Index p = pphy2phy(r, q);
        out.phy2log(l, k * phy_per_node + q) = mlog2log(l, k * log_per_node + node_rep.phy2log(r, p));
        out.rank(l, k * phy_per_node + q) = node_rep.rank(r, p);
      }
    }
  for (Index l = 0; l < L; ++l)
    for (Index e = 0; e < num_log; ++e) {
      const Index m = log2mlog(l, e);
      out.logcnt(l, e) = node_rep.logcnt(l * num_nodes + m / log_per_node, m % log_per_node);
    }
  if (trace) *trace = {tokens_per_group, group_pack, log2mlog, tokens_per_mlog, node_rep, tokens_per_phy, pphy2phy};
  return out;
}

// Rung 4 -- the global policy: replicate over all experts regardless of groups, pack onto all GPUs.
// As in the current eplb.py (since commit e1100fe; before it, the global policy was replicate_experts
// alone, with no packing step) this is the hierarchical policy with one group and one node.
template <class T>
Replication rebalance_experts_global(const Mat<T>& weight, Index num_physical, Index num_gpus) {
  const char* fn = "rebalance_experts_global";
  detail::require_weights(weight, fn);
  detail::require_positive(fn, "num_physical", num_physical);
  detail::require_positive(fn, "num_gpus", num_gpus);
  detail::require_divisible(fn, "num_physical", num_physical, "num_gpus", num_gpus);
  require(num_physical >= weight.cols(),
          "eplb: {}: num_physical = {} violates num_physical >= num_log (num_log = {})", fn, num_physical,
          weight.cols());
  return rebalance_experts_hierarchical(weight, num_physical, 1, 1, num_gpus);
}

}  // namespace ladder::eplb
