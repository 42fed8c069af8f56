// ref/src/04-moe/contract.cpp -- stage 04's case contract (core/contract.hpp), beside its registry.
//
// The layer y = sum_j topk_weight[t, j] E_{topk_idx[t, j]}(x_t) + shared(x_t) with the routing, the
// stable sort's group sizes and order, and (dropping) the kept mask as further outputs.
//   y, topk_weight   max-abs rule, k = 2: one scale per token; the baseline is the same layer in
//                    float32 (gate<float> + dense_loop<float>).
//   topk_idx, sort_idx, group_sizes, kept   exact: routing is a decision, ties as documented (lowest
//                    expert / group id wins; stable sort, lowest assignment index first).
// A case folder holds x.npy and bias.npy; the model weights are its own inputs too (`ladder oracle`
// and `ladder golden --case --out` write them into the folder), or, for the committed goldens, the
// sibling folder case.json names as "model", read and checked against its own digest by read_case.
// No shared expert (Fs = 0, the "none" of DeepSeek's n_shared_experts = 0): s1, s3 [D, 0] and s2 [0, D],
// or the three inputs absent. In a case folder that names a model, an absent file is read from the
// model, so such a case holds the zero-width files itself (data/golden/04-moe/e8_no_shared).
#include <fmt/format.h>

#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/04-moe/golden.hpp"

