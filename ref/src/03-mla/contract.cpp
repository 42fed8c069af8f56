// ref/src/03-mla/contract.cpp -- stage 03's case contract (core/contract.hpp), beside its registry.
//
// One MLA decode step of one layer: the layer's weights, the new tokens' hidden states and positions,
// and the paged compressed cache (FlashMLA's layout: blocks [num_blocks, block_size, kv_lora + rope],
// block_table [B, max_blocks], seqlens [B]). Every dimension of the config is read from the inputs'
// shapes (kv_lora = kv_b.cols, rope = blocks' row width - kv_lora, H = W_QR.rows / rope, nope = W_UQ.rows / H,
// v = W_O.cols / H), so a user writes arrays only; the three scalars that shapes cannot carry are
// params with DeepSeek-V2's defaults. The committed cases keep the weights in a sibling folder
// (data/golden/03-mla/model_small, named by case.json "model"); `ladder golden 03-mla --case NAME --out
// DIR` writes a case whole, weights and params included.
#include <fmt/format.h>

#include "ladder/core/contract.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder {
namespace {

using namespace mla;

// CD (the oracle) materialises K and V for every head: B H Lmax (nope + rope + v) doubles, plus the
// scores and weights B H Lmax twice. Refuse what cannot fit instead of dying in the allocator.
constexpr double kMaxScratchBytes = 8.0 * (1ull << 30);

// What each input is needed for (read from the code: decode_cd, query_latent / query_nope / query_rope,
// decompress, attend_decompressed, output_projection). W_DKV and kv_norm form the cache rows
// (kv_entries), which are an input here: no output of the step depends on them, so they are optional.
// Every other input feeds u, scores and lse (W_O: u only, but the oracle computes the three together).
const char* needed_by(const std::string& name) {
  if (name == "W_O") return "u = W_O o needs it (and the oracle computes u, scores and lse together)";
  if (name == "kv_b") return "u, scores and lse need it (W_UK: the keys; W_UV: the values)";
  if (name == "seqlens" || name == "block_table" || name == "blocks")
    return "u, scores and lse need it (the compressed cache they attend over)";
  return "u, scores and lse need it (the query c^Q, q^C, q^R)";
}

// A needed input: its absence names it and what needs it.
const NpyData& needed(const Tensors& t, const char* name) {
  auto it = t.find(name);
  require(it != t.end(), "03-mla: input {} is missing; {} (see `ladder describe 03-mla`)", name, needed_by(name));
  return it->second;
}

struct In {
  Weights<float> W;
  PagedCache<float> cache;
  Step<float> step;
};

Mat<float> matrix(const Tensors& t, const char* name) {
  const Array<float> a = from_npy<float>(needed(t, name), fmt::format("input {}", name));
  require(a.shape.size() == 2, "03-mla: input {} has shape {}, violates rank 2 [out, in] (nn.Linear layout)", name,
          shape_str(a.shape));
  return a.mat();
}

Vec<float> gain(const Tensors& t, const char* name) {
  const Array<float> a = from_npy<float>(needed(t, name), fmt::format("input {}", name));
  require(a.shape.size() == 1, "03-mla: input {} has shape {}, violates rank 1", name, shape_str(a.shape));
  return Eigen::Map<const Vec<float>>(a.data.data(), a.size());
}

double param(const nlohmann::json& params, const char* name, double fallback, double lo, const char* constraint) {
  if (!params.contains(name)) return fallback;
  const nlohmann::json& v = params.at(name);
  require(v.is_number(), "03-mla: param {} = {} violates type number", name, v.dump());
  const double x = v.get<double>();
  require(std::isfinite(x) && x >= lo, "03-mla: param {} = {} violates {}", name, x, constraint);
  return x;
}

std::vector<int64_t> positions(const Tensors& t, const char* name) {
  const Array<int64_t> a = npy_as_int64(needed(t, name), fmt::format("input {}", name));
  require(a.shape.size() == 1, "03-mla: input {} has shape {}, violates rank 1 [B]", name, shape_str(a.shape));
  return a.data;
}

In inputs(const Tensors& t, const nlohmann::json& params) {
  In in;
  Weights<float>& W = in.W;
  W.W_DQ = matrix(t, "W_DQ"), W.W_UQ = matrix(t, "W_UQ"), W.W_QR = matrix(t, "W_QR");
  W.kv_b = matrix(t, "kv_b"), W.W_O = matrix(t, "W_O");
  W.q_norm = gain(t, "q_norm");
  // Optional (no output depends on them): shape-checked against the rest when given, else left empty.
  if (t.count("W_DKV")) W.W_DKV = matrix(t, "W_DKV");
  if (t.count("kv_norm")) W.kv_norm = gain(t, "kv_norm");
  in.cache.blocks = from_npy<float>(needed(t, "blocks"), "input blocks");
  require(in.cache.blocks.shape.size() == 3, "03-mla: input blocks has shape {}, violates [num_blocks, block_size, "
          "kv_lora + rope]", shape_str(in.cache.blocks.shape));
  // The config from the shapes (check_weights below then checks every shape against it); rope from the
  // cache rows' width, which W_DKV.rows (when given) must equal.
  Config& c = W.cfg;
  c.hidden = W.W_DQ.cols();
  c.q_lora_rank = W.W_DQ.rows();
  c.kv_lora_rank = W.kv_b.cols();
  c.qk_rope = in.cache.blocks.shape[2] - c.kv_lora_rank;
  require(c.qk_rope >= 2, "03-mla: input blocks has rows of {} and kv_b {} columns (kv_lora), violates blocks' last "
          "dimension = kv_lora + rope with rope >= 2", in.cache.blocks.shape[2], c.kv_lora_rank);
  require(W.W_QR.rows() % c.qk_rope == 0, "03-mla: input W_QR has {} rows, violates H * rope with rope = {} "
          "(blocks' last dimension - kv_b.cols)", W.W_QR.rows(), c.qk_rope);
  c.n_heads = W.W_QR.rows() / c.qk_rope;
  require(c.n_heads >= 1 && W.W_UQ.rows() % c.n_heads == 0 && W.W_O.cols() % c.n_heads == 0,
          "03-mla: inputs W_UQ rows {} and W_O cols {} violate multiples of H = {} (W_QR.rows / rope)", W.W_UQ.rows(),
          W.W_O.cols(), c.n_heads);
  c.qk_nope = W.W_UQ.rows() / c.n_heads;
  c.v_head = W.W_O.cols() / c.n_heads;
  c.rope_theta = param(params, "rope_theta", 10000.0, 1.0 + 1e-12, "rope_theta > 1");
  c.rms_eps = param(params, "rms_eps", 1e-6, 1e-300, "rms_eps > 0");
  c.softmax_scale = param(params, "softmax_scale", 0.0, 0.0, "softmax_scale >= 0 (0: 1/sqrt(nope + rope))");
  check_weights(W, "03-mla contract");

  const Array<float> h = from_npy<float>(needed(t, "h"), "input h");
  require(h.shape.size() == 2 && h.shape[1] == c.hidden, "03-mla: input h has shape {}, violates [B, hidden = {}]",
          shape_str(h.shape), c.hidden);
  in.step.h = h.mat();
  in.step.q_pos = positions(t, "q_pos");
  in.cache.seqlens = positions(t, "seqlens");
  in.cache.block_table = npy_as_int64(needed(t, "block_table"), "input block_table").cast<int32_t>();
  in.cache.block_size = in.cache.blocks.shape[1];
  const int64_t B = h.shape[0];
  require(static_cast<int64_t>(in.step.q_pos.size()) == B && static_cast<int64_t>(in.cache.seqlens.size()) == B,
          "03-mla: inputs q_pos [{}] and seqlens [{}] violate [B = {}] (h's rows)", in.step.q_pos.size(),
          in.cache.seqlens.size(), B);
  check_paged(in.cache, c, "03-mla contract");
  for (int64_t b = 0; b < B; ++b)
    require(in.step.q_pos[b] >= 0, "03-mla: input q_pos[{}] = {} violates q_pos >= 0", b, in.step.q_pos[b]);
  const double scratch = 8.0 * static_cast<double>(B) * static_cast<double>(c.n_heads) *
                         static_cast<double>(in.cache.max_len()) * static_cast<double>(c.q_head() + c.v_head + 2);
  require(scratch <= kMaxScratchBytes,
          "03-mla: B H Lmax = {} x {} x {} needs {:.1f} GiB of oracle scratch (CD decompresses every head), violates "
          "<= {:.0f} GiB", B, c.n_heads, in.cache.max_len(), scratch / (1ull << 30), kMaxScratchBytes / (1ull << 30));
  return in;
}

template <class T>
Tensors run_cd(const In& in) {
  const Output<T> o = run(reference_rung<T>(Variant::CD), in.W.cast<T>(), cast_cache<T>(in.cache),
                          cast_step<T>(in.step));
  return {{"u", to_npy(Array<T>::from(o.u))},
          {"scores", to_npy(o.scores)},
          {"lse", to_npy(logsumexp_rows(o.scores, in.cache.seqlens))}};
}

// A registered rung on the case's inputs (Python's ladder.run): u, and the scores / lse the rung
// computes (the absorbed and decompressed rungs materialise the scores, lse then follows from them;
// flash_mla never forms them and returns its own lse).
template <class T>
Tensors run_at(const Rung& r, const In& in) {
  const RungFns& fns = r.fn<RungFns>();
  const RungImpl<T>& impl = [&]() -> const RungImpl<T>& {
    if constexpr (std::is_same_v<T, float>) return fns.f32;
    else return fns.f64;
  }();
  require(static_cast<bool>(impl.prepare) && static_cast<bool>(impl.decode),
          "03-mla: rung {} has no {} function (CUDA rungs run in float32 only)", r.key(), dtype_name(dtype_of<T>()));
  const Output<T> o = run(impl, in.W.cast<T>(), cast_cache<T>(in.cache), cast_step<T>(in.step));
  Tensors out{{"u", to_npy(Array<T>::from(o.u))}};
  if (o.scores.size()) {
    out["scores"] = to_npy(o.scores);
    out["lse"] = to_npy(logsumexp_rows(o.scores, in.cache.seqlens));
  }
  if (o.lse.size()) out["lse"] = to_npy(o.lse);
  return out;
}

}  // namespace

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_03_mla() {
  Contract c;
  c.stage = kStage;
  c.doc = "one MLA decode step of one layer (u = o_proj of attention over the paged compressed cache)";
  c.inputs = {{"W_DQ", "<f4", "[q_lora, hidden]", "q_a_proj: c^Q = W_DQ h"},
              {"q_norm", "<f4", "[q_lora]", "q_a_layernorm gain (RMSNorm)"},
              {"W_UQ", "<f4", "[H * nope, q_lora]", "q_b_proj's nope rows: q^C = W_UQ c^Q"},
              {"W_QR", "<f4", "[H * rope, q_lora]", "q_b_proj's rope rows: q^R = RoPE(W_QR c^Q)"},
              {"W_DKV", "<f4", "[kv_lora + rope, hidden]",
               "kv_a_proj_with_mqa: [c^KV | k^R] = W_DKV h; optional: it forms the cache rows (blocks), no output "
               "of the step depends on it", true},
              {"kv_norm", "<f4", "[kv_lora]", "kv_a_layernorm gain (on c^KV only); optional, as W_DKV", true},
              {"kv_b", "<f4", "[H * (nope + v), kv_lora]", "kv_b_proj: per head W_UK (nope rows) then W_UV (v rows)"},
              {"W_O", "<f4", "[hidden, H * v]", "o_proj"},
              {"h", "<f4", "[B, hidden]", "the new tokens' hidden states"},
              {"q_pos", "<i4|<i8", "[B]", "the new tokens' positions (RoPE); usually seqlens - 1"},
              {"seqlens", "<i4|<i8", "[B]", "cache length L_b >= 1 of each sequence, the new token's row included"},
              {"block_table", "<i4|<i8", "[B, max_blocks]", "block of each page of each sequence (unused: any)"},
              {"blocks", "<f4", "[num_blocks, block_size, kv_lora + rope]",
               "the paged cache rows [c^KV normed | k^R roped] (FlashMLA's layout)"}};
  c.params = {{"rope_theta", "number", "RoPE base (default 10000)"},
              {"rms_eps", "number", "RMSNorm epsilon (default 1e-6)"},
              {"softmax_scale", "number", "score scale (default 0: 1/sqrt(nope + rope))"}};
  const std::string one_scale =
      "one scale per sequence: u is a sum over heads of convex combinations of value rows, so every element "
      "carries error at the scale of u (FlashAttention's rule, the tests' kMla)";
  const std::string stat = "per-row statistics of one scale (score entries), as attention's L";
  const std::string sc = "one scale per sequence (its scores in one step); entries past L_b are -inf and must be -inf";
  c.outputs = {{"u", "<f8", "[B, hidden]", "the layer's attention output", Rule::max_abs, 2, one_scale, false, ""},
               {"lse", "<f8", "[B, H]", "log sum_j e^{scores_j}, j < L_b (FlashMLA's softmax_lse)", Rule::max_abs, 2,
                stat, false, ""},
               {"scores", "<f8", "[B, H, Lmax]", "scaled scores q.k (-inf past L_b)", Rule::max_abs, 2, sc, false,
                ""}};
  // Every output per sequence: each b is an independent decode step (core/compare.hpp).
  for (OutputSpec& o : c.outputs) o.slice_axes = 1;
  c.oracle_doc = "CD (decompress every head, then attention) at float64 of the float32 inputs; lse from its scores";
  c.baseline_doc = "CD in float32 in a fixed order (core/fixed_order.hpp; a float64 candidate: that error x 2^-29, k + 1)";
  c.oracle = [](const Tensors& t, const nlohmann::json& params) { return run_cd<double>(inputs(t, params)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_cd<float>(in) : run_cd<double>(in);
  };
  c.run_rung = [](const Rung& r, const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_at<float>(r, in) : run_at<double>(r, in);
  };
  return c;
}

}  // namespace stage_records

}  // namespace ladder
