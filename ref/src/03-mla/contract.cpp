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
// Several query tokens per sequence (optional input q_lens; h and q_pos then hold N = sum q_lens rows,
// sequence after sequence): token i of sequence b sees cache rows j <= seqlens[b] - q_lens[b] + i, the causal
// mask aligned bottom right (FlashMLA's s_q, MTP's verify step). With input prefix (= seqlens - q_lens) the
// case is a prefill chunk: the blocks hold only each prefix, and the step first writes the chunk's rows from
// h (W_DKV and kv_norm become needed; output kv_rows judges them). Every decode rung takes s_q > 1 as one
// decode step per query token over the same pages (per_token below: the exact causal semantics, no shared
// reads); the chunk rungs (prefill, chunk_absorbed; their CUDA versions through RungFns::chunk_f32) run the chunk
// whole. Each row of u, lse, scores and kv_rows is one token's own computation: the rule runs per row (a token;
// a sequence when q_len = 1).
#include <fmt/format.h>

#include "ladder/core/contract.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder {

namespace mla {
// fp64_bound.cpp: a float64 candidate's allowance per element, and its derivation (scores: the oracle's).
Tensors fp64_allowance(const Weights<float>& W, const PagedCache<float>& cache, const Step<float>& step,
                       const std::vector<int64_t>& q_lens, bool writes_rows, const Array<double>& scores);
}  // namespace mla

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
  if (name == "W_DKV" || name == "kv_norm")
    return "input prefix makes the case a prefill chunk, whose cache rows the step writes from h through them";
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
  PagedCache<float> cache;      // seqlens: the lengths after the step
  Step<float> step;             // h [N, hidden], q_pos [N]
  std::vector<int64_t> q_lens;  // [B]: 1 each without input q_lens
  bool writes_rows = false;     // input prefix: the chunk's rows are the step's to write
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

std::vector<int64_t> positions(const Tensors& t, const char* name, const char* axis = "B") {
  const Array<int64_t> a = npy_as_int64(needed(t, name), fmt::format("input {}", name));
  require(a.shape.size() == 1, "03-mla: input {} has shape {}, violates rank 1 [{}]", name, shape_str(a.shape), axis);
  return a.data;
}

// Inputs q_lens and prefix (both optional; h and q_pos were read as [N, hidden] and [N]).
void chunk_shape(const Tensors& t, In& in) {
  const int64_t B = static_cast<int64_t>(in.cache.seqlens.size());
  in.q_lens = positions(t, "q_lens");
  require(static_cast<int64_t>(in.q_lens.size()) == B, "03-mla: input q_lens [{}] violates [B = {}] (seqlens' length)",
          in.q_lens.size(), B);
  int64_t N = 0;
  for (int64_t b = 0; b < B; ++b) {
    require(in.q_lens[b] >= 1 && in.q_lens[b] <= in.cache.seqlens[b],
            "03-mla: input q_lens[{}] = {} violates 1 <= q_len <= seqlens[{}] = {} (seqlens count the step's tokens)",
            b, in.q_lens[b], b, in.cache.seqlens[b]);
    N += in.q_lens[b];
  }
  require(in.step.h.rows() == N && static_cast<int64_t>(in.step.q_pos.size()) == N,
          "03-mla: inputs h [{}, hidden] and q_pos [{}] violate [N = {}] (the sum of q_lens)", in.step.h.rows(),
          in.step.q_pos.size(), N);
}

void prefix_input(const Tensors& t, In& in) {
  const std::vector<int64_t> prefix = positions(t, "prefix");
  require(prefix.size() == in.q_lens.size(), "03-mla: input prefix [{}] violates [B = {}]", prefix.size(),
          in.q_lens.size());
  for (size_t b = 0; b < prefix.size(); ++b)
    require(prefix[b] == in.cache.seqlens[b] - in.q_lens[b],
            "03-mla: input prefix[{}] = {} violates prefix = seqlens - q_lens = {} - {} (the rows cached before the "
            "chunk)", b, prefix[b], in.cache.seqlens[b], in.q_lens[b]);
  needed(t, "W_DKV");
  needed(t, "kv_norm");
  in.writes_rows = true;
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
  const int64_t B = t.count("q_lens") ? static_cast<int64_t>(in.cache.seqlens.size()) : h.shape[0];
  if (t.count("q_lens")) {
    chunk_shape(t, in);
  } else {
    require(static_cast<int64_t>(in.step.q_pos.size()) == B && static_cast<int64_t>(in.cache.seqlens.size()) == B,
            "03-mla: inputs q_pos [{}] and seqlens [{}] violate [B = {}] (h's rows)", in.step.q_pos.size(),
            in.cache.seqlens.size(), B);
    in.q_lens.assign(static_cast<size_t>(B), 1);
  }
  check_paged(in.cache, c, "03-mla contract");
  if (t.count("prefix")) prefix_input(t, in);
  const int64_t N = in.step.h.rows();
  for (int64_t b = 0; b < N; ++b)
    require(in.step.q_pos[b] >= 0, "03-mla: input q_pos[{}] = {} violates q_pos >= 0", b, in.step.q_pos[b]);
  const double scratch = 8.0 * static_cast<double>(N) * static_cast<double>(c.n_heads) *
                         static_cast<double>(in.cache.max_len()) * static_cast<double>(c.q_head() + c.v_head + 2);
  require(scratch <= kMaxScratchBytes,
          "03-mla: B H Lmax = {} x {} x {} needs {:.1f} GiB of oracle scratch (CD decompresses every head), violates "
          "<= {:.0f} GiB", N, c.n_heads, in.cache.max_len(), scratch / (1ull << 30), kMaxScratchBytes / (1ull << 30));
  return in;
}

