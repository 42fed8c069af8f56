// ladder/moe/golden.hpp -- stage 04 golden cases in memory and from disk (ref/src/04-moe/golden.cpp).
//
// A case = a model (the committed data/golden/04-moe/model/, first E experts), a bias, tokens x and
// the layer options; its outputs come from the fp64 references (gate, stable sort, dense_loop).
// load_case reads a case folder back (the weights from CASE itself or CASE/../<model>) so tests and
// `ladder check 04-moe` judge candidates from the files alone.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/moe/sorted.hpp"

namespace ladder::moe {

struct GoldenCase {
  std::string name, description, bias_kind;
  uint64_t seed = 0;
  Weights<double> weights;  // float32 values held in double
  Mat<double> x;            // [T, D], float32 values
  bool dropping = false;
  LayerOptions options;
};

struct GoldenOutputs {
  Routing<double> routing;
  std::vector<Index> sort_idx, group_sizes, kept;
  Mat<double> y;
};

GoldenCase golden_case(const std::string& name);         // from the case's seed
GoldenOutputs golden_outputs(const GoldenCase& g);       // the fp64 references on it

inline Config config_from_json(const nlohmann::json& c) {
  Config r;
  r.hidden = c.at("hidden").get<Index>();
  r.inter = c.at("inter").get<Index>();
  r.n_experts = c.at("n_experts").get<Index>();
  r.top_k = c.at("top_k").get<Index>();
  r.n_group = c.at("n_group").get<Index>();
  r.topk_group = c.at("topk_group").get<Index>();
  r.route_scale = c.at("route_scale").get<double>();
  const std::string gate = c.at("gate").get<std::string>();
  require(gate == "v3_sigmoid" || gate == "v2_softmax", "04-moe case: gate '{}' violates gate in {{v3_sigmoid, v2_softmax}}",
          gate);
  r.gate = gate == "v3_sigmoid" ? GateKind::v3_sigmoid : GateKind::v2_softmax;
  r.shared_inter = c.at("shared_inter").get<Index>();
  check_config(r);
  return r;
}

inline std::vector<double> load_flat(const std::filesystem::path& p, Index n) {
  const Array<float> a = load_npy<float>(p);
  require(a.size() >= n, "{}: {} elements, violates >= {}", p.string(), a.size(), n);
  return std::vector<double>(a.data.begin(), a.data.begin() + n);
}

inline Mat<double> load_mat(const std::filesystem::path& p, Index rows, Index cols) {
  const Array<float> a = load_npy<float>(p);
  require(a.rows() >= rows && a.cols() == cols, "{}: shape {} violates [>= {}, {}]", p.string(), shape_str(a.shape),
          rows, cols);
  return a.mat().topRows(rows).cast<double>();
}

// Reads a case folder (case.json, x.npy, bias.npy and the model).
inline GoldenCase load_case(const std::filesystem::path& dir) {
  const nlohmann::json j = read_json(dir / "case.json");
  require(j.value("stage", "") == "04-moe", "{}: case.json is for stage '{}', not 04-moe", dir.string(),
          j.value("stage", ""));
  require(j.contains("config"), "{}: case.json has no config (the model folder is not a case with inputs)",
          dir.string());
  GoldenCase g;
  g.name = j.value("case", "");
  g.seed = j.value("seed", uint64_t{0});
  const Config c = config_from_json(j.at("config"));
  // A case written alone (--case --out) holds the weights itself; a committed case names the sibling
  // folder that holds them ("model").
  std::filesystem::path model = dir;
  if (!std::filesystem::exists(model / "W_gate.npy")) model = dir / ".." / j.value("model", "model");
  require(std::filesystem::exists(model / "W_gate.npy"), "{}: model weights not found in {} or {}", dir.string(),
          dir.string(), model.string());
  const Index E = c.n_experts, D = c.hidden, F = c.inter, Fs = c.shared_inter;
  Weights<double>& w = g.weights;
  w.cfg = c;
  w.W_gate = load_mat(model / "W_gate.npy", E, D);
  w.w1 = load_flat(model / "w1.npy", E * D * F);
  w.w3 = load_flat(model / "w3.npy", E * D * F);
  w.w2 = load_flat(model / "w2.npy", E * F * D);
  w.s1 = load_mat(model / "s1.npy", D, Fs);
  w.s3 = load_mat(model / "s3.npy", D, Fs);
  w.s2 = load_mat(model / "s2.npy", Fs, D);
  w.bias = load_flat(dir / "bias.npy", E);
  const Array<float> x = load_npy<float>(dir / "x.npy");
  require(x.shape.size() == 2 && x.cols() == D, "{}: x.npy shape {} violates [T, {}]", dir.string(), shape_str(x.shape),
          D);
  g.x = x.mat().cast<double>();
  const auto& o = j.at("options");
  g.dropping = o.at("dropping").get<bool>();
  g.options.capacity_factor = o.at("capacity_factor").get<double>();
  g.options.shards = o.at("shards").get<Index>();
  check_weights(w);
  return g;
}

}  // namespace ladder::moe
