// ref/src/04-moe/golden.cpp -- stage 04 golden cases (data/golden/04-moe/<case>/).
//
// "model": the weights of a 16-expert model (D = 97, F = 61, one shared expert Fs = 61) as float32;
// the E = 8 cases use its first 8 experts (ladder/04-moe/synthetic.hpp draws each expert from its own
// stream). Every other case: x.npy and bias.npy (float32 inputs), and from the fp64 references on
// those float32 values: topk_idx, topk_weight (gate<double>), group_sizes and sort_idx (the stable
// sort), y (dense_loop<double>, THE ORACLE; for a dropping case restricted to its kept mask), and for
// dropping cases kept (1 kept, 0 dropped). Integer outputs are compared exactly, y by the tolerance
// rule against dense_loop<float> as the baseline (k = 2, floor 4 ulps of float32).
// e8_no_shared: the layer without a shared expert (Fs = 0); the case folder holds zero-width s1, s3
// [D, 0] and s2 [0, D], which read_case takes before the model's.
#include <map>

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/04-moe/golden_cases.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/04-moe/golden.hpp"

namespace ladder::moe {
namespace {

constexpr uint64_t kModelSeed = 4000;

struct CaseSpec {
  Index E, k, n_group, topk_group;
  GateKind gate;
  Index T;
  const char* bias;
  bool dropping;
  double capacity_factor;
  uint64_t seed;
  const char* what;
};

const std::map<std::string, CaseSpec>& specs() {
  using G = GateKind;
  static const std::map<std::string, CaseSpec> s = {
      {"e8_T1", {8, 2, 4, 2, G::v3_sigmoid, 1, "none", false, 2.0, 4101, "E = 8 in 4 groups, k = 2: one token"}},
      {"e8_T7", {8, 2, 4, 2, G::v3_sigmoid, 7, "none", false, 2.0, 4102, "E = 8, k = 2: 7 tokens"}},
      {"e8_T128", {8, 2, 4, 2, G::v3_sigmoid, 128, "none", false, 2.0, 4103, "E = 8, k = 2: 128 tokens"}},
      {"e8_cold_expert", {8, 2, 4, 2, G::v3_sigmoid, 128, "cold:3", false, 2.0, 4104,
                          "expert 3's bias -4: it receives zero tokens (an empty group)"}},
      {"e8_hot_expert", {8, 2, 4, 2, G::v3_sigmoid, 128, "hot:5", false, 2.0, 4105,
                         "expert 5's bias +4: every token goes to it"}},
      {"e8_k_eq_E", {8, 8, 4, 4, G::v3_sigmoid, 7, "none", false, 2.0, 4106, "k = E = 8: every token to every expert"}},
      {"e8_v2_gate", {8, 2, 4, 2, G::v2_softmax, 7, "none", false, 2.0, 4107,
                      "DeepSeek-V2 gate: softmax, group max, no renormalisation"}},
      {"e8_dropping_hot", {8, 2, 4, 2, G::v3_sigmoid, 7, "hot:5", true, 2.0, 4108,
                           "dropping, capacity round(2 * 7 * 2 / 8) = round(3.5) = 4: expert 5 keeps 4 of 7"}},
      {"e16_T1", {16, 4, 4, 2, G::v3_sigmoid, 1, "none", false, 2.0, 4201, "E = 16 in 4 groups, k = 4: one token"}},
      {"e16_T7", {16, 4, 4, 2, G::v3_sigmoid, 7, "none", false, 2.0, 4202, "E = 16, k = 4: 7 tokens"}},
      {"e16_T128", {16, 4, 4, 2, G::v3_sigmoid, 128, "none", false, 2.0, 4203, "E = 16, k = 4: 128 tokens"}},
      {"e16_zipf", {16, 4, 4, 2, G::v3_sigmoid, 128, "zipf", false, 2.0, 4204,
                    "Zipf-skewed bias (-0.3 ln(1 + rank)): a few experts take most tokens"}},
      {"e16_dropping_zipf", {16, 4, 4, 2, G::v3_sigmoid, 128, "zipf", true, 1.0, 4205,
                             "dropping with capacity factor 1.0 under Zipf load: real drops"}},
      {"e8_no_shared", {8, 2, 4, 2, G::v3_sigmoid, 7, "none", false, 2.0, 4109,
                        "no shared expert (Fs = 0): the case holds s1, s3 [D, 0] and s2 [0, D] itself"}},
  };
  return s;
}

// The cases without a shared expert (the model's s1, s3, s2 replaced by zero-width arrays).
bool no_shared(const std::string& name) { return name == "e8_no_shared"; }

Config case_config(const CaseSpec& c) {
  return Config{97, 61, c.E, c.k, c.n_group, c.topk_group, c.gate == GateKind::v3_sigmoid ? 2.5 : 1.0, c.gate, 61};
}

Weights<double> model() { return make_weights(Config{97, 61, 16, 4, 4, 2, 2.5, GateKind::v3_sigmoid, 61}, kModelSeed); }

// The model's weights as .npy files named as the contract's inputs (ref/src/04-moe/contract.cpp).
// shared = false: without s1, s3, s2 (a case without a shared expert writes its own zero-width ones).
std::vector<std::string> save_model_files(const std::filesystem::path& dir, bool shared = true) {
  const Weights<float> w = model().cast<float>();
  const Index E = w.cfg.n_experts, D = w.cfg.hidden, F = w.cfg.inter;
  std::filesystem::create_directories(dir);
  auto save = [&](const char* name, const std::vector<float>& v, Shape s) {
    Array<float> a(std::move(s));
    a.data = v;
    save_npy(dir / name, a);
  };
  save_npy(dir / "W_gate.npy", Array<float>::from(w.W_gate));
  save("w1.npy", w.w1, {E, D, F});
  save("w3.npy", w.w3, {E, D, F});
  save("w2.npy", w.w2, {E, F, D});
  if (!shared) return {"W_gate.npy", "w1.npy", "w3.npy", "w2.npy"};
  save_npy(dir / "s1.npy", Array<float>::from(w.s1));
  save_npy(dir / "s3.npy", Array<float>::from(w.s3));
  save_npy(dir / "s2.npy", Array<float>::from(w.s2));
  return {"W_gate.npy", "w1.npy", "w3.npy", "w2.npy", "s1.npy", "s3.npy", "s2.npy"};
}

void write_model(const std::filesystem::path& dir) {
  const Index E = 16, D = 97, F = 61;
  const std::vector<std::string> files = save_model_files(dir);
  nlohmann::json j = case_manifest(kStage, {}, kModelSeed, {{"W_gate", {E, D}}, {"w1", {E, D, F}}, {"w3", {E, D, F}},
                                   {"w2", {E, F, D}}, {"s1", {D, 61}}, {"s3", {D, 61}}, {"s2", {61, D}}},
                                   {{"weights", "<f4"}}, "none (model weights)");
  j["case"] = "model";
  j["description"] = "a 16-expert model, D = 97, F = 61, one shared expert Fs = 61; E = 8 cases use experts 0-7";
  // The header path as the committed case.json spells it (now ladder/04-moe/synthetic.hpp; byte-identical goldens).
  j["input"] = "moe::make_weights (ladder/moe/synthetic.hpp): dyadic values, expert e from Rng(seed + 1 + e)";
  // The cases name this folder as their "model": `ladder check` reads the weights from here, checked
  // against this digest (ref/src/case_folder.cpp).
  j["files"] = files;
  write_json(dir / "case.json", j);
  seal_case(dir);
}

}  // namespace

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n{"model"};
  for (const auto& [k, v] : specs()) n.push_back(k);
  return n;
}