// The step's cache at T: the case's blocks, plus (prefill chunk) the rows the step writes from h.
template <class T>
PagedCache<T> step_cache(const In& in, const Weights<T>& W) {
  PagedCache<T> c = cast_cache<T>(in.cache);
  if (in.writes_rows) write_chunk_rows(W, c, in.q_lens, Mat<T>(in.step.h.cast<T>()), in.step.q_pos);
  return c;
}

// One decode step per query token: token i of sequence b becomes a sequence of its own over the same pages,
// of length seqlens[b] - q_lens[b] + i + 1 (what it sees). Exactly the causal s_q step, for any decode rung;
// the cache unchanged when every q_len is 1.
template <class T>
PagedCache<T> per_token(PagedCache<T> c, const std::vector<int64_t>& q_lens) {
  const int64_t B = static_cast<int64_t>(q_lens.size()), W = c.block_table.shape[1];
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  if (first[B] == B) return c;
  Array<int32_t> table({first[B], W});
  std::vector<int64_t> seqlens;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < q_lens[b]; ++i) {
      std::copy_n(&c.block_table.data[b * W], W, &table.data[(first[b] + i) * W]);
      seqlens.push_back(c.seqlens[b] - q_lens[b] + i + 1);
    }
  c.block_table = std::move(table);
  c.seqlens = std::move(seqlens);
  return c;
}

template <class T>
Array<T> rows_array(const Mat<T>& rows) {
  return Array<T>::from(rows);
}

template <class T>
Tensors run_cd(const In& in) {
  const Weights<T> W = in.W.cast<T>();
  const PagedCache<T> cache = per_token(step_cache<T>(in, W), in.q_lens);
  const Output<T> o = run(reference_rung<T>(Variant::CD), W, cache, cast_step<T>(in.step));
  Tensors out{{"u", to_npy(Array<T>::from(o.u))},
              {"scores", to_npy(o.scores)},
              {"lse", to_npy(logsumexp_rows(o.scores, cache.seqlens))}};
  if (in.writes_rows) out["kv_rows"] = to_npy(rows_array<T>(kv_entries(W, Mat<T>(in.step.h.cast<T>()), in.step.q_pos)));
  return out;
}

// A chunk rung on the whole chunk: prefill_chunk (writing the rows: they come back as kv_rows, read from the
// cache it wrote) or, when the rows are already cached, attend_chunk.
// A CUDA chunk rung (device, float32 only) runs the same chunk through its ChunkFn.
template <class T>
Tensors run_chunk(ChunkPath path, const In& in, const ChunkFn& device = {}) {
  const Weights<T> W = in.W.cast<T>();
  PagedCache<T> cache = cast_cache<T>(in.cache);
  const Mat<T> h = in.step.h.cast<T>();
  ChunkOutput<T> o;
  Tensors out;
  bool on_device = false;
  if constexpr (std::is_same_v<T, float>) on_device = static_cast<bool>(device);
  if (in.writes_rows) {
    for (size_t b = 0; b < in.q_lens.size(); ++b) cache.seqlens[b] -= in.q_lens[b];  // the prefix
    if constexpr (std::is_same_v<T, float>)
      if (on_device) o = device(W, cache, h, in.q_lens, in.step.q_pos, true);
    if (!on_device) o = prefill_chunk(W, cache, Chunk<T>{h, in.q_lens}, path, &in.step.q_pos);
    const std::vector<int64_t> first = chunk_offsets(in.q_lens);
    Mat<T> rows(first.back(), W.cfg.kv_dim());
    for (size_t b = 0; b < in.q_lens.size(); ++b)
      for (int64_t i = 0; i < in.q_lens[b]; ++i)
        rows.row(first[b] + i) = ConstMatMap<T>(cache.row(static_cast<int64_t>(b), cache.seqlens[b] - in.q_lens[b] + i),
                                                1, W.cfg.kv_dim());
    out["kv_rows"] = to_npy(rows_array(rows));
  } else {
    if constexpr (std::is_same_v<T, float>)
      if (on_device) o = device(W, cache, h, in.q_lens, in.step.q_pos, false);
    if (!on_device) o = attend_chunk(W, cache, h, in.q_lens, path, &in.step.q_pos);
  }
  out["u"] = to_npy(Array<T>::from(o.u));
  out["lse"] = to_npy(o.lse);
  return out;
}

