// ref/src/03-mla/flashmla_sparse.cpp -- the layout "03-mla/flashmla_sparse_prefill": FlashMLA's sparse prefill
// flash_mla_sparse_fwd (ladder/03-mla/flashmla.hpp states the facts and their sources). The same attention over
// listed rows as the decode layout (flashmla_rows.hpp); the outputs are FlashMLA's (out, max_logits, lse) with
// max_logits and lse in base 2.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "flashmla_rows.hpp"
#include "ladder/03-mla/flashmla.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::mla {
namespace {

using flashmla_detail::Attn;
using flashmla_detail::Pool;
using flashmla_detail::Query;
using flashmla_detail::param_num;

constexpr const char* kSparseWho = "03-mla/flashmla_sparse_prefill";

struct PrefillIn {
  int64_t s_q = 0, h_q = 0, d = 0, dv = 0;
  Array<float> q;  // [s_q, h_q, d]
  Pool pool;       // kv [s_kv, d]
  Query query;
};

PrefillIn read_prefill(const Tensors& t, const nlohmann::json& params, FlashMlaBug bug = FlashMlaBug::none) {
  PrefillIn in;
  in.q = from_npy<float>(tensor(t, "q", kSparseWho), "input q");
  const Array<float> kv = from_npy<float>(tensor(t, "kv", kSparseWho), "input kv");
  const Array<int64_t> idx = npy_as_int64(tensor(t, "indices", kSparseWho), "input indices");
  require(in.q.shape.size() == 3, "{}: input q has shape {}, violates [s_q, h_q, d_qk]", kSparseWho, shape_str(in.q.shape));
  in.s_q = in.q.shape[0], in.h_q = in.q.shape[1], in.d = in.q.shape[2];
  require(kv.shape.size() == 3 && kv.shape[1] == 1 && kv.shape[2] == in.d, "{}: input kv has shape {}, violates "
          "[s_kv, h_kv = 1, d_qk = {}]", kSparseWho, shape_str(kv.shape), in.d);
  require(idx.shape.size() == 3 && idx.shape[0] == in.s_q && idx.shape[1] == 1, "{}: input indices has shape {}, "
          "violates [s_q = {}, h_kv = 1, topk]", kSparseWho, shape_str(idx.shape), in.s_q);
  in.dv = static_cast<int64_t>(param_num(params, "d_v", 512, kSparseWho));
  require(in.dv >= 1 && in.dv <= in.d, "{}: param d_v = {} violates 1 <= d_v <= d_qk = {}", kSparseWho, in.dv, in.d);
  const double scale = param_num(params, "sm_scale", 0, kSparseWho);
  require(std::isfinite(scale) && scale >= 0, "{}: param sm_scale = {} violates >= 0 (0: 1/sqrt(d_qk))", kSparseWho, scale);
  const int64_t s_kv = kv.shape[0], K = idx.shape[2];
  in.pool.rows = s_kv, in.pool.d = in.d;
  in.pool.f32 = kv.data;
  in.pool.exact.assign(kv.data.begin(), kv.data.end());
  Query& qy = in.query;
  qy.q = in.q.data.data(), qy.N = in.s_q, qy.H = in.h_q, qy.D = in.d, qy.R = in.dv;
  qy.scale = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(in.d));
  const std::vector<int64_t> len = flashmla_detail::topk_lengths(t, kSparseWho, "[s_q]", in.s_q, K);
  auto invalid = [s_kv](int64_t, int64_t v) { return v < 0 || v >= s_kv; };  // -1 or any number >= s_kv (README)
  for (int64_t n = 0; n < in.s_q; ++n) {
    const int64_t used = len.empty() || bug == FlashMlaBug::topk_length_ignored ? K : len[n];
    // empty: a lonely token, out = 0, max_logits = -inf, lse = +inf
    qy.rows.push_back(flashmla_detail::listed_rows(&idx.data[n * K], used, invalid, bug));
  }
  if (bug != FlashMlaBug::sink_ignored) qy.sink = flashmla_detail::sinks(t, kSparseWho, in.h_q);
  return in;
}

