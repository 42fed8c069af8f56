// ref/src/05-eplb/registry.cpp -- registers the four stage-05 EPLB rungs (ladder/05-eplb/eplb.hpp).
//
// Every rung stores an eplb::RungFn (ladder/05-eplb/rungs.hpp: weight [L, n] fp64, Config -> named int64
// outputs; the arithmetic inside is eplb.py's float32), so the tests, the golden writer and the CLI run
// all rungs through this table.
//
// Costs: EPLB moves indices, not tensors, so flops are the few divisions and additions the greedy
// performs and bytes are the fp64 weights read plus the int64 maps written. The -1 padding of log2phy
// (L * n * max_cnt entries, max_cnt data-dependent) is not in the formula: only its R real entries per
// layer are. Comparisons (argmax, lightest pack) are not counted as flops.
#include "ladder/05-eplb/eplb.hpp"
#include "ladder/05-eplb/rungs.hpp"

namespace ladder {
namespace {

double dim(const Shape& s, size_t i, const char* rung, const char* layout) {
  require(s.size() > i, "eplb: cost of {}: shape {} violates shape == {}", rung, shape_str(s), layout);
  return static_cast<double>(s[i]);
}

Cost packing_cost(const Shape& s) {
  const char* layout = "{L, n, num_packs}";
  const double L = dim(s, 0, "balanced_packing", layout), n = dim(s, 1, "balanced_packing", layout);
  const double packs = dim(s, 2, "balanced_packing", layout);
  return Cost{L * n, 8 * L * n, 16 * L * n, 8 * (n + 2 * packs)};
}

Cost replicate_cost(const Shape& s) {
  const char* layout = "{L, n, R}";
  const double L = dim(s, 0, "replicate_experts", layout), n = dim(s, 1, "replicate_experts", layout);
  const double R = dim(s, 2, "replicate_experts", layout);
  return Cost{L * (R - n) * n, 8 * L * n, 8 * (2 * L * R + L * n), 0};
}

// Hierarchical: group sums (L n), node packing (L G), replication inside nodes (L (R - n) n / N),
// replica loads and GPU packing (2 L R). Scratch: the intermediate maps of
// rebalance_experts_hierarchical (tokens_per_group, log2mlog, mlog2log, tokens_per_mlog, mlogcnt:
// L G + 4 L n; phy2mlog, phyrank, tokens_per_phy, pack_index, rank_in_pack, phy2pphy, pphy2phy and
// the output phyrank: 8 L R), all 8 bytes.
Cost hierarchical_cost(const Shape& s) {
  const char* rung = "rebalance_experts_hierarchical";
  const char* layout = "{L, n, R, num_groups, num_nodes}";
  const double L = dim(s, 0, rung, layout), n = dim(s, 1, rung, layout), R = dim(s, 2, rung, layout);
  const double G = dim(s, 3, rung, layout), N = dim(s, 4, rung, layout);
  return Cost{L * n + L * G + L * (R - n) * n / N + 2 * L * R, 8 * L * n, 8 * (2 * L * R + L * n),
              8 * (L * G + 4 * L * n + 8 * L * R)};
}

Cost global_cost(const Shape& s) {
  const char* rung = "rebalance_experts_global";
  const char* layout = "{L, n, R}";
  const auto L = static_cast<int64_t>(dim(s, 0, rung, layout)), n = static_cast<int64_t>(dim(s, 1, rung, layout));
  return hierarchical_cost({L, n, static_cast<int64_t>(dim(s, 2, rung, layout)), 1, 1});
}

Rung make_rung(std::string id, std::string name, std::string doc, eplb::RungFn fn,
               std::function<Cost(const Shape&)> cost, std::string cost_doc) {
  Rung r;
  r.stage = eplb::kStage;
  r.id = std::move(id);
  r.name = std::move(name);
  r.doc = std::move(doc);
  r.backend = "ref";
  r.function = std::move(fn);
  r.cost = std::move(cost);
  r.cost_doc = std::move(cost_doc);
  return r;
}

}  // namespace

void register_eplb(Registry& r) {
  r.add(make_rung("balanced_packing", "balanced packing (eplb.py balanced_packing)",
                  "greedy: heaviest item first to the lightest pack with room; n / num_packs items per pack",
                  &eplb::rungs::balanced_packing, packing_cost,
                  "shape {L, n, num_packs}: flops L n; read 8 L n; written 16 L n (pack_index, rank_in_pack)"));
  r.add(make_rung("replicate_experts", "replicate experts (eplb.py replicate_experts)",
                  "each extra slot to argmax weight / logcnt; minimises the max load per replica", &eplb::rungs::replicate_experts,
                  replicate_cost,
                  "shape {L, n, R}: flops L (R - n) n; read 8 L n; written 8 (2 L R + L n) (phy2log, rank, logcnt)"));
  r.add(make_rung("hierarchical", "hierarchical policy (eplb.py rebalance_experts_hierarchical)",
                  "groups -> nodes by packing, replicate within each node, replicas -> GPUs by packing",
                  &eplb::rungs::hierarchical, hierarchical_cost,
                  "shape {L, n, R, G, N}: flops L n + L G + L (R - n) n / N + 2 L R; read 8 L n; "
                  "written 8 (2 L R + L n) (phy2log, log2phy entries, logcnt)"));
  r.add(make_rung("global", "global policy (eplb.py rebalance_experts, groups = nodes = 1)",
                  "replicate over all experts ignoring groups, then pack replicas onto all GPUs", &eplb::rungs::global,
                  global_cost, "shape {L, n, R}: the hierarchical cost with G = N = 1"));
}

}  // namespace ladder