// A registered rung on the case's inputs (Python's ladder.run): u, and the scores / lse the rung
// computes (the absorbed and decompressed rungs materialise the scores, lse then follows from them;
// flash_mla never forms them and returns its own lse). A decode rung takes several query tokens per
// sequence as one decode step per token (per_token); the chunk rungs run the chunk whole.
template <class T>
Tensors run_at(const Rung& r, const In& in) {
  const RungFns& fns = r.fn<RungFns>();
  const RungImpl<T>& impl = [&]() -> const RungImpl<T>& {
    if constexpr (std::is_same_v<T, float>) return fns.f32;
    else return fns.f64;
  }();
  require(static_cast<bool>(impl.prepare) && static_cast<bool>(impl.decode),
          "03-mla: rung {} has no {} function (CUDA rungs run in float32 only)", r.key(), dtype_name(dtype_of<T>()));
  if (const auto path = chunk_rung_path(r.id); path && (r.backend == "ref" || fns.chunk_f32))
    return run_chunk<T>(*path, in, fns.chunk_f32);
  const Weights<T> W = in.W.cast<T>();
  const PagedCache<T> cache = per_token(step_cache<T>(in, W), in.q_lens);
  const Output<T> o = run(impl, W, cache, cast_step<T>(in.step));
  Tensors out{{"u", to_npy(Array<T>::from(o.u))}};
  if (o.scores.size()) {
    out["scores"] = to_npy(o.scores);
    out["lse"] = to_npy(logsumexp_rows(o.scores, cache.seqlens));
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
              {"h", "<f4", "[N, hidden]", "the new tokens' hidden states (N = B, or sum q_lens)"},
              {"q_pos", "<i4|<i8", "[N]", "the new tokens' positions (RoPE); usually seqlens - q_lens + i"},
              {"seqlens", "<i4|<i8", "[B]", "cache length L_b >= 1 of each sequence, the new tokens' rows included"},
              {"q_lens", "<i4|<i8", "[B]",
               "query tokens of each sequence, 1 <= q_len <= L_b (FlashMLA's s_q; a prefill chunk's q_len); optional: "
               "1 each", true},
              {"prefix", "<i4|<i8", "[B]",
               "= seqlens - q_lens; optional: given, the case is a prefill chunk (blocks hold the prefix only, the step "
               "writes the chunk's rows from h)", true},
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
  const std::string rows = "one scale per token: a row [RMSNorm(c^KV) | RoPE(k^R)] is computed from that token's h "
                           "alone, both parts O(1)";
  c.outputs = {{"u", "<f8", "[N, hidden]", "the layer's attention output per query token", Rule::max_abs, 2, one_scale,
                false, ""},
               {"lse", "<f8", "[N, H]", "log sum_j e^{scores_j} over the keys the token sees (FlashMLA's softmax_lse)",
                Rule::max_abs, 2, stat, false, ""},
               {"scores", "<f8", "[N, H, Lmax]", "scaled scores q.k (-inf past what the token sees)", Rule::max_abs, 2,
                sc, false, ""},
               {"kv_rows", "<f8", "[N, kv_lora + rope]", "the cache rows the prefill chunk writes, token by token",
                Rule::max_abs, 2, rows, false, ""}};
  c.outputs.back().needs_input = "prefix";
  // Every output per row: each row is an independent decode step of one token (core/compare.hpp).
  for (OutputSpec& o : c.outputs) o.slice_axes = 1;
  c.oracle_doc = "CD (decompress every head, then attention) at float64 of the float32 inputs; lse from its scores";
  c.baseline_doc = "CD in float32 in a fixed order (core/fixed_order.hpp; a float64 candidate: its derived bound, fp64_bound)";
  c.oracle = [](const Tensors& t, const nlohmann::json& params) { return run_cd<double>(inputs(t, params)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_cd<float>(in) : run_cd<double>(in);
  };
  c.fp64_bound = [](const Tensors& t, const nlohmann::json& params, const Tensors& expected) {
    const In in = inputs(t, params);
    const Array<double> s = npy_as_double(expected.count("scores") ? expected.at("scores") : run_cd<double>(in).at("scores"));
    return fp64_allowance(in.W, in.cache, in.step, in.q_lens, in.writes_rows, s);
  };
  c.run_rung = [](const Rung& r, const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_at<float>(r, in) : run_at<double>(r, in);
  };
  return c;
}

}  // namespace stage_records

}  // namespace ladder
