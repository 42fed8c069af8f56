// ref/src/03-mla/flashmla.cpp -- the layout "03-mla/flashmla": stage 03 in FlashMLA's interface
// (ladder/03-mla/flashmla.hpp says which facts come from where). A layout adapter: FlashMLA's tensors are
// read as stage 03's paged cache and query tokens (q_lens = s_q), the attention is stage 03's absorbed form
// (V = the first dv dims of a cache row), and the outputs are laid out as FlashMLA returns them.
#include "ladder/03-mla/flashmla.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "flashmla_rows.hpp"
#include "ladder/07-precision/kv_quant.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::mla {
namespace {

using flashmla_detail::Attn;
using flashmla_detail::Pool;
using flashmla_detail::Query;
using flashmla_detail::param_bool;
using flashmla_detail::param_num;
using precision::KvFormat;

constexpr const char* kWho = "03-mla/flashmla";

struct FlashIn {
  int64_t b = 0, s_q = 0, h_q = 0, d = 0, dv = 0;
  bool causal = false, fp8 = false, sparse = false;
  Array<float> q;  // [b, s_q, h_q, d]
  Pool pool;       // the cache rows [num_blocks x page_block_size, d] (h_kv = 1 dropped)
  Query query;     // per query token n = b s_q + i: the rows it attends
};


// The FP8 records [rows, bytes] dequantised: exactly for the oracle, fl32(code x scale) for a float32 kernel
// (stage 07's dequantize_kv_row), or with a planted bug (the f32 values only; the flash rung reads those).
void read_fp8(const NpyData& k, FlashIn& in, FlashMlaBug bug) {
  const int64_t R = in.dv, rope = in.d - in.dv, G = R / 128;
  require(R % 128 == 0, "{}: param head_dim_v = {} violates head_dim_v % 128 == 0 (an FP8 record keeps one scale per "
          "128 latent values)", kWho, R);
  const int64_t want = precision::kv_record_bytes(KvFormat::fp8_record, R, rope);
  require(k.shape[3] == want, "{}: input kcache |u1 has {} bytes per token, violates head_dim_v + 4 head_dim_v/128 + "
          "2 (d - head_dim_v) = {} (the FP8 with scale record)", kWho, k.shape[3], want);
  Pool& p = in.pool;
  for (int64_t i = 0; i < p.rows; ++i) {
    const uint8_t* rec = &k.bytes[static_cast<size_t>(i * want)];
    precision::KvRow r = precision::kv_fp8_record_read(rec, R, rope);
    double* x = &p.exact[static_cast<size_t>(i * in.d)];
    float* f = &p.f32[static_cast<size_t>(i * in.d)];
    for (int64_t c = 0; c < in.d; ++c)
      x[c] = precision::kv_code_value(r, KvFormat::fp8_record, R, c) * precision::kv_scale(r, KvFormat::fp8_record, R, c);
    precision::dequantize_kv_row(r, R, rope, KvFormat::fp8_record, f);
    if (bug == FlashMlaBug::scale_neighbour)
      for (int64_t c = 0; c < R; ++c) f[c] = formats::from_e4m3(r.codes[c]) * r.scales[(c / 128 + 1) % G];
    if (bug == FlashMlaBug::scale_divide)
      for (int64_t c = 0; c < R; ++c) f[c] = formats::from_e4m3(r.codes[c]) / r.scales[c / 128];
    if (bug == FlashMlaBug::rope_as_fp8)  // the RoPE field's first bytes taken as E4M3 codes, unscaled
      for (int64_t c = 0; c < rope; ++c) f[R + c] = formats::from_e4m3(rec[R + 4 * G + c]);
  }
}

FlashIn read(const Tensors& t, const nlohmann::json& params, FlashMlaBug bug = FlashMlaBug::none) {
  FlashIn in;
  in.q = from_npy<float>(tensor(t, "q", kWho), "input q");
  const NpyData& k = tensor(t, "kcache", kWho);
  require(in.q.shape.size() == 4, "{}: input q has shape {}, violates [b, s_q, h_q, d]", kWho, shape_str(in.q.shape));
  require(k.shape.size() == 4, "{}: input kcache has shape {}, violates [num_blocks, page_block_size, h_kv, d]", kWho,
          shape_str(k.shape));
  require(k.shape[2] == 1, "{}: input kcache has h_kv = {}, violates h_kv = 1 (MLA: one latent head)", kWho,
          k.shape[2]);
  in.b = in.q.shape[0], in.s_q = in.q.shape[1], in.h_q = in.q.shape[2], in.d = in.q.shape[3];
  in.fp8 = k.dtype == DType::U1;
  require(in.fp8 || k.shape[3] == in.d, "{}: input kcache has d = {} where q has d = {}", kWho, k.shape[3], in.d);
  in.dv = static_cast<int64_t>(param_num(params, "head_dim_v", 512, kWho));
  require(in.dv >= 1 && in.dv < in.d, "{}: param head_dim_v = {} violates 1 <= head_dim_v < d = {}", kWho, in.dv, in.d);
  in.causal = param_bool(params, "causal", false, kWho);  // flash_mla_with_kvcache's default
  const double scale = param_num(params, "softmax_scale", 0, kWho);
  require(std::isfinite(scale) && scale >= 0, "{}: param softmax_scale = {} violates >= 0 (0: 1/sqrt(d))", kWho, scale);
  if (params.is_object() && params.contains("num_splits"))  // a scheduling choice: accepted, changes nothing
    require(params.at("num_splits").is_number_integer() && params.at("num_splits").get<int64_t>() >= 1,
            "{}: param num_splits = {} violates integer >= 1", kWho, params.at("num_splits").dump());
  const int64_t page = k.shape[1], nb = k.shape[0];
  Pool& p = in.pool;
  p.rows = nb * page, p.d = in.d;
  p.exact.resize(static_cast<size_t>(p.rows * in.d));
  p.f32.resize(p.exact.size());
  if (in.fp8) {
    read_fp8(k, in, bug);
  } else {
    const Array<float> kf = from_npy<float>(k, "input kcache");
    std::copy(kf.data.begin(), kf.data.end(), p.f32.begin());
    std::copy(kf.data.begin(), kf.data.end(), p.exact.begin());
  }
  Query& qy = in.query;
  qy.q = in.q.data.data(), qy.N = in.b * in.s_q, qy.H = in.h_q, qy.D = in.d, qy.R = in.dv;
  qy.scale = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(in.d));
  in.sparse = t.count("indices") > 0;
  require(in.sparse || (!t.count("attn_sink") && !t.count("topk_length")), "{}: inputs attn_sink and topk_length "
          "need input indices (FlashMLA takes them in sparse decode only)", kWho);
  if (in.sparse) {  // sparse decode: the indices name physical rows; block_table and cache_seqlens are not read
    require(!in.causal, "{}: param causal = true violates false with input indices (sparse decode: the indices say "
            "which rows each query token sees)", kWho);
    const Array<int64_t> idx = npy_as_int64(t.at("indices"), "input indices");
    require(idx.shape.size() == 3 && idx.shape[0] == in.b && idx.shape[1] == in.s_q,
            "{}: input indices has shape {}, violates [b = {}, s_q = {}, topk]", kWho, shape_str(idx.shape), in.b, in.s_q);
    const int64_t K = idx.shape[2];
    const std::vector<int64_t> len = flashmla_detail::topk_lengths(t, kWho, "[b]", in.b, K);
    for (int64_t n = 0; n < qy.N; ++n) {
      const int64_t used = len.empty() || bug == FlashMlaBug::topk_length_ignored ? K : len[n / in.s_q];
      auto invalid = [&](int64_t k2, int64_t v) {
        require(v >= -1 && v < p.rows, "{}: input indices[{}, {}, {}] = {} violates -1 (invalid) or 0 <= index < "
                "num_blocks x page_block_size = {}", kWho, n / in.s_q, n % in.s_q, k2, v, p.rows);
        return v == -1;
      };
      // empty: FlashMLA's lonely token, o = 0 and lse = +inf
      qy.rows.push_back(flashmla_detail::listed_rows(&idx.data[n * K], used, invalid, bug));
    }
    if (bug != FlashMlaBug::sink_ignored) qy.sink = flashmla_detail::sinks(t, kWho, in.h_q);
    return in;
  }
  // Dense: stage 03's q_lens semantics (contract.cpp, per_token): query token i of sequence b is a decode step of its
  // own over the same pages, seeing cache_seqlens[b] - s_q + i + 1 rows when causal, all of them otherwise.
  const Array<int64_t> table = npy_as_int64(tensor(t, "block_table", kWho), "input block_table");
  const Array<int64_t> lens = npy_as_int64(tensor(t, "cache_seqlens", kWho), "input cache_seqlens");
  require(lens.shape == std::vector<int64_t>{in.b}, "{}: input cache_seqlens has shape {}, violates [b = {}]", kWho,
          shape_str(lens.shape), in.b);
  require(table.shape.size() == 2 && table.shape[0] == in.b,
          "{}: input block_table has shape {}, violates [b = {}, max_blocks]", kWho, shape_str(table.shape), in.b);
  const int64_t W = table.shape[1];
  for (int64_t b = 0; b < in.b; ++b) {
    const int64_t L = lens.data[b];
    require(L >= 1, "{}: input cache_seqlens[{}] = {} violates >= 1", kWho, b, L);
    require(!in.causal || L >= in.s_q, "{}: input cache_seqlens[{}] = {} violates >= s_q = {} (causal: the s_q query "
            "tokens' own rows are cached)", kWho, b, L, in.s_q);
    require(blocks_for(L, page) <= W, "{}: input cache_seqlens[{}] = {} needs {} blocks, violates <= block_table "
            "columns = {}", kWho, b, L, blocks_for(L, page), W);
    for (int64_t i = 0; i < blocks_for(L, page); ++i)
      require(table.data[b * W + i] >= 0 && table.data[b * W + i] < nb, "{}: input block_table[{}, {}] = {} violates "
              "0 <= block < num_blocks = {}", kWho, b, i, table.data[b * W + i], nb);
    for (int64_t i = 0; i < in.s_q; ++i) {
      const int64_t seen = in.causal ? L - in.s_q + i + 1 : L;
      std::vector<int64_t> rows(static_cast<size_t>(seen));
      for (int64_t j = 0; j < seen; ++j) rows[j] = table.data[b * W + j / page] * page + j % page;
      qy.rows.push_back(std::move(rows));
    }
  }
  return in;
}