// FlashMLA's outputs from the natural-log statistics: P = s log2(e), so max_logits = max(s) log2(e) and
// lse = log2 sum 2^P = ln(sum e^s) log2(e).
template <class T>
Tensors outputs(Attn<T> a) {
  const T log2e = static_cast<T>(std::numbers::log2e);
  for (T& v : a.lse.data) v *= log2e;
  for (T& v : a.mx.data) v *= log2e;
  return {{"out", to_npy(a.o)}, {"max_logits", to_npy(a.mx)}, {"lse", to_npy(a.lse)}};
}

template <class T>
Tensors attend(const PrefillIn& in) {
  return outputs(flashmla_detail::attend_rows<T>(in.query, in.pool));
}

}  // namespace

Tensors flashmla_prefill_inputs(const FlashMlaPrefillSpec& s) {
  require(s.d >= s.dv && s.dv >= 1 && s.s_q >= 1 && s.h_q >= 1 && s.s_kv >= 1 && s.topk >= 3, "{}: spec violates "
          "d >= dv >= 1, s_q, h_q, s_kv >= 1, topk >= 3", kSparseWho);
  Rng rng(s.seed);
  Array<float> q({s.s_q, s.h_q, s.d}), kv({s.s_kv, 1, s.d});
  for (float& x : q.data) x = static_cast<float>(rng.normal());
  for (float& x : kv.data) x = static_cast<float>(rng.normal());
  Array<int32_t> idx({s.s_q, 1, s.topk});
  for (int64_t n = 0; n < s.s_q; ++n) {
    int32_t* e = &idx.data[n * s.topk];
    for (int64_t k = 0; k < s.topk; ++k) e[k] = static_cast<int32_t>(rng.uniform_int(static_cast<uint64_t>(s.s_kv)));
    // FlashMLA's invalid entries, both kinds, and a duplicate (its tests' generator makes them too)
    e[s.topk - 3] = -1, e[s.topk - 2] = static_cast<int32_t>(s.s_kv + n), e[s.topk - 1] = e[0];
    if (s.topk_length && s.topk >= 4) e[1] = -1, e[2] = e[0];  // the same inside the prefix topk_length keeps
  }
  if (s.lonely) std::fill_n(idx.data.begin(), s.topk, -1);
  Tensors t{{"q", to_npy(q)}, {"kv", to_npy(kv)}, {"indices", to_npy(idx)}};
  flashmla_detail::extra_inputs(t, rng, s.topk_length, s.sink, s.s_q, s.topk, s.h_q);
  return t;
}

nlohmann::json flashmla_prefill_params(const FlashMlaPrefillSpec& s) {
  return {{"d_v", s.dv}, {"sm_scale", 1.0 / std::sqrt(static_cast<double>(s.d))}};
}

Tensors flashmla_prefill_run_flash(const Tensors& t, const nlohmann::json& params, int64_t split_blocks,
                                   FlashMlaBug bug, DType prec) {
  require(split_blocks >= 1, "{}: split_blocks = {} violates >= 1", kSparseWho, split_blocks);
  require(bug != FlashMlaBug::scale_neighbour && bug != FlashMlaBug::rope_as_fp8 && bug != FlashMlaBug::scale_divide,
          "{}: bug {} concerns FP8 records, which sparse prefill does not read", kSparseWho, flashmla_bug_name(bug));
  require(prec == DType::F4 || prec == DType::F8, "{}: precision {} violates float32 | float64", kSparseWho,
          dtype_name(prec));
  const PrefillIn in = read_prefill(t, params, bug);
  if (prec == DType::F8) {
    Attn<double> a = flashmla_detail::flash_rows<double>(in.query, in.pool, split_blocks);
    if (bug == FlashMlaBug::lonely_nan) flashmla_detail::plant_lonely_nan(in.query, a);
    return outputs(std::move(a));
  }
  Attn<float> a = flashmla_detail::flash_rows<float>(in.query, in.pool, split_blocks);
  if (bug == FlashMlaBug::lonely_nan) flashmla_detail::plant_lonely_nan(in.query, a);
  return outputs(std::move(a));
}

}  // namespace ladder::mla

