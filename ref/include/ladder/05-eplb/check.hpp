// ladder/05-eplb/check.hpp -- stage 05: the invariants every EPLB placement must satisfy.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: invariants
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// An oracle for placements made by other balancers too (they need not match ours slot for slot, but
// they must be valid): the tests apply it to random and tie-heavy inputs and to deliberately
// corrupted maps, which it must reject. Returns the list of violations, each line starting with the
// name of the invariant it breaks (kInvariants below); empty means valid.
//
// Which invariants a published policy promises (DeepSeek's EPLB README, "The Algorithm"):
//  * both policies: every map consistent, every logical expert replicated at least once, the same
//    number of slots on every GPU (eplb.py's num_replicas % num_gpus == 0);
//  * hierarchical (used when the node count divides the group count; the README: prefill, smaller EP):
//    expert groups are packed onto nodes evenly and replicated within their node, so each group's
//    replicas stay on one node and every node holds num_groups / num_nodes whole groups;
//  * global (otherwise; the README: decode, larger EP): replicas made regardless of groups and packed
//    onto GPUs, so nothing about groups or nodes.
//  * Neither promises distinct experts per GPU: the packing of replicas onto GPUs looks at loads only,
//    and deepseek-ai/EPLB issue #22 shows eplb.py putting two replicas of one hot expert on one rank
//    (pull requests #27 and #28 propose to prevent it; both open). A balancer that does promise it is
//    judged with CheckOptions::distinct_per_gpu (the case param distinct_per_gpu = true).
#pragma once
#include <fmt/format.h>

#include <string>
#include <vector>

#include "ladder/05-eplb/views.hpp"