// Attention over each token's rows (flashmla_rows.hpp), laid out as FlashMLA returns it: o [b, s_q, h_q, dv] as
// computed ([N, H, R] with N = b s_q), lse [N, H] transposed to [b, h_q, s_q].
template <class T>
Tensors layout(const FlashIn& in, Attn<T> a) {
  Array<T> lse({in.b, in.h_q, in.s_q});
  for (int64_t n = 0; n < in.b * in.s_q; ++n)
    for (int64_t h = 0; h < in.h_q; ++h)
      lse.data[((n / in.s_q) * in.h_q + h) * in.s_q + n % in.s_q] = a.lse.data[n * in.h_q + h];
  a.o.shape = {in.b, in.s_q, in.h_q, in.dv};
  return {{"o", to_npy(a.o)}, {"lse", to_npy(lse)}};
}

template <class T>
Tensors attend(const FlashIn& in) {
  return layout(in, flashmla_detail::attend_rows<T>(in.query, in.pool));
}

}  // namespace

const char* flashmla_bug_name(FlashMlaBug b) {
  switch (b) {
    case FlashMlaBug::none: return "none";
    case FlashMlaBug::scale_neighbour: return "scale_neighbour";
    case FlashMlaBug::rope_as_fp8: return "rope_as_fp8";
    case FlashMlaBug::scale_divide: return "scale_divide";
    case FlashMlaBug::invalid_as_row0: return "invalid_as_row0";
    case FlashMlaBug::dedup: return "dedup";
    case FlashMlaBug::lonely_nan: return "lonely_nan";
    case FlashMlaBug::topk_length_ignored: return "topk_length_ignored";
    case FlashMlaBug::sink_ignored: return "sink_ignored";
  }
  return "?";
}

