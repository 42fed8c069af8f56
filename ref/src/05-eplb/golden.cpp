// ref/src/05-eplb/golden.cpp -- stage 05 golden cases (data/golden/05-eplb/<case>/).
//
// Each case is one rung applied to one weight matrix: weight.npy (float64 token counts, integers so
// every division and comparison is exact) and the rung's outputs (int64, names as in eplb::Outputs),
// computed through the registry entry of that rung. Comparison is exact: EPLB maps are integers, and
// ties are specified (stable sort, lowest index wins; ladder/05-eplb/algorithm.hpp).
#include <map>

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "ladder/05-eplb/golden_cases.hpp"

namespace ladder::eplb {
namespace {

struct CaseSpec {
  const char* rung;
  Config cfg;  // num_replicas, num_groups, num_nodes, num_gpus, num_packs
  Index layers, experts;
  uint64_t seed;
  const char* what;
};

// Shapes are awkward on purpose (13, 15, 30, 97 experts; 3 nodes; 18 nodes), every case has ties,
// and the generated ones include a layer with no load and a layer where one expert has all of it.
const std::map<std::string, CaseSpec>& specs() {
  static const std::map<std::string, CaseSpec> s = {
      {"readme_hierarchical",
       {"hierarchical", {16, 4, 2, 8, 1}, 2, 12, 0, "the EPLB README example: 16 replicas, 4 groups, 2 nodes, 8 GPUs"}},
      {"readme_global",
       {"global", {16, 3, 2, 8, 1}, 2, 12, 0, "the README weights with 3 groups on 2 nodes -> global policy"}},
      {"packing_ties",
       {"balanced_packing", {0, 1, 1, 1, 5}, 4, 15, 501,
        "15 items into 5 packs: all equal; one heavy item among zeros; values in {0, 1, 2}; Zipf counts"}},
      {"replicate_zipf",
       {"replicate_experts", {29, 1, 1, 1, 1}, 3, 13, 502,
        "13 experts to 29 replicas: Zipf(s = 1) counts; all zero; one expert with all tokens"}},
      {"hierarchical_awkward",
       {"hierarchical", {42, 6, 3, 6, 1}, 3, 30, 503,
        "30 experts in 6 groups, 3 nodes, 6 GPUs, 42 replicas: Zipf; all zero; one expert with all tokens"}},
      {"global_awkward",
       {"global", {104, 1, 2, 8, 1}, 3, 97, 504,
        "97 experts to 104 replicas on 8 GPUs: Zipf; all zero; one expert with all tokens"}},
      {"v3_prefill",
       {"hierarchical", {288, 8, 4, 32, 1}, 4, 256, 505,
        "DeepSeek-V3 prefill shape (4 of its 58 layers): 256 experts, 8 groups, 4 nodes x 8 GPUs, 288 slots"}},
      {"v3_decode",
       {"global", {288, 8, 18, 144, 1}, 4, 256, 506,
        "DeepSeek-V3 decode shape (4 of its 58 layers): 256 experts, 18 nodes x 8 GPUs, 288 slots (2 per GPU)"}},
  };
  return s;
}

const CaseSpec& spec(const std::string& name) {
  auto it = specs().find(name);
  require(it != specs().end(), "05-eplb: no golden case '{}'", name);
  return it->second;
}

Mat<double> readme_weight() {
  Mat<double> w(2, 12);
  w << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
      20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27;
  return w;
}

// Generated weights: Zipf(s = 1) token counts (8 routed slots for each of 512 tokens per layer, or 4096
// tokens at V3 shape), then the special layers described in the case table.
Mat<double> case_weight(const std::string& name, const CaseSpec& c) {
  if (name.rfind("readme_", 0) == 0) return readme_weight();
  Rng rng(c.seed);
  const bool v3 = name.rfind("v3_", 0) == 0;
  Mat<double> w = zipf_loads(rng, c.layers, c.experts, (v3 ? 4096 : 512) * 8, 1.0);
  if (name == "packing_ties") {
    w.row(0).setConstant(7);
    w.row(1).setZero();
    w(1, 9) = 1000;
    for (Index j = 0; j < c.experts; ++j) w(2, j) = static_cast<double>(rng.uniform_int(3));
  } else if (!v3) {
    w.row(1).setZero();
    w.row(2).setZero();
    w(2, c.experts / 4) = 4096;
  }
  return w;
}

}  // namespace

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : specs()) n.push_back(k);
  return n;
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir) {
  const CaseSpec& c = spec(name);
  const Mat<double> weight = case_weight(name, c);
  Registry reg;
  register_eplb(reg);
  const Outputs outs = reg.find(kStage, "ref", c.rung).fn<RungFn>()(weight, c.cfg);

  std::filesystem::create_directories(dir);
  save_npy(dir / "weight.npy", Array<double>::from(weight));
  nlohmann::json shapes = {{"weight", Shape{weight.rows(), weight.cols()}}};
  nlohmann::json dtypes = {{"weight", "<f8"}};
  nlohmann::json files = {"weight.npy"}, outputs = nlohmann::json::array();
  for (const auto& [out_name, arr] : outs) {
    save_npy(dir / (out_name + ".npy"), arr);
    shapes[out_name] = arr.shape;
    dtypes[out_name] = "<i8";
    files.push_back(out_name + ".npy");
    outputs.push_back(out_name);
  }
  nlohmann::json j = case_manifest(kStage, {c.rung}, c.seed, shapes, dtypes, rules_json(contract(kStage), shapes));
  j["case"] = name;
  j["description"] = c.what;
  j["params"] = {{"num_replicas", c.cfg.num_replicas}, {"num_groups", c.cfg.num_groups},
                 {"num_nodes", c.cfg.num_nodes},       {"num_gpus", c.cfg.num_gpus},
                 {"num_packs", c.cfg.num_packs},       {"rung", c.rung}};
  j["inputs"] = {"weight"};
  j["outputs"] = outputs;
  j["files"] = files;
  j["tie_breaking"] = "stable sort by descending weight (ties: lowest index first); argmax and lightest pack: "
                      "lowest id";
  j["input"] = name.rfind("readme_", 0) == 0
                   ? "the EPLB README example weights"
                   : "Zipf(s = 1) token counts from ladder::Rng(seed) via eplb::zipf_loads (ref/src/05-eplb/golden.cpp)";
  write_json(dir / "case.json", j);
  seal_case(dir);  // digest of every file: `ladder check` refuses a changed folder
}

}  // namespace ladder::eplb