namespace ladder {

// The fp64 oracle of a case (declared in ladder/04-moe/golden.hpp): here beside the contract, so that
// what reads case folders (the CLI, the Python module, the fuzz targets) needs no golden writer.
namespace moe {
GoldenOutputs golden_outputs(const GoldenCase& g) {
  GoldenOutputs o;
  o.routing = gate(g.weights, g.x);
  const Permutation p = sort_by_expert(o.routing.topk_idx, g.weights.cfg.n_experts);
  o.sort_idx = p.sort_idx;
  o.group_sizes = p.group_sizes;
  if (g.dropping) {
    o.kept = kept_mask(o.routing.topk_idx, p,
                       capacity(g.options.capacity_factor, g.x.rows(), g.weights.cfg.top_k, g.weights.cfg.n_experts));
    o.y = dense_loop(g.weights, g.x, o.routing, &o.kept);
  } else {
    o.y = dense_loop(g.weights, g.x, o.routing);
  }
  return o;
}
}  // namespace moe

namespace moe {
// fp64_bound.cpp: a float64 candidate's allowance per element (y, topk_weight), and its derivation.
Tensors fp64_allowance(const Weights<double>& w, const Mat<double>& x, const Array<int64_t>& topk_idx,
                       const std::vector<int64_t>& kept);
}  // namespace moe

namespace {

using moe::Index;

template <class J>
J param(const nlohmann::json& p, const char* key, const char* type, J fallback) {
  if (!p.contains(key)) return fallback;
  try {
    return p.at(key).get<J>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("04-moe: param {} = {} violates type {}", key, p.at(key).dump(), type));
  }
}

const NpyData& shaped(const Tensors& in, const char* name, size_t rank, const char* shape) {
  const NpyData& d = tensor(in, name, "04-moe");
  require(d.dtype == DType::F4, "04-moe: input {} has dtype {} where <f4 is required", name, dtype_name(d.dtype));
  require(d.shape.size() == rank, "04-moe: input {} has shape {}, violates {}", name, shape_str(d.shape), shape);
  return d;
}

std::vector<double> first(const NpyData& d, Index n) {
  const Array<double> a = npy_as_double(d);
  return std::vector<double>(a.data.begin(), a.data.begin() + n);
}

// The layer as the references take it: config from the params and the weights' shapes; the first
// n_experts experts of the weights (the E = 8 goldens use experts 0-7 of the 16-expert model).
moe::GoldenCase layer_of(const Tensors& in, const nlohmann::json& p) {
  const NpyData& x = shaped(in, "x", 2, "[T, D]");
  const NpyData& Wg = shaped(in, "W_gate", 2, "[E, D]");
  const NpyData& w1 = shaped(in, "w1", 3, "[E, D, F]");
  const NpyData& w3 = shaped(in, "w3", 3, "[E, D, F]");
  const NpyData& w2 = shaped(in, "w2", 3, "[E, F, D]");
  // The shared expert: s1, s3, s2 all given (Fs = 0: [D, 0], [D, 0], [0, D]) or all absent (no shared expert).
  const int given = int(in.count("s1")) + int(in.count("s3")) + int(in.count("s2"));
  require(given == 0 || given == 3, "04-moe: inputs s1, s3, s2 given {}, {}, {} violate all three or none (none: no "
          "shared expert)", in.count("s1") ? "yes" : "no", in.count("s3") ? "yes" : "no", in.count("s2") ? "yes" : "no");
  const NpyData* s1 = given ? &shaped(in, "s1", 2, "[D, Fs]") : nullptr;
  const NpyData* s3 = given ? &shaped(in, "s3", 2, "[D, Fs]") : nullptr;
  const NpyData* s2 = given ? &shaped(in, "s2", 2, "[Fs, D]") : nullptr;
  const NpyData& bias = shaped(in, "bias", 1, "[E]");
  const Index T = x.shape[0], D = x.shape[1], E0 = Wg.shape[0], F = w1.shape[2], Fs = s1 ? s1->shape[1] : 0;
  require(T >= 1 && D >= 1, "04-moe: input x has shape {}, violates T >= 1 and D >= 1", shape_str(x.shape));
  moe::Config c;
  c.hidden = D, c.inter = F, c.shared_inter = Fs;
  c.n_experts = param<Index>(p, "n_experts", "integer", E0);
  require(c.n_experts >= 1 && c.n_experts <= E0, "04-moe: param n_experts = {} violates 1 <= n_experts <= W_gate rows = {}",
          c.n_experts, E0);
  c.top_k = param<Index>(p, "top_k", "integer", 1);
  c.n_group = param<Index>(p, "n_group", "integer", 1);
  c.topk_group = param<Index>(p, "topk_group", "integer", 1);
  const std::string gate = param<std::string>(p, "gate", "string", "v3_sigmoid");
  require(gate == "v3_sigmoid" || gate == "v2_softmax", "04-moe: param gate = '{}' violates gate in {{v3_sigmoid, v2_softmax}}",
          gate);
  c.gate = gate == "v3_sigmoid" ? moe::GateKind::v3_sigmoid : moe::GateKind::v2_softmax;
  c.route_scale = param<double>(p, "route_scale", "number", 1.0);
  moe::check_config(c);
  auto need = [&](const char* name, const NpyData& d, Shape want, const char* sym) {
    require(d.shape == want, "04-moe: input {} has shape {}, violates {} = {}", name, shape_str(d.shape), sym,
            shape_str(want));
  };
  need("W_gate", Wg, {E0, D}, "[E, D]");
  need("w1", w1, {E0, D, F}, "[E, D, F]");
  need("w3", w3, {E0, D, F}, "[E, D, F]");
  need("w2", w2, {E0, F, D}, "[E, F, D]");
  if (s1) {
    need("s1", *s1, {D, Fs}, "[D, Fs]");
    need("s3", *s3, {D, Fs}, "[D, Fs]");
    need("s2", *s2, {Fs, D}, "[Fs, D]");
  }
  need("bias", bias, {c.n_experts}, "[n_experts]");
  moe::GoldenCase g;
  moe::Weights<double>& w = g.weights;
  w.cfg = c;
  w.W_gate = npy_as_double(Wg).mat().topRows(c.n_experts);
  w.bias = first(bias, c.n_experts);
  w.w1 = first(w1, c.n_experts * D * F);
  w.w3 = first(w3, c.n_experts * D * F);
  w.w2 = first(w2, c.n_experts * F * D);
  w.s1.resize(D, Fs), w.s3.resize(D, Fs), w.s2.resize(Fs, D);  // [D, 0], [0, D] without a shared expert
  if (Fs) w.s1 = npy_as_double(*s1).mat(), w.s3 = npy_as_double(*s3).mat(), w.s2 = npy_as_double(*s2).mat();
  moe::check_weights(w);
  g.x = npy_as_double(x).mat();
  for (Index i = 0; i < g.x.size(); ++i)
    require(std::isfinite(g.x.data()[i]), "04-moe: input x[{}] = {} violates finite", i, g.x.data()[i]);
  g.dropping = param<bool>(p, "dropping", "boolean", false);
  g.options.capacity_factor = param<double>(p, "capacity_factor", "number", 2.0);
  return g;
}

NpyData ints(const std::vector<Index>& v) {
  Array<Index> a({Index(v.size())});
  a.data = v;
  return to_npy(a);
}

Tensors oracle(const Tensors& in, const nlohmann::json& p) {
  const moe::GoldenCase g = layer_of(in, p);
  const moe::GoldenOutputs o = moe::golden_outputs(g);
  Tensors out{{"y", to_npy(Array<double>::from(o.y))},
              {"topk_idx", to_npy(o.routing.topk_idx)},
              {"topk_weight", to_npy(o.routing.topk_weight)},
              {"group_sizes", ints(o.group_sizes)},
              {"sort_idx", ints(o.sort_idx)}};
  if (g.dropping) out["kept"] = ints(o.kept);
  return out;
}

// The same layer in float32: its own gate (the float32 gate routes as the fp64 one
// on the goldens; where a near-tie routes it differently, the oracle's experts are used with the
// float32 weights, so the baseline measures arithmetic, not a different decision), then dense_loop.
template <class T>
Tensors baseline_at(const moe::GoldenCase& g) {
  const moe::Weights<T> w = g.weights.cast<T>();
  const Mat<T> x = g.x.cast<T>();
  const moe::Routing<double> r64 = moe::gate(g.weights, g.x);
  moe::Routing<T> r = moe::gate(w, x);
  if (r.topk_idx.data != r64.topk_idx.data) r = r64.cast<T>();
  std::vector<Index> kept;
  if (g.dropping) {
    const auto& c = g.weights.cfg;
    const moe::Permutation perm = moe::sort_by_expert(r.topk_idx, c.n_experts);
    kept = moe::kept_mask(r.topk_idx, perm, moe::capacity(g.options.capacity_factor, g.x.rows(), c.top_k, c.n_experts));
  }
  const Mat<T> y = moe::dense_loop(w, x, r, g.dropping ? &kept : nullptr);
  return Tensors{{"y", to_npy(Array<T>::from(y))}, {"topk_weight", to_npy(r.topk_weight)}};
}

// check() always asks for float32 (a float64 candidate is judged by its derived bound, fp64_bound.cpp).
Tensors baseline(const Tensors& in, const nlohmann::json& p, DType) { return baseline_at<float>(layer_of(in, p)); }

// A registered rung on the case's inputs (Python's ladder.run). The gate rung returns the routing; a
// layer rung takes the reference gate's routing at its own precision (the CUDA layer rungs too: their
// gate is a rung of its own) and returns y with what it computes of the routing, sort and kept mask.
template <class T>
Tensors run_at(const Rung& r, const moe::GoldenCase& g, const nlohmann::json& p) {
  const moe::Weights<T> w = g.weights.cast<T>();
  const Mat<T> x = g.x.cast<T>();
  auto pick = [&](const auto& fns) {
    require(static_cast<bool>(fns), "04-moe: rung {} has no {} function (CUDA rungs run in float32 only)", r.key(),
            dtype_name(dtype_of<T>()));
    return fns;
  };
  if (r.id == "gate") {
    const auto& fns = r.fn<moe::GateFns>();
    moe::Routing<T> ro;
    if constexpr (std::is_same_v<T, float>) ro = pick(fns.f32)(w, x);
    else ro = pick(fns.f64)(w, x);
    return {{"topk_idx", to_npy(ro.topk_idx)}, {"topk_weight", to_npy(ro.topk_weight)}};
  }
  const auto& fns = r.fn<moe::LayerFns>();
  const moe::Routing<T> ro = moe::gate(w, x);
  moe::LayerOptions opt;
  opt.capacity_factor = g.options.capacity_factor;
  opt.shards = param<Index>(p, "shards", "integer", opt.shards);
  moe::LayerOut<T> o;
  if constexpr (std::is_same_v<T, float>) o = pick(fns.f32)(w, x, ro, opt);
  else o = pick(fns.f64)(w, x, ro, opt);
  Tensors out{{"y", to_npy(Array<T>::from(o.y))},
              {"topk_idx", to_npy(ro.topk_idx)},
              {"topk_weight", to_npy(ro.topk_weight)}};
  if (!o.group_sizes.empty()) out["group_sizes"] = ints(o.group_sizes);
  if (!o.sort_idx.empty()) out["sort_idx"] = ints(o.sort_idx);
  if (fns.dropping) out["kept"] = ints(o.kept);
  return out;
}

Tensors run_rung_04(const Rung& r, const Tensors& in, const nlohmann::json& p, DType precision) {
  const moe::GoldenCase g = layer_of(in, p);
  return precision == DType::F4 ? run_at<float>(r, g, p) : run_at<double>(r, g, p);
}

}  // namespace