FlashMlaBug flashmla_bug(const std::string& name) {
  for (FlashMlaBug b : {FlashMlaBug::none, FlashMlaBug::scale_neighbour, FlashMlaBug::rope_as_fp8,
                        FlashMlaBug::scale_divide, FlashMlaBug::invalid_as_row0, FlashMlaBug::dedup,
                        FlashMlaBug::lonely_nan, FlashMlaBug::topk_length_ignored, FlashMlaBug::sink_ignored})
    if (name == flashmla_bug_name(b)) return b;
  throw Error(fmt::format("--plant {}: no such bug (bugs: none, scale_neighbour, rope_as_fp8, scale_divide, "
                          "invalid_as_row0, dedup, lonely_nan, topk_length_ignored, sink_ignored)", name));
}

Tensors flashmla_inputs(const FlashMlaSpec& s) {
  require(s.d > s.dv && s.dv >= 1 && s.s_q >= 1 && s.h_q >= 1 && !s.seqlens.empty(), "{}: spec violates d > dv >= 1, "
          "s_q >= 1, h_q >= 1, b >= 1", kWho);
  Rng rng(s.seed);
  const int64_t B = static_cast<int64_t>(s.seqlens.size()), bs = kBlockSize;
  int64_t used = 0, W = 1;
  for (int64_t L : s.seqlens) used += blocks_for(L, bs), W = std::max(W, blocks_for(L, bs));
  const int64_t nb = used + s.spare_blocks;
  Array<float> q({B, s.s_q, s.h_q, s.d}), k({nb, bs, 1, s.d});
  for (float& x : q.data) x = static_cast<float>(rng.normal());
  for (float& x : k.data) x = static_cast<float>(rng.normal());
  std::vector<int32_t> perm(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) perm[i] = static_cast<int32_t>(i);
  for (int64_t i = nb - 1; i > 0; --i) std::swap(perm[i], perm[static_cast<size_t>(rng.uniform_int(static_cast<uint64_t>(i + 1)))]);
  Array<int32_t> table({B, W}), lens({B});
  std::fill(table.data.begin(), table.data.end(), -1);
  int64_t next = 0;
  for (int64_t b = 0; b < B; ++b) {
    lens.data[b] = static_cast<int32_t>(s.seqlens[b]);
    for (int64_t p = 0; p < blocks_for(s.seqlens[b], bs); ++p) table.data[b * W + p] = perm[next++];
    const int64_t last = table.data[b * W + blocks_for(s.seqlens[b], bs) - 1];  // rows past L_b: NaN
    for (int64_t r = (s.seqlens[b] - 1) % bs + 1; r < bs; ++r)
      std::fill_n(&k.data[(last * bs + r) * s.d], s.d, std::numeric_limits<float>::quiet_NaN());
  }
  Tensors t{{"q", to_npy(q)}, {"kcache", to_npy(k)}, {"block_table", to_npy(table)}, {"cache_seqlens", to_npy(lens)}};
  if (s.kv_fp8) {  // each row as stage 07's kv_fp8 record; rows past L_b: all bytes 0xFF (E4M3, scales, bf16: NaN)
    const int64_t R = s.dv, rope = s.d - s.dv, rb = precision::kv_record_bytes(KvFormat::fp8_record, R, rope);
    NpyData rec{DType::U1, {nb, bs, 1, rb}, std::vector<unsigned char>(static_cast<size_t>(nb * bs * rb), 0xFF)};
    for (int64_t i = 0; i < nb * bs; ++i)
      if (std::isfinite(k.data[i * s.d]))
        precision::kv_fp8_record_write(precision::quantize_kv_row(&k.data[i * s.d], R, rope, KvFormat::fp8_record), R,
                                       rope, &rec.bytes[static_cast<size_t>(i * rb)]);
    t["kcache"] = std::move(rec);
  }
  if (s.topk > 0) {  // FlashMLA's indices_in_kvcache: a logical row's block from the table x 64 + its offset
    Array<int32_t> idx({B, s.s_q, s.topk});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < s.s_q; ++i) {
        int32_t* e = &idx.data[(b * s.s_q + i) * s.topk];
        const int64_t seen = std::max<int64_t>(1, s.seqlens[b] - s.s_q + i + 1);
        for (int64_t k2 = 0; k2 < s.topk; ++k2) {
          const int64_t j = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(seen)));
          e[k2] = static_cast<int32_t>(table.data[b * W + j / bs] * bs + j % bs);
        }
        if (s.topk >= 3) e[s.topk - 2] = -1, e[s.topk - 1] = e[0];  // one invalid entry, one duplicate at least
        if (s.topk_length && s.topk >= 4) e[1] = -1, e[2] = e[0];   // the same inside the prefix topk_length keeps
      }
    if (s.lonely) std::fill_n(idx.data.begin(), s.topk, -1);
    t["indices"] = to_npy(idx);
    flashmla_detail::extra_inputs(t, rng, s.topk_length, s.sink, B, s.topk, s.h_q);
  }
  return t;
}

