// tests/lab_oracle.cpp -- the reference side of the judge (see lab_oracle.hpp). Compiled with
// -Dladder=ladder_oracle and ref/include only, so every `ladder::` below is `ladder_oracle::`.
#include "lab_oracle.hpp"

#include <fstream>

#include "ladder/core/contract.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/03-mla/golden.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/04-moe/golden.hpp"
#include "ladder/01-softmax/softmax.hpp"

// The case.json helpers of ref/src/golden.cpp that the stage-03 loaders need. golden.cpp itself is not
// compiled here: its table of stages would pull every stage's generator into this library. The
// writers are never called by the judge (it only reads committed cases).
namespace ladder {
nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  require(in.good(), "{}: cannot open file", path.string());
  return nlohmann::json::parse(in);
}
void write_json(const std::filesystem::path& path, const nlohmann::json&) {
  throw Error("lab_oracle: write_json(" + path.string() + ") is not available in the judge's library");
}
nlohmann::json case_manifest(const std::string& stage, const std::vector<std::string>&, uint64_t, const nlohmann::json&,
                             const nlohmann::json&, const nlohmann::json&) {
  throw Error("lab_oracle: case_manifest(" + stage + ") is not available in the judge's library");
}
const Contract& contract(const std::string& stage) {
  throw Error("lab_oracle: contract(" + stage + ") is not available in the judge's library");
}
nlohmann::json rules_json(const Contract& c, const nlohmann::json&) {
  throw Error("lab_oracle: rules_json(" + c.stage + ") is not available in the judge's library");
}
// Stage 04's case reader: the rest of the project reads case folders through the contract
// (ref/src/04-moe/contract.cpp, read_case), which lives in ladder_core; the judge is compiled apart from it,
// so it reads the committed case's files itself (digest not checked: the golden drift tests check it).
namespace moe {
// The model's widths are in "config", the routing in "params" (each value stored once).
inline Config config_from_json(const nlohmann::json& c, const nlohmann::json& p) {
  Config r;
  r.hidden = c.at("hidden").get<Index>();
  r.inter = c.at("inter").get<Index>();
  r.shared_inter = c.at("shared_inter").get<Index>();
  r.n_experts = p.at("n_experts").get<Index>();
  r.top_k = p.at("top_k").get<Index>();
  r.n_group = p.at("n_group").get<Index>();
  r.topk_group = p.at("topk_group").get<Index>();
  r.route_scale = p.at("route_scale").get<double>();
  const std::string gate = p.at("gate").get<std::string>();
  require(gate == "v3_sigmoid" || gate == "v2_softmax", "04-moe case: gate '{}' violates gate in {{v3_sigmoid, v2_softmax}}",
          gate);
  r.gate = gate == "v3_sigmoid" ? GateKind::v3_sigmoid : GateKind::v2_softmax;
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
GoldenCase load_case(const std::filesystem::path& dir) {
  const nlohmann::json j = read_json(dir / "case.json");
  require(j.value("stage", "") == "04-moe", "{}: case.json is for stage '{}', not 04-moe", dir.string(),
          j.value("stage", ""));
  require(j.contains("config"), "{}: case.json has no config (the model folder is not a case with inputs)",
          dir.string());
  GoldenCase g;
  g.name = j.value("case", "");
  g.seed = j.value("seed", uint64_t{0});
  const Config c = config_from_json(j.at("config"), j.at("params"));
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
  // A case without a shared expert holds zero-width s1, s3, s2 itself (read_case's order: the case, then the model).
  const auto shared = [&](const char* f) { return std::filesystem::exists(dir / f) ? dir / f : model / f; };
  w.s1 = load_mat(shared("s1.npy"), D, Fs);
  w.s3 = load_mat(shared("s3.npy"), D, Fs);
  w.s2 = load_mat(shared("s2.npy"), Fs, D);
  w.bias = load_flat(dir / "bias.npy", E);
  const Array<float> x = load_npy<float>(dir / "x.npy");
  require(x.shape.size() == 2 && x.cols() == D, "{}: x.npy shape {} violates [T, {}]", dir.string(), shape_str(x.shape),
          D);
  g.x = x.mat().cast<double>();
  const auto& p = j.at("params");
  g.dropping = p.at("dropping").get<bool>();
  g.options.capacity_factor = p.at("capacity_factor").get<double>();
  g.options.shards = j.at("options").at("shards").get<Index>();
  check_weights(w);
  return g;
}

}  // namespace moe

// ref/src/case_folder.cpp's digest writer, which the golden writers call last: a writer, so likewise.
void seal_case(const std::filesystem::path& dir) {
  throw Error("lab_oracle: seal_case(" + dir.string() + ") is not available in the judge's library");
}
}  // namespace ladder

