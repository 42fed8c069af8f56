// ladder/05-eplb/eplb.hpp -- stage 05: the expert-parallel load balancer (EPLB), header-only reference.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this stage
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Source: DeepSeek's eplb.py (deepseek-ai/EPLB) as read in Huiming's notes "DeepSeek Expert
// Parallelism Load Balancer (EPLB) Code Reading"; the chapter is chapters/05-eplb/README.md. The stage
// is split by concept:
//   eplb/algorithm.hpp  the rungs: balanced_packing, replicate_experts, rebalance_experts_hierarchical,
//                       rebalance_experts_global (stable sort; differences from eplb.py listed there)
//   eplb/rebalance.hpp  rebalance_experts (policy dispatch) -> Placement {phy2log, log2phy, logcnt}
//   eplb/views.hpp      per-GPU / per-node loads, imbalance before and after, group -> node
//   eplb/check.hpp      check_placement: the invariants any valid placement satisfies
//   eplb/synthetic.hpp  seeded Zipf-skewed loads
//   eplb/dispatch.hpp   the data plane EPLB serves: expert load counting, token -> replica mapping
//
// Registry (ref/src/05-eplb/registry.cpp, stage "05-eplb", backend "ref"): every rung stores an
// eplb::RungFn, defined below, so tests, goldens and the CLI call all rungs the same way.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ladder/core/registry.hpp"
#include "ladder/05-eplb/algorithm.hpp"
#include "ladder/05-eplb/check.hpp"
#include "ladder/05-eplb/dispatch.hpp"
#include "ladder/05-eplb/rebalance.hpp"
#include "ladder/05-eplb/synthetic.hpp"
#include "ladder/05-eplb/views.hpp"

namespace ladder::eplb {

inline constexpr const char* kStage = "05-eplb";

// The parameters of every rung; each rung reads the ones it needs:
//   balanced_packing: num_packs;  replicate_experts: num_replicas (= num_phy);
//   hierarchical: num_replicas, num_groups, num_nodes, num_gpus;  global: num_replicas, num_gpus.
struct Config {
  Index num_replicas = 0;
  Index num_groups = 1;
  Index num_nodes = 1;
  Index num_gpus = 1;
  Index num_packs = 1;
};

// Named integer outputs of a rung, in a fixed order (the golden files use these names):
//   balanced_packing  -> pack_index [L, n], rank_in_pack [L, n]
//   replicate_experts -> phy2log [L, R], rank [L, R], logcnt [L, n]
//   hierarchical, global -> phy2log [L, R], log2phy [L, n, max_cnt], logcnt [L, n]  (rebalance_experts' triple)
using Outputs = std::vector<std::pair<std::string, Array<Index>>>;

// Rung::function of every "05-eplb" rung: weight [L, n] (fp64 oracle) and Config -> Outputs.
using RungFn = std::function<Outputs(const Mat<double>& weight, const Config& cfg)>;

// Rung::cost shapes: balanced_packing {L, n, num_packs}; replicate_experts {L, n, R};
// hierarchical {L, n, R, num_nodes}; global {L, n, R}.

}  // namespace ladder::eplb

namespace ladder {
// Registers the four rungs (ref/src/05-eplb/registry.cpp); its Stage record (stage.cpp) names it.
void register_eplb(Registry& r);
}  // namespace ladder