nlohmann::json flashmla_params(const FlashMlaSpec& s) {
  return {{"causal", s.causal && s.topk == 0}, {"head_dim_v", s.dv},
          {"softmax_scale", s.softmax_scale > 0 ? s.softmax_scale : 1.0 / std::sqrt(static_cast<double>(s.d))}};
}

Tensors flashmla_run_flash(const Tensors& t, const nlohmann::json& params, int64_t split_blocks, FlashMlaBug bug,
                           DType prec) {
  require(split_blocks >= 1, "{}: split_blocks = {} violates >= 1", kWho, split_blocks);
  const FlashIn in = read(t, params, bug);
  const bool fp8_bug = bug == FlashMlaBug::scale_neighbour || bug == FlashMlaBug::rope_as_fp8 ||
                       bug == FlashMlaBug::scale_divide;
  require(!fp8_bug || in.fp8, "{}: bug {} concerns FP8 records; this case's kcache is float32", kWho,
          flashmla_bug_name(bug));
  require(fp8_bug || bug == FlashMlaBug::none || in.sparse, "{}: bug {} concerns indices; this case is dense", kWho,
          flashmla_bug_name(bug));
  require(prec == DType::F4 || prec == DType::F8, "{}: precision {} violates float32 | float64", kWho, dtype_name(prec));
  require(prec == DType::F4 || !fp8_bug, "{}: bug {} is planted in the float32 values of FP8 records; a float64 run reads "
          "their exact values", kWho, flashmla_bug_name(bug));
  if (prec == DType::F8) {
    Attn<double> a = flashmla_detail::flash_rows<double>(in.query, in.pool, split_blocks);
    if (bug == FlashMlaBug::lonely_nan) flashmla_detail::plant_lonely_nan(in.query, a);
    return layout(in, std::move(a));
  }
  Attn<float> a = flashmla_detail::flash_rows<float>(in.query, in.pool, split_blocks);
  if (bug == FlashMlaBug::lonely_nan) flashmla_detail::plant_lonely_nan(in.query, a);
  return layout(in, std::move(a));
}