namespace ladder::stage_records {

Contract contract_03_mla_flashmla_sparse_prefill() {
  using namespace mla;
  Contract c;
  c.stage = kFlashMlaSparsePrefillLayout;
  c.doc = "FlashMLA's sparse prefill flash_mla_sparse_fwd: attention of each query token over its topk listed kv rows; "
          "max_logits and lse in base 2 (bf16 on a GPU; <f4 files here)";
  c.inputs = {{"q", "<f4", "[s_q, h_q, d_qk]", "queries (d_qk = 576 in DeepSeek-V3.2)"},
              {"kv", "<f4", "[s_kv, h_kv = 1, d_qk]", "the latent cache rows; V = the first d_v dims"},
              {"indices", "<i4|<i8", "[s_q, h_kv = 1, topk]", "rows each token attends; < 0 or >= s_kv invalid; "
               "duplicates count as often as listed"},
              {"topk_length", "<i4|<i8", "[s_q]", "only the leftmost topk_length[i] indices of token i are read", true},
              {"attn_sink", "<f4", "[h_q]", "a logit per head (natural-log units) in the softmax denominator without a "
               "value row: out x e^lse / (e^lse + e^sink); max_logits and lse unchanged", true}};
  c.params = {{"sm_scale", "number", "score scale (default 0: 1/sqrt(d_qk))"},
              {"d_v", "integer", "V = the first d_v dims of a kv row (default 512)"}};
  const std::string tok = "one scale per query token: out is a convex combination of value rows for each head";
  const std::string stat = "per-token statistics of one scale (scaled scores x log2 e)";
  c.outputs = {{"out", "<f8", "[s_q, h_q, d_v]", "attention output", Rule::max_abs, 2, tok, false, ""},
               {"max_logits", "<f8", "[s_q, h_q]", "max_j P_j, P = score x sm_scale x log2(e) (base 2); -inf for a token with no valid index", Rule::max_abs,
                2, stat, false, ""},
               {"lse", "<f8", "[s_q, h_q]", "log2 sum_j 2^{P_j}: BASE 2 (= natural lse / ln 2); +inf for a token with no valid index (out 0)", Rule::max_abs, 2, stat,
                false, ""}};
  for (OutputSpec& o : c.outputs) o.slice_axes = 1;  // one query token
  c.oracle_doc = "the scaled scores over the listed rows at float64, logsumexp_rows (stage 03's form), x log2(e)";
  c.baseline_doc = "the same at float32";
  c.oracle = [](const Tensors& t, const nlohmann::json& p) { return attend<double>(read_prefill(t, p)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& p, DType prec) {
    const PrefillIn in = read_prefill(t, p);
    return prec == DType::F4 ? attend<float>(in) : attend<double>(in);
  };
  c.fp64_bound = [](const Tensors& t, const nlohmann::json& p, const Tensors& expected) {
    const PrefillIn in = read_prefill(t, p);
    Attn<double> b = flashmla_detail::rows_allowance(in.query, in.pool, true);
    flashmla_detail::to_base2(b, npy_as_double(tensor(expected, "lse", kSparseWho)),
                              npy_as_double(tensor(expected, "max_logits", kSparseWho)));
    return Tensors{{"out", to_npy(b.o)}, {"max_logits", to_npy(b.mx)}, {"lse", to_npy(b.lse)}};
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"flashmla_cos_diff", flashmla_detail::finite_cos_diff(x, e)}};
  };
  return c;
}

}  // namespace ladder::stage_records