GoldenCase golden_case(const std::string& name) {
  auto it = specs().find(name);
  require(it != specs().end(), "04-moe: no golden case '{}' (the model is not a case with inputs)", name);
  const CaseSpec& c = it->second;
  GoldenCase g;
  g.name = name;
  g.weights = first_experts(model(), case_config(c)).cast<float>().cast<double>();
  if (no_shared(name)) {
    const Index D = g.weights.cfg.hidden;
    g.weights.cfg.shared_inter = 0;
    g.weights.s1.resize(D, 0), g.weights.s3.resize(D, 0), g.weights.s2.resize(0, D);
  }
  const auto bias = make_bias(c.bias, c.E, c.seed);
  for (Index e = 0; e < c.E; ++e) g.weights.bias[static_cast<size_t>(e)] = double(float(bias[static_cast<size_t>(e)]));
  g.x = make_tokens(c.T, 97, c.seed).cast<float>().cast<double>();
  g.dropping = c.dropping;
  g.options.capacity_factor = c.capacity_factor;
  g.options.shards = 4;
  g.seed = c.seed;
  g.description = c.what;
  g.bias_kind = c.bias;
  return g;
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full) {
  if (name == "model") return write_model(dir);
  const GoldenCase g = golden_case(name);
  const GoldenOutputs o = golden_outputs(g);
  const Config& c = g.weights.cfg;
  const Index T = g.x.rows(), k = c.top_k;
  std::filesystem::create_directories(dir);
  auto ints = [](const std::vector<Index>& v) {
    Array<Index> a({Index(v.size())});
    a.data = v;
    return a;
  };
  save_npy(dir / "x.npy", Array<float>::from(g.x.cast<float>()));
  Array<float> bias({c.n_experts});
  bias.data.assign(g.weights.bias.begin(), g.weights.bias.end());
  save_npy(dir / "bias.npy", bias);
  save_npy(dir / "topk_idx.npy", o.routing.topk_idx);
  save_npy(dir / "topk_weight.npy", o.routing.topk_weight);
  save_npy(dir / "group_sizes.npy", ints(o.group_sizes));
  save_npy(dir / "sort_idx.npy", ints(o.sort_idx));
  save_npy(dir / "y.npy", Array<double>::from(o.y));
  nlohmann::json shapes = {{"x", {T, c.hidden}},         {"bias", {c.n_experts}},   {"topk_idx", {T, k}},
                           {"topk_weight", {T, k}},       {"group_sizes", {c.n_experts}}, {"sort_idx", {T * k}},
                           {"y", {T, c.hidden}}};
  nlohmann::json dtypes = {{"x", "<f4"},        {"bias", "<f4"},     {"topk_idx", "<i8"}, {"topk_weight", "<f8"},
                           {"group_sizes", "<i8"}, {"sort_idx", "<i8"}, {"y", "<f8"}};
  if (c.shared_inter == 0) {  // no shared expert: zero-width files that stand in for the model's
    save_npy(dir / "s1.npy", Array<float>::from(g.weights.s1.cast<float>()));
    save_npy(dir / "s3.npy", Array<float>::from(g.weights.s3.cast<float>()));
    save_npy(dir / "s2.npy", Array<float>::from(g.weights.s2.cast<float>()));
    shapes["s1"] = shapes["s3"] = {c.hidden, 0};
    shapes["s2"] = {0, c.hidden};
    dtypes["s1"] = dtypes["s3"] = dtypes["s2"] = "<f4";
  }
  std::vector<std::string> rungs = {"gate", "dense_loop", "dense_fallback", "dropless", "ep_sharded"};
  if (g.dropping) {
    save_npy(dir / "kept.npy", ints(o.kept));
    shapes["kept"] = {T * k};
    dtypes["kept"] = "<i8";
    rungs = {"gate", "dropping"};
  }
  nlohmann::json j = case_manifest(kStage, rungs, g.seed, shapes, dtypes, rules_json(contract(kStage), shapes));
  j["case"] = name;
  j["description"] = g.description;
  j["model"] = "model";
  // Each value once: the layer's routing and dropping in "params" (what the contract reads), the model's widths
  // in "config" (the shapes of the weights the case names) and the ep_sharded rung's layout in "options".
  j["config"] = {{"hidden", c.hidden}, {"inter", c.inter}, {"shared_inter", c.shared_inter}};
  j["options"] = {{"shards", g.options.shards}};
  j["bias"] = g.bias_kind;
  j["oracle"] = g.dropping ? "dense_loop<double> over the kept assignments only" : "dense_loop<double>";
  j["tie_breaking"] = "gate: lower expert / group id wins; sort: stable (lower assignment index t*k + j first)";
  // What `ladder check 04-moe` reads (ref/src/04-moe/contract.cpp): the contract's params, and the files
  // its digest covers. The committed cases share the sibling folder "model" (its own digest); a case
  // written alone (--case --out) holds the weights itself.
  j["params"] = {{"n_experts", c.n_experts}, {"top_k", k}, {"n_group", c.n_group}, {"topk_group", c.topk_group},
                 {"route_scale", c.route_scale},
                 {"gate", c.gate == GateKind::v3_sigmoid ? "v3_sigmoid" : "v2_softmax"}, {"dropping", g.dropping},
                 {"capacity_factor", g.options.capacity_factor}};
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [name, shape] : shapes.items()) files.push_back(name + ".npy");
  if (full) {
    for (const std::string& f : save_model_files(dir, c.shared_inter > 0)) files.push_back(f);
    j.erase("model");
  }
  j["files"] = files;
  write_json(dir / "case.json", j);
  seal_case(dir);
}

}  // namespace ladder::moe