double flashmla_cos_diff(const Array<double>& x, const Array<double>& y) { return layout_cos_diff(x, y); }

}  // namespace ladder::mla

namespace ladder::stage_records {

Contract contract_03_mla_flashmla() {
  using namespace mla;
  Contract c;
  c.stage = kFlashMlaLayout;
  c.doc = "FlashMLA's decode call flash_mla_with_kvcache (dense or sparse with indices; kcache <f4 or FP8 with scale): "
          "stage 03's absorbed attention in FlashMLA's layouts (bf16 on a GPU; <f4 files here)";
  c.inputs = {{"q", "<f4", "[b, s_q, h_q, d]", "the absorbed queries [q_abs | q^R] (d = 576 in DeepSeek)"},
              {"kcache", "<f4||u1", "[num_blocks, page_block_size, h_kv = 1, d | 656]",
               "the paged latent cache [c^KV | k^R]; |u1: FP8 with scale records (dv E4M3, dv/128 fp32 scales, "
               "bf16 RoPE)"},
              {"block_table", "<i4|<i8", "[b, max_blocks]",
               "block of each page of each sequence (unused: any); dense only, not read with indices", true},
              {"cache_seqlens", "<i4|<i8", "[b]",
               "cache length of each sequence, its s_q query tokens included; dense only, not read with indices", true},
              {"indices", "<i4|<i8", "[b, s_q, topk]", "sparse decode: rows block x page_block_size + offset, -1 "
               "invalid; duplicates count as often as listed (absent: dense)", true},
              {"topk_length", "<i4|<i8", "[b]", "sparse only: only the leftmost topk_length[b] indices are read", true},
              {"attn_sink", "<f4", "[h_q]", "sparse only: a logit per head in the softmax denominator without a value "
               "row: o x e^lse / (e^lse + e^sink); lse unchanged", true}};
  c.params = {{"causal", "boolean", "mask aligned bottom right: token i sees rows j <= cache_seqlens - s_q + i "
                                    "(default false, as flash_mla_with_kvcache)"},
              {"head_dim_v", "integer", "dv: V = the first dv dims of a cache row (default 512)"},
              {"softmax_scale", "number", "score scale (default 0: 1/sqrt(d))"},
              {"num_splits", "integer", "a scheduling choice (get_mla_metadata): accepted, changes nothing"}};
  const std::string tok = "one scale per query token: o is a convex combination of value rows for each head";
  c.outputs = {{"o", "<f8", "[b, s_q, h_q, dv]", "attention output in the latent space (before W_UV)", Rule::max_abs,
                2, tok, false, ""},
               {"lse", "<f8", "[b, h_q, s_q]", "log sum_j e^{scaled score_j}, natural log (softmax_lse); +inf for a "
                "token with no valid index (its o = 0)",
                Rule::max_abs, 2, "per-row statistics of one scale (score entries), as stage 03's lse", false, ""}};
  c.outputs[0].slice_axes = 2;  // (b, s_q): one token
  c.outputs[1].slice_axes = 2;  // (b, h_q)
  c.oracle_doc = "stage 03's absorbed attention at float64 of the float32 inputs or of the FP8 records dequantised "
                 "exactly (code x scale in float64) (scores, logsumexp_rows)";
  c.baseline_doc = "the same at float32 (FP8 records dequantised fl32(code x scale))";
  c.oracle = [](const Tensors& t, const nlohmann::json& p) { return attend<double>(read(t, p)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& p, DType prec) {
    const FlashIn in = read(t, p);
    return prec == DType::F4 ? attend<float>(in) : attend<double>(in);
  };
  c.fp64_bound = [](const Tensors& t, const nlohmann::json& p, const Tensors&) {
    const FlashIn in = read(t, p);
    return layout(in, flashmla_detail::rows_allowance(in.query, in.pool, false));
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"flashmla_cos_diff", flashmla_detail::finite_cos_diff(x, e)}};
  };
  return c;
}

}  // namespace ladder::stage_records