namespace lab_oracle {
namespace {

// Every float baseline below is computed in a FixedOrder scope (core/fixed_order.hpp), as the contract
// computes its own: the same bits on every CPU, so a verdict does not depend on the machine.
template <class T>
void rows(const std::string& rung, const T* x, T* y, int64_t r, int64_t c) {
  namespace sm = ladder::softmax;
  const ladder::FixedOrder pinned;
  if (rung == "naive") return sm::naive_rows<T>(x, y, r, c);
  if (rung == "safe") return sm::safe_rows<T>(x, y, r, c);
  if (rung == "online") return sm::online_rows<T>(x, y, r, c);
  throw ladder::Error("lab_oracle: softmax rung = '" + rung + "' is not one of naive, safe, online");
}

template <class T>
Plain<T> plain(const ladder::Array<T>& a) {
  return {a.shape, a.data};
}

template <class T>
MlaOut<T> out(const ladder::mla::Output<T>& o) {
  return {o.u, plain(o.scores), plain(o.attn), plain(o.lse)};
}

}  // namespace

void softmax_rows(const std::string& rung, const float* x, float* y, int64_t r, int64_t c) { rows(rung, x, y, r, c); }
void softmax_rows(const std::string& rung, const double* x, double* y, int64_t r, int64_t c) { rows(rung, x, y, r, c); }

MlaOut<float> mla_cd_baseline(const std::string& model_dir, const std::string& case_dir) {
  namespace mla = ladder::mla;
  const mla::Weights<float> W = mla::load_model(model_dir);
  const mla::Inputs in = mla::load_inputs(case_dir);
  const ladder::FixedOrder pinned;
  return out(mla::run(mla::reference_rung<float>(mla::Variant::CD), W, in.cache, in.step));
}

MlaPair mla_random_case(const std::vector<int64_t>& cfg, uint64_t weight_seed, const std::vector<int64_t>& seqlens,
                        uint64_t input_seed, bool shuffled, int64_t spare_blocks, bool prefill) {
  namespace mla = ladder::mla;
  if (cfg.size() != 7) throw ladder::Error("lab_oracle: cfg needs 7 dimensions, got " + std::to_string(cfg.size()));
  mla::Config c;
  c.hidden = cfg[0], c.n_heads = cfg[1], c.q_lora_rank = cfg[2], c.kv_lora_rank = cfg[3], c.qk_nope = cfg[4],
  c.qk_rope = cfg[5], c.v_head = cfg[6];
  const mla::Weights<float> W = mla::random_weights(c, weight_seed);
  const mla::Inputs in = mla::make_inputs(W, mla::InputSpec{seqlens, input_seed, shuffled, spare_blocks, prefill});
  MlaPair r;
  {
    const ladder::FixedOrder pinned;  // the baseline only: the inputs are the candidates' too
    r.baseline = out(mla::run(mla::reference_rung<float>(mla::Variant::CD), W, in.cache, in.step));
  }
  r.oracle = out(mla::golden_oracle(W, in));
  return r;
}

Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> moe_dense_loop_f32(
    const std::string& case_dir, const std::vector<int64_t>& topk_idx, const std::vector<double>& topk_weight,
    const std::vector<int64_t>& kept) {
  namespace moe = ladder::moe;
  const moe::GoldenCase c = moe::load_case(case_dir);
  const moe::Weights<float> w = c.weights.cast<float>();
  const ladder::Mat<float> x = c.x.cast<float>();
  const int64_t T = x.rows(), k = w.cfg.top_k;
  moe::Routing<float> r{ladder::Array<int64_t>({T, k}), ladder::Array<float>({T, k})};
  r.topk_idx.data = topk_idx;
  r.topk_weight.data.assign(topk_weight.begin(), topk_weight.end());
  const ladder::FixedOrder pinned;
  return moe::dense_loop(w, x, r, kept.empty() ? nullptr : &kept);
}

}  // namespace lab_oracle