namespace moe {
GoldenCase load_case(const std::filesystem::path& dir) {
  const CaseFolder cf = read_case(contract("04-moe"), dir);
  GoldenCase g = layer_of(cf.inputs, cf.params);
  g.name = cf.manifest.value("case", "");
  g.description = cf.manifest.value("description", "");
  g.seed = cf.manifest.value("seed", uint64_t{0});
  // The ep_sharded rung's shard count: a layout of that rung, not a param of the layer.
  if (cf.manifest.contains("options")) g.options.shards = cf.manifest.at("options").value("shards", g.options.shards);
  return g;
}
}  // namespace moe

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_04_moe() {
  Contract c;
  c.stage = moe::kStage;
  c.doc = "one MoE layer forward (DeepSeek gate, routed SwiGLU experts, one shared expert or none): x -> y, routing, sort";
  c.inputs = {{"x", "<f4", "[T, D]", "tokens"},
              {"bias", "<f4", "[n_experts]", "e_score_correction_bias (V3: selection only; V2: ignored)"},
              {"W_gate", "<f4", "[E, D]", "router; the first n_experts rows are used"},
              {"w1", "<f4", "[E, D, F]", "gate projection of each expert"},
              {"w3", "<f4", "[E, D, F]", "up projection of each expert"},
              {"w2", "<f4", "[E, F, D]", "down projection of each expert"},
              {"s1", "<f4", "[D, Fs]",
               "shared expert gate projection; no shared expert: Fs = 0 ([D, 0]) or s1, s3, s2 all absent", true, true},
              {"s3", "<f4", "[D, Fs]", "shared expert up projection (Fs = 0 or absent as s1)", true, true},
              {"s2", "<f4", "[Fs, D]", "shared expert down projection (Fs = 0: [0, D], or absent as s1)", true, true}};
  c.params = {{"n_experts", "int", "routed experts used (default: W_gate's rows)"},
              {"top_k", "int", "experts per token (default 1)"},
              {"n_group", "int", "expert groups (default 1)"},
              {"topk_group", "int", "groups kept per token (default 1)"},
              {"route_scale", "number", "routed_scaling_factor (default 1; V3: 2.5)"},
              {"gate", "string", "v3_sigmoid (default) | v2_softmax"},
              {"dropping", "bool", "drop assignments past each expert's capacity (default false: dropless)"},
              {"capacity_factor", "number", "dropping: C = round(capacity_factor * T * k / E), halves up (default 2)"},
              {"shards", "int", "ladder.run of the ep_sharded rung only: its P (default 2; not read by the oracle)"}};
  const std::string exact_why =
      "a routing decision: exact; ties as documented (gate: lowest expert / group id wins; sort: stable, "
      "lowest assignment index t*k + j first)";
  c.outputs = {{"y", "<f8", "[T, D]", "layer output (dropping: the kept assignments only)", Rule::max_abs, 2,
                "one scale per token (a sum of weighted expert outputs): max|c - o| <= 2 max|b - o| + 4 ulps",
                false, ""},
               {"topk_idx", "<i8", "[T, top_k]", "selected experts, descending score", Rule::exact, 0, exact_why, false, ""},
               {"topk_weight", "<f8", "[T, top_k]", "their weights (unbiased scores, normalised, times route_scale)",
                Rule::max_abs, 2, "weights of one scale (at most route_scale): the max-abs rule", false, ""},
               {"group_sizes", "<i8", "[n_experts]", "rows per expert (bincount of topk_idx)", Rule::exact, 0, exact_why,
                false, ""},
               {"sort_idx", "<i8", "[T * top_k]", "assignment at each sorted position (stable argsort by expert)",
                Rule::exact, 0, exact_why, false, ""},
               {"kept", "<i8", "[T * top_k]", "dropping: 1 kept, 0 dropped (first C per expert in sorted order)",
                Rule::exact, 0, exact_why, false, ""}};
  // The float outputs per token: each token's layer output is an independent computation (core/compare.hpp).
  for (OutputSpec& o : c.outputs)
    if (o.rule != Rule::exact) o.slice_axes = 1;
  c.oracle_doc = "gate<double>, stable counting sort, dense_loop<double> (per token, per selected expert) on the float32 inputs";
  c.baseline_doc = "gate + dense_loop in float32 in a fixed order (core/fixed_order.hpp; the oracle's experts where a "
                   "near-tie routes differently)";
  c.oracle = oracle;
  c.baseline = baseline;
  c.fp64_bound = [](const Tensors& in, const nlohmann::json& p, const Tensors& expected) {
    const moe::GoldenCase g = layer_of(in, p);
    const Tensors o = expected.count("topk_idx") && (!g.dropping || expected.count("kept")) ? expected : oracle(in, p);
    const std::vector<int64_t> kept = g.dropping ? npy_as_int64(o.at("kept"), "kept").data : std::vector<int64_t>{};
    return moe::fp64_allowance(g.weights, g.x, npy_as_int64(o.at("topk_idx"), "topk_idx"), kept);
  };
  c.run_rung = run_rung_04;
  return c;
}

}  // namespace stage_records

}  // namespace ladder