namespace ladder::eplb {

// The invariants by name, as each violation line starts; `promised_by`: the policies that promise it.
struct Invariant {
  const char* name;
  const char* statement;
  const char* promised_by;
};
inline constexpr Invariant kInvariants[] = {
    {"shapes", "phy2log, phyrank [L, R]; logcnt [L, num_log]; log2phy [L, num_log, max(logcnt)]", "both"},
    {"equal_slots_per_gpu", "R % num_gpus == 0 and num_gpus % num_nodes == 0", "both"},
    {"phy2log_in_range", "0 <= phy2log < num_log", "both"},
    {"every_expert_placed", "logcnt >= 1: every logical expert has a replica", "both"},
    {"logcnt_counts_slots", "logcnt[e] = number of slots holding e (so sum logcnt = R)", "both"},
    {"replica_ranks", "the replicas of e have ranks 0 .. logcnt[e]-1, each once", "both"},
    {"log2phy_inverse", "log2phy[phy2log[s]][phyrank[s]] == s", "both"},
    {"log2phy_padding", "log2phy == -1 beyond logcnt", "both"},
    {"group_on_one_node", "every replica of a group's experts on one node", "hierarchical"},
    {"whole_groups_per_node", "num_groups / num_nodes whole groups on every node", "hierarchical"},
    {"distinct_per_gpu", "no GPU holds two replicas of one logical expert", "neither (eplb.py: issue #22); opt-in"},
};

// What the caller's balancer promises beyond its policy's invariants.
struct CheckOptions {
  bool distinct_per_gpu = false;  // no two replicas of one logical expert on one GPU
};

namespace detail {
struct Violations {
  std::vector<std::string> list;
  size_t limit = 20;  // enough to diagnose; a wholly wrong map would otherwise print thousands
  template <class... A>
  void add(fmt::format_string<A...> f, A&&... a) {
    if (list.size() < limit) list.push_back(fmt::format(f, std::forward<A>(a)...));
  }
};
}  // namespace detail

// Checks, for a placement meant for num_layers x num_log experts:
//  * shapes: phy2log, phyrank [L, R]; logcnt [L, num_log]; log2phy [L, num_log, max(logcnt)];
//  * equal slots per GPU: R % num_gpus == 0 and num_gpus % num_nodes == 0;
//  * phy2log values in [0, num_log); logcnt[l][e] = number of slots holding e, and >= 1 (every
//    logical expert has a replica);
//  * replica ranks of each expert are exactly 0 .. logcnt-1, and log2phy is their inverse, -1 padded;
//  * hierarchical policy: each group's replicas all live on one node, and every node holds
//    num_groups / num_nodes whole groups;
//  * opt.distinct_per_gpu: no GPU holds two replicas of one logical expert.
inline std::vector<std::string> check_placement(const Placement& p, Index num_layers, Index num_log,
                                                const CheckOptions& opt = {}) {
  detail::Violations v;
  const Index L = num_layers, R = p.phy2log.cols();
  if (p.phy2log.rows() != L || p.phyrank.rows() != L || p.phyrank.cols() != R)
    v.add("shapes: phy2log [{}, {}] / phyrank [{}, {}] violate shape [num_layers = {}, R]", p.phy2log.rows(), R,
          p.phyrank.rows(), p.phyrank.cols(), L);
  if (p.logcnt.rows() != L || p.logcnt.cols() != num_log)
    v.add("shapes: logcnt [{}, {}] violates shape [num_layers, num_log] = [{}, {}]", p.logcnt.rows(), p.logcnt.cols(), L,
          num_log);
  if (p.num_gpus < 1 || p.num_nodes < 1 || R % p.num_gpus != 0 || p.num_gpus % p.num_nodes != 0)
    v.add("equal_slots_per_gpu: R = {}, num_gpus = {}, num_nodes = {} violate equal slots per GPU and GPUs per node", R, p.num_gpus,
          p.num_nodes);
  if (!v.list.empty()) return v.list;  // the checks below index with these shapes

  for (Index l = 0; l < L; ++l)
    for (Index s = 0; s < R; ++s)
      if (p.phy2log(l, s) < 0 || p.phy2log(l, s) >= num_log)
        v.add("phy2log_in_range: phy2log[{}][{}] = {} violates 0 <= phy2log < num_log = {}", l, s, p.phy2log(l, s), num_log);
  if (!v.list.empty()) return v.list;

  const Index max_cnt = p.logcnt.maxCoeff();
  const bool log2phy_ok = p.log2phy.shape == Shape{L, num_log, max_cnt};
  if (!log2phy_ok)
    v.add("shapes: log2phy {} violates shape [num_layers, num_log, max(logcnt)] = [{}, {}, {}]", shape_str(p.log2phy.shape),
          L, num_log, max_cnt);
  for (Index l = 0; l < L; ++l) {
    IndexMat count = IndexMat::Zero(1, num_log);
    for (Index s = 0; s < R; ++s) ++count(0, p.phy2log(l, s));
    for (Index e = 0; e < num_log; ++e) {
      if (p.logcnt(l, e) < 1) v.add("every_expert_placed: logcnt[{}][{}] = {} violates logcnt >= 1 (every expert has a replica)", l, e,
                                    p.logcnt(l, e));
      if (count(0, e) != p.logcnt(l, e))
        v.add("logcnt_counts_slots: logcnt[{}][{}] = {} but phy2log holds expert {} in {} slots", l, e, p.logcnt(l, e), e, count(0, e));
    }
    // Ranks: slot s is replica phyrank[l][s] of its expert; each (expert, rank) pair exactly once.
    // Ranks are checked against the true replica count, so a corrupted logcnt cannot make us index
    // out of range.
    std::vector<Index> seen(static_cast<size_t>(num_log * R), -1);
    for (Index s = 0; s < R; ++s) {
      const Index e = p.phy2log(l, s), k = p.phyrank(l, s);
      if (k < 0 || k >= count(0, e)) {
        v.add("replica_ranks: phyrank[{}][{}] = {} violates 0 <= phyrank < replicas of expert {} = {}", l, s, k, e, count(0, e));
        continue;
      }
      Index& first = seen[static_cast<size_t>(e * R + k)];
      if (first >= 0) v.add("replica_ranks: layer {}: slots {} and {} are both replica {} of expert {}", l, first, s, k, e);
      first = s;
      if (log2phy_ok && k < max_cnt && p.log2phy.data[static_cast<size_t>((l * num_log + e) * max_cnt + k)] != s)
        v.add("log2phy_inverse: log2phy[{}][{}][{}] = {} violates log2phy[phy2log[s]][phyrank[s]] == s = {}", l, e, k,
              p.log2phy.data[static_cast<size_t>((l * num_log + e) * max_cnt + k)], s);
    }
    if (log2phy_ok)
      for (Index e = 0; e < num_log; ++e)
        for (Index k = std::max<Index>(p.logcnt(l, e), 0); k < max_cnt; ++k)
          if (p.log2phy.data[static_cast<size_t>((l * num_log + e) * max_cnt + k)] != -1)
            v.add("log2phy_padding: log2phy[{}][{}][{}] = {} violates padding == -1 beyond logcnt = {}", l, e, k,
                  p.log2phy.data[static_cast<size_t>((l * num_log + e) * max_cnt + k)], p.logcnt(l, e));
  }

  if (opt.distinct_per_gpu) {
    const Index per_gpu = R / p.num_gpus;
    for (Index l = 0; l < L; ++l)
      for (Index g = 0; g < p.num_gpus; ++g)
        for (Index a = g * per_gpu; a < (g + 1) * per_gpu; ++a)
          for (Index b = a + 1; b < (g + 1) * per_gpu; ++b)
            if (p.phy2log(l, a) == p.phy2log(l, b))
              v.add("distinct_per_gpu: layer {}: GPU {} holds expert {} in slots {} and {}", l, g, p.phy2log(l, a), a, b);
  }

  if (p.policy == Policy::hierarchical) {
    if (p.num_groups < 1 || num_log % p.num_groups != 0 || p.num_groups % p.num_nodes != 0) {
      v.add("group_on_one_node: num_groups = {} violates num_log % num_groups == 0 and num_groups % num_nodes == 0", p.num_groups);
      return v.list;
    }
    const IndexMat nodes = group_nodes(p, p.num_groups);
    for (Index l = 0; l < L; ++l) {
      IndexMat per_node = IndexMat::Zero(1, p.num_nodes);
      for (Index g = 0; g < p.num_groups; ++g) {
        if (nodes(l, g) < 0)
          v.add("group_on_one_node: layer {}: group {} spans nodes (hierarchical policy keeps a group on one node)", l, g);
        else
          ++per_node(0, nodes(l, g));
      }
      for (Index k = 0; k < p.num_nodes; ++k)
        if (per_node(0, k) != p.num_groups / p.num_nodes)
          v.add("whole_groups_per_node: layer {}: node {} holds {} whole groups, violates num_groups / num_nodes = {}", l, k, per_node(0, k),
                p.num_groups / p.num_nodes);
    }
  }
  return v.list;
}

}  // namespace ladder::eplb
