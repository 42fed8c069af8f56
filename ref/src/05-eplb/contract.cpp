// ref/src/05-eplb/contract.cpp -- stage 05's case contract (core/contract.hpp), beside its registry.
//
// Default rule: exact equality with eplb.py's answer (people porting eplb.py need it slot for slot).
// Extra rule "valid" judges any balancer: the maps are consistent with each other, every logical
// expert is placed, replica counts sum to the slot count, slots per GPU are equal, the hierarchical
// policy keeps each group on one node with whole groups per node (eplb/check.hpp), and the largest
// GPU and node load is no worse than the reference's by more than the margin (default 5 %).
#include <fmt/format.h>

#include "ladder/core/contract.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "ladder/05-eplb/rungs.hpp"

namespace ladder {
namespace {

using eplb::Index;

constexpr double kDefaultMargin = 0.05;
constexpr Index kMaxSlots = Index{1} << 24;  // L x R x 8 bytes per map: beyond this a typo, not a model

eplb::Config config_of(const nlohmann::json& params) {
  auto get = [&](const char* k, Index fallback) -> Index {
    if (!params.contains(k)) return fallback;
    const auto& v = params.at(k);
    require(v.is_number_integer(), "05-eplb: param {} = {} violates type integer", k, v.dump());
    return v.get<Index>();
  };
  eplb::Config c{get("num_replicas", 0), get("num_groups", 1), get("num_nodes", 1), get("num_gpus", 1),
                 get("num_packs", 1)};
  require(c.num_replicas >= 0 && c.num_replicas <= kMaxSlots, "05-eplb: param num_replicas = {} violates 0 <= num_replicas <= {}",
          c.num_replicas, kMaxSlots);
  return c;
}

std::string rung_of(const nlohmann::json& params, const eplb::Config& c) {
  const nlohmann::json r = params.value("rung", nlohmann::json(""));
  require(r.is_string(), "05-eplb: param rung = {} violates type string", r.dump());
  const std::string s = r.get<std::string>();
  if (!s.empty()) return s;
  return c.num_groups % c.num_nodes == 0 ? "hierarchical" : "global";  // eplb.py's rebalance_experts
}

Mat<double> weight_of(const Tensors& t) {
  const NpyData& d = tensor(t, "weight", eplb::kStage);
  require(d.shape.size() == 2, "05-eplb: input weight has shape {}, violates rank 2 [layers, experts]",
          shape_str(d.shape));
  require(d.shape[0] * d.shape[1] <= kMaxSlots, "05-eplb: input weight has shape {}, violates layers x experts <= {}",
          shape_str(d.shape), kMaxSlots);
  return npy_as_double(d).mat();
}

// The params' constraints in the caller's words (param names, not the rungs' internal ones); the rungs check the
// rest (divisibility by groups and nodes) in their own.
void check_config(const eplb::Config& c, const std::string& rung, Index experts) {
  for (const auto& [name, v] : {std::pair{"num_groups", c.num_groups}, std::pair{"num_nodes", c.num_nodes},
                                std::pair{"num_gpus", c.num_gpus}, std::pair{"num_packs", c.num_packs}})
    require(v >= 1, "05-eplb: param {} = {} violates {} >= 1", name, v, name);
  if (rung != "balanced_packing")
    require(c.num_replicas >= experts, "05-eplb: param num_replicas = {} violates num_replicas >= experts = {} (every "
            "expert needs a slot)", c.num_replicas, experts);
  if (rung == "hierarchical" || rung == "global")
    require(c.num_replicas % c.num_gpus == 0, "05-eplb: param num_replicas = {} violates num_replicas % num_gpus == 0 "
            "(num_gpus = {})", c.num_replicas, c.num_gpus);
}

Tensors oracle(const Tensors& t, const nlohmann::json& params) {
  const eplb::Config c = config_of(params);
  const Mat<double> w = weight_of(t);
  require(static_cast<double>(w.rows()) * static_cast<double>(c.num_replicas) <= kMaxSlots,
          "05-eplb: layers x num_replicas = {} x {} violates <= {}", w.rows(), c.num_replicas, kMaxSlots);
  check_config(c, rung_of(params, c), w.cols());
  Tensors out;
  for (const auto& [name, a] : eplb::rungs::by_id(rung_of(params, c))(w, c)) out[name] = to_npy(a);
  return out;
}

// The case param distinct_per_gpu: the candidate's balancer promises no two replicas of one expert on one GPU
// (eplb.py does not: check.hpp's header).
eplb::CheckOptions options_of(const nlohmann::json& params) {
  eplb::CheckOptions o;
  if (params.contains("distinct_per_gpu")) {
    const auto& v = params.at("distinct_per_gpu");
    require(v.is_boolean(), "05-eplb: param distinct_per_gpu = {} violates type boolean", v.dump());
    o.distinct_per_gpu = v.get<bool>();
  }
  return o;
}

// The candidate's placement (phy2log [L, R]): its own logcnt / log2phy where given beside it, else derived
// from phy2log; `checked` lists the maps that came from the candidate.
eplb::Placement placement_of(const eplb::Config& c, const std::string& rung, Index L, Index n,
                             const Array<int64_t>& cand, const Tensors& companions, std::vector<std::string>& checked) {
  const Index R = cand.shape[1];

  eplb::Placement p;
  p.phy2log = cand.mat();
  p.policy = rung == "hierarchical" ? eplb::Policy::hierarchical : eplb::Policy::global;
  p.num_groups = c.num_groups, p.num_nodes = c.num_nodes, p.num_gpus = c.num_gpus;
  eplb::IndexMat counted = eplb::IndexMat::Zero(L, n);
  p.phyrank = eplb::IndexMat::Zero(L, R);
  for (Index l = 0; l < L; ++l)
    for (Index s = 0; s < R; ++s) {
      const Index e = p.phy2log(l, s);
      if (e >= 0 && e < n) p.phyrank(l, s) = counted(l, e)++;
    }
  p.logcnt = counted;
  if (auto it = companions.find("logcnt"); it != companions.end()) {
    p.logcnt = npy_as_int64(it->second, "logcnt").mat();
    checked.push_back("logcnt");
  }
  if (auto it = companions.find("log2phy"); it != companions.end()) {
    p.log2phy = npy_as_int64(it->second, "log2phy");
    checked.push_back("log2phy");
    // Ranks as the candidate's log2phy states them (slot s is replica k of e iff log2phy[e][k] == s).
    const Shape& s3 = p.log2phy.shape;
    if (s3.size() == 3 && s3[0] == L && s3[1] == n)
      for (Index l = 0; l < L; ++l)
        for (Index e = 0; e < n; ++e)
          for (Index k = 0; k < s3[2]; ++k) {
            const Index s = p.log2phy.data[static_cast<size_t>((l * n + e) * s3[2] + k)];
            if (s >= 0 && s < R) p.phyrank(l, s) = k;
          }
  } else if ((p.phy2log.array() >= 0).all() && (p.phy2log.array() < n).all()) {
    p.log2phy = eplb::make_log2phy(p.phy2log, p.phyrank, counted);
  }
  return p;
}

// Contract::invariants: a policy case's phy2log (with logcnt / log2phy beside it when given) judged by the
// invariants its policy promises (eplb/check.hpp), whatever rule judges its values.
std::vector<std::string> invariants(const Tensors& inputs, const nlohmann::json& params, const std::string& output,
                                    const NpyData& candidate, const Tensors& companions) {
  const eplb::Config c = config_of(params);
  const std::string rung = rung_of(params, c);
  if (output != "phy2log" || (rung != "hierarchical" && rung != "global")) return {};
  const Mat<double> w = weight_of(inputs);
  const Array<int64_t> cand = npy_as_int64(candidate, "candidate");
  if (cand.shape.size() != 2 || cand.shape[0] != w.rows()) return {};  // the rule has named the shape already
  std::vector<std::string> checked;
  return eplb::check_placement(placement_of(c, rung, w.rows(), w.cols(), cand, companions, checked), w.rows(), w.cols(),
                               options_of(params));
}

CheckReport valid_rule(const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                       const std::string& output, const NpyData& candidate, const Tensors& companions) {
  require(output == "phy2log", "check: --rule valid judges a placement: give phy2log as the candidate (--output phy2log)");
  const eplb::Config c = config_of(params);
  const std::string rung = rung_of(params, c);
  require(rung == "hierarchical" || rung == "global", "check: --rule valid needs a policy case, not rung {}", rung);
  const Mat<double> w = weight_of(inputs);
  const Array<int64_t> ref_phy = npy_as_int64(tensor(expected, "phy2log", "05-eplb expected"), "phy2log (expected)");
  const Array<int64_t> cand = npy_as_int64(candidate, "candidate");
  require(cand.shape == ref_phy.shape, "candidate: shape {} where phy2log has shape {}", shape_str(cand.shape),
          shape_str(ref_phy.shape));
  const Index L = w.rows(), n = w.cols();
  std::vector<std::string> checked{"phy2log"};
  const eplb::Placement p = placement_of(c, rung, L, n, cand, companions, checked);
  CheckReport r;
  r.output = "phy2log";
  r.rule = "valid";
  for (const std::string& v : eplb::check_placement(p, L, n, options_of(params))) r.failed.push_back(v);
  std::string text = fmt::format("maps judged: {}\n", fmt::join(checked, ", "));
  const double margin = params.value("valid_margin", kDefaultMargin);
  if (r.failed.empty()) {
    eplb::Placement ref = p;
    ref.phy2log = ref_phy.mat();
    ref.logcnt = npy_as_int64(tensor(expected, "logcnt", "05-eplb expected"), "logcnt (expected)").mat();
    const Mat<double> gc = eplb::gpu_loads(w, p), gr = eplb::gpu_loads(w, ref);
    const Mat<double> nc = eplb::node_loads(gc, c.num_nodes), nr = eplb::node_loads(gr, c.num_nodes);
    for (Index l = 0; l < L; ++l) {
      const double a = gc.row(l).maxCoeff(), b = gr.row(l).maxCoeff();
      const double an = nc.row(l).maxCoeff(), bn = nr.row(l).maxCoeff();
      text += fmt::format("  layer {}: max GPU load {:.6g} (reference {:.6g}), max node load {:.6g} (reference {:.6g})\n",
                          l, a, b, an, bn);
      if (a > b * (1 + margin))
        r.failed.push_back(fmt::format("layer {}: max GPU load {:.6g} exceeds the reference's {:.6g} by more than {}%", l,
                                       a, b, 100 * margin));
      if (an > bn * (1 + margin))
        r.failed.push_back(fmt::format("layer {}: max node load {:.6g} exceeds the reference's {:.6g} by more than {}%",
                                       l, an, bn, 100 * margin));
      r.metrics[fmt::format("max_gpu_load_{}", l)] = a;
      r.metrics[fmt::format("ref_max_gpu_load_{}", l)] = b;
    }
  }
  r.pass = r.failed.empty();
  std::string head = r.pass ? "PASS (valid rule)" : "FAIL (valid rule): " + r.failed.front();
  for (size_t i = 1; i < r.failed.size(); ++i) head += "\n  also: " + r.failed[i];
  r.text = head + "\n  " + text;
  return r;
}

}  // namespace

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_05_eplb() {
  Contract c;
  c.stage = eplb::kStage;
  c.doc = "expert placement (eplb.py): weight -> phy2log, log2phy, logcnt (or one rung's maps)";
  c.inputs = {{"weight", "<f8|<f4|<i8|<i4", "[layers, experts]", "load of each logical expert (tokens), >= 0"}};
  c.params = {{"num_replicas", "int", "physical slots per layer (multiple of num_gpus)"},
              {"num_groups", "int", "expert groups (hierarchical when num_groups % num_nodes == 0)"},
              {"num_nodes", "int", "server nodes"},
              {"num_gpus", "int", "GPUs in all"},
              {"num_packs", "int", "balanced_packing rung only: packs"},
              {"rung", "string", "balanced_packing | replicate_experts | hierarchical | global (default: eplb.py's choice)"},
              {"valid_margin", "number", "--rule valid: allowed excess of the max GPU / node load (default 0.05)"},
              {"distinct_per_gpu", "bool", "the candidate's balancer promises no two replicas of one expert on one GPU "
               "(eplb.py does not: EPLB issue #22); checked with every rule"}};
  const std::string exact = "integer map: exact, ties as eplb.py (float32 arithmetic, stable sort, lowest id wins)";
  c.outputs = {{"phy2log", "<i8", "[layers, num_replicas]", "logical expert of each slot", Rule::exact, 0, exact, false, ""},
               {"log2phy", "<i8", "[layers, experts, max(logcnt)]", "slots of each expert by rank, -1 padded",
                Rule::exact, 0, exact, false, ""},
               {"logcnt", "<i8", "[layers, experts]", "replicas of each expert", Rule::exact, 0, exact, false, ""},
               {"rank", "<i8", "[layers, num_replicas]", "replicate_experts rung: replica rank of each slot",
                Rule::exact, 0, exact, false, ""},
               {"pack_index", "<i8", "[layers, n]", "balanced_packing rung: pack of each item", Rule::exact, 0, exact, false, ""},
               {"rank_in_pack", "<i8", "[layers, n]", "balanced_packing rung: position in its pack", Rule::exact, 0,
                exact, false, ""}};
  c.oracle_doc = "the registry's 05-eplb rung (eplb.py's algorithm in float32) on the weights";
  c.oracle = oracle;
  // A rung by id: the oracle with that rung named (eplb.py's arithmetic is float32 whatever the
  // precision asked for; the maps are integers).
  c.run_rung = [](const Rung& r, const Tensors& t, const nlohmann::json& params, DType) {
    require(r.backend == "ref", "05-eplb: rung {}: its CUDA kernels are the data plane, not rungs", r.key());
    nlohmann::json p = params;
    p["rung"] = r.id;
    return oracle(t, p);
  };
  c.extra_rules["valid"] = valid_rule;
  c.invariants = invariants;
  c.extra_rules_doc =
      "valid (phy2log, with logcnt.npy / log2phy.npy beside it when present): maps consistent, every expert "
      "placed, replica counts sum to the slots, equal slots per GPU, hierarchical group/node constraints, max GPU "
      "and node load no worse than the reference's by more than valid_margin (default 5%). With any rule, a policy "
      "case's phy2log is also held to the invariants its policy promises, each named when broken "
      "(ladder/05-eplb/check.hpp):";
  for (const eplb::Invariant& i : eplb::kInvariants)
    c.extra_rules_doc += fmt::format("\n  {:<22} {} [promised by: {}]", i.name, i.statement, i.promised_by);
  return c;
}

}  // namespace stage_records

}  // namespace ladder
