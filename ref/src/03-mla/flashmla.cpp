// ref/src/03-mla/flashmla.cpp -- the layout "03-mla/flashmla": stage 03 in FlashMLA's interface
// (ladder/03-mla/flashmla.hpp says which facts come from where). A layout adapter: FlashMLA's tensors are
// read as stage 03's paged cache and query tokens (q_lens = s_q), the attention is stage 03's absorbed form
// (V = the first dv dims of a cache row), and the outputs are laid out as FlashMLA returns them.
#include "ladder/03-mla/flashmla.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ladder/03-mla/flash.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::mla {
namespace {

constexpr const char* kWho = "03-mla/flashmla";

struct FlashIn {
  int64_t b = 0, s_q = 0, h_q = 0, d = 0, dv = 0;
  bool causal = false;
  Config cfg;              // n_heads = h_q, kv_lora_rank = dv, qk_rope = d - dv, softmax_scale
  Array<float> q;          // [b, s_q, h_q, d]
  PagedCache<float> cache; // blocks [num_blocks, page, d] (h_kv = 1 dropped), block_table, seqlens = cache_seqlens
};

bool param_bool(const nlohmann::json& p, const char* name, bool fallback) {
  if (!p.is_object() || !p.contains(name)) return fallback;
  require(p.at(name).is_boolean(), "{}: param {} = {} violates type boolean", kWho, name, p.at(name).dump());
  return p.at(name).get<bool>();
}

double param_num(const nlohmann::json& p, const char* name, double fallback) {
  if (!p.is_object() || !p.contains(name)) return fallback;
  require(p.at(name).is_number(), "{}: param {} = {} violates type number", kWho, name, p.at(name).dump());
  return p.at(name).get<double>();
}

FlashIn read(const Tensors& t, const nlohmann::json& params) {
  FlashIn in;
  in.q = from_npy<float>(tensor(t, "q", kWho), "input q");
  const Array<float> k = from_npy<float>(tensor(t, "kcache", kWho), "input kcache");
  require(in.q.shape.size() == 4, "{}: input q has shape {}, violates [b, s_q, h_q, d]", kWho, shape_str(in.q.shape));
  require(k.shape.size() == 4, "{}: input kcache has shape {}, violates [num_blocks, page_block_size, h_kv, d]", kWho,
          shape_str(k.shape));
  require(k.shape[2] == 1, "{}: input kcache has h_kv = {}, violates h_kv = 1 (MLA: one latent head)", kWho,
          k.shape[2]);
  in.b = in.q.shape[0], in.s_q = in.q.shape[1], in.h_q = in.q.shape[2], in.d = in.q.shape[3];
  require(k.shape[3] == in.d, "{}: input kcache has d = {} where q has d = {}", kWho, k.shape[3], in.d);
  in.dv = static_cast<int64_t>(param_num(params, "head_dim_v", 512));
  require(in.dv >= 1 && in.dv < in.d, "{}: param head_dim_v = {} violates 1 <= head_dim_v < d = {}", kWho, in.dv, in.d);
  in.causal = param_bool(params, "causal", false);  // flash_mla_with_kvcache's default
  const double scale = param_num(params, "softmax_scale", 0);
  require(std::isfinite(scale) && scale >= 0, "{}: param softmax_scale = {} violates >= 0 (0: 1/sqrt(d))", kWho, scale);
  if (params.is_object() && params.contains("num_splits"))  // a scheduling choice: accepted, changes nothing
    require(params.at("num_splits").is_number_integer() && params.at("num_splits").get<int64_t>() >= 1,
            "{}: param num_splits = {} violates integer >= 1", kWho, params.at("num_splits").dump());
  in.cfg.n_heads = in.h_q;
  in.cfg.kv_lora_rank = in.dv;
  in.cfg.qk_rope = in.d - in.dv;
  in.cfg.qk_nope = in.dv;  // not read: q_head() only sets the default scale, which is 1/sqrt(d) here
  in.cfg.softmax_scale = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(in.d));
  in.cache.block_size = k.shape[1];
  in.cache.blocks = Array<float>({k.shape[0], k.shape[1], in.d});
  in.cache.blocks.data = k.data;
  const Array<int64_t> table = npy_as_int64(tensor(t, "block_table", kWho), "input block_table");
  const Array<int64_t> lens = npy_as_int64(tensor(t, "cache_seqlens", kWho), "input cache_seqlens");
  require(lens.shape == std::vector<int64_t>{in.b}, "{}: input cache_seqlens has shape {}, violates [b = {}]", kWho,
          shape_str(lens.shape), in.b);
  require(table.shape.size() == 2 && table.shape[0] == in.b,
          "{}: input block_table has shape {}, violates [b = {}, max_blocks]", kWho, shape_str(table.shape), in.b);
  in.cache.block_table = Array<int32_t>(table.shape);
  for (size_t i = 0; i < table.data.size(); ++i) in.cache.block_table.data[i] = static_cast<int32_t>(table.data[i]);
  in.cache.seqlens = lens.data;
  for (int64_t b = 0; b < in.b && in.causal; ++b)
    require(lens.data[b] >= in.s_q, "{}: input cache_seqlens[{}] = {} violates >= s_q = {} (causal: the s_q query "
            "tokens' own rows are cached)", kWho, b, lens.data[b], in.s_q);
  check_paged(in.cache, in.cfg, kWho);
  return in;
}

// Stage 03's q_lens semantics (contract.cpp, per_token): query token i of sequence b is a decode step of its
// own over the same pages, seeing cache_seqlens[b] - s_q + i + 1 rows when causal, all of them otherwise.
template <class T>
PagedCache<T> per_query_token(const FlashIn& in) {
  PagedCache<T> c = cast_cache<T>(in.cache);
  const int64_t W = c.block_table.shape[1];
  Array<int32_t> table({in.b * in.s_q, W});
  std::vector<int64_t> seen;
  for (int64_t b = 0; b < in.b; ++b)
    for (int64_t i = 0; i < in.s_q; ++i) {
      std::copy_n(&in.cache.block_table.data[b * W], W, &table.data[(b * in.s_q + i) * W]);
      seen.push_back(in.causal ? in.cache.seqlens[b] - in.s_q + i + 1 : in.cache.seqlens[b]);
    }
  c.block_table = std::move(table);
  c.seqlens = std::move(seen);
  return c;
}

// Stage 03's absorbed attention at T on the adapted inputs: scaled scores q.row over the rows each token sees,
// lse by logsumexp_rows (the oracle's form, mla.hpp), o^lat = sum_j e^{s_j - lse} row_j[:dv]; FlashMLA's layouts.
template <class T>
Tensors attend(const FlashIn& in) {
  const PagedCache<T> c = per_query_token<T>(in);
  const int64_t N = in.b * in.s_q, H = in.h_q, D = in.d, R = in.dv, Lmax = c.max_len();
  const T scale = static_cast<T>(in.cfg.scale());
  Array<T> scores({N, H, Lmax});
  std::fill(scores.data.begin(), scores.data.end(), -std::numeric_limits<T>::infinity());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < c.seqlens[n]; ++j) {
      const T* row = c.row(n, j);
      for (int64_t h = 0; h < H; ++h) {
        const float* q = &in.q.data[(n * H + h) * D];
        T dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += static_cast<T>(q[k]) * row[k];
        scores.data[(n * H + h) * Lmax + j] = scale * dot;
      }
    }
  const Array<T> lse_nh = logsumexp_rows(scores, c.seqlens);  // [N, H]
  Array<T> o({in.b, in.s_q, H, R}), lse({in.b, H, in.s_q});
  std::fill(o.data.begin(), o.data.end(), T(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const T l = lse_nh.data[n * H + h];
      T* out = &o.data[(n * H + h) * R];
      for (int64_t j = 0; j < c.seqlens[n]; ++j) {
        const T w = std::exp(scores.data[(n * H + h) * Lmax + j] - l);
        const T* row = c.row(n, j);
        for (int64_t r = 0; r < R; ++r) out[r] += w * row[r];
      }
      lse.data[((n / in.s_q) * H + h) * in.s_q + n % in.s_q] = l;  // [b, h_q, s_q]
    }
  return {{"o", to_npy(o)}, {"lse", to_npy(lse)}};
}

}  // namespace

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
  return {{"q", to_npy(q)}, {"kcache", to_npy(k)}, {"block_table", to_npy(table)}, {"cache_seqlens", to_npy(lens)}};
}

nlohmann::json flashmla_params(const FlashMlaSpec& s) {
  return {{"causal", s.causal}, {"head_dim_v", s.dv},
          {"softmax_scale", s.softmax_scale > 0 ? s.softmax_scale : 1.0 / std::sqrt(static_cast<double>(s.d))}};
}

Tensors flashmla_run_flash(const Tensors& t, const nlohmann::json& params, int64_t split_blocks) {
  require(split_blocks >= 1, "{}: split_blocks = {} violates >= 1", kWho, split_blocks);
  const FlashIn in = read(t, params);
  const PagedCache<float> c = per_query_token<float>(in);
  const int64_t H = in.h_q, D = in.d, R = in.dv, bs = c.block_size;
  Array<float> o({in.b, in.s_q, H, R}), lse({in.b, H, in.s_q});
  for (int64_t n = 0; n < in.b * in.s_q; ++n) {
    const int64_t splits = (blocks_for(c.seqlens[n], bs) + split_blocks - 1) / split_blocks;
    std::vector<float> o_parts(static_cast<size_t>(splits * H * R)), lse_parts(static_cast<size_t>(splits * H)),
        lse_n(static_cast<size_t>(H));
    const ConstMatMap<float> Q(&in.q.data[n * H * D], H, D);
    for (int64_t s = 0; s < splits; ++s) {
      const int64_t j0 = s * split_blocks * bs, j1 = std::min(c.seqlens[n], j0 + split_blocks * bs);
      flash_split(in.cfg, Q, c, n, j0, j1, &o_parts[s * H * R], &lse_parts[s * H]);
    }
    flash_combine(splits, H, R, o_parts.data(), lse_parts.data(), &o.data[n * H * R], lse_n.data());
    for (int64_t h = 0; h < H; ++h) lse.data[((n / in.s_q) * H + h) * in.s_q + n % in.s_q] = lse_n[h];
  }
  return {{"o", to_npy(o)}, {"lse", to_npy(lse)}};
}

double flashmla_cos_diff(const Array<double>& x, const Array<double>& y) { return layout_cos_diff(x, y); }

}  // namespace ladder::mla

namespace ladder::stage_records {

Contract contract_03_mla_flashmla() {
  using namespace mla;
  Contract c;
  c.stage = kFlashMlaLayout;
  c.doc = "FlashMLA's decode call flash_mla_with_kvcache (dense, no FP8): stage 03's absorbed attention in FlashMLA's "
          "layouts (bf16 on a GPU; <f4 files here)";
  c.inputs = {{"q", "<f4", "[b, s_q, h_q, d]", "the absorbed queries [q_abs | q^R] (d = 576 in DeepSeek)"},
              {"kcache", "<f4", "[num_blocks, page_block_size, h_kv = 1, d]", "the paged latent cache [c^KV | k^R]"},
              {"block_table", "<i4|<i8", "[b, max_blocks]", "block of each page of each sequence (unused: any)"},
              {"cache_seqlens", "<i4|<i8", "[b]", "cache length of each sequence, its s_q query tokens included"}};
  c.params = {{"causal", "boolean", "mask aligned bottom right: token i sees rows j <= cache_seqlens - s_q + i "
                                    "(default false, as flash_mla_with_kvcache)"},
              {"head_dim_v", "integer", "dv: V = the first dv dims of a cache row (default 512)"},
              {"softmax_scale", "number", "score scale (default 0: 1/sqrt(d))"},
              {"num_splits", "integer", "a scheduling choice (get_mla_metadata): accepted, changes nothing"}};
  const std::string tok = "one scale per query token: o is a convex combination of value rows for each head";
  c.outputs = {{"o", "<f8", "[b, s_q, h_q, dv]", "attention output in the latent space (before W_UV)", Rule::max_abs,
                2, tok, false, ""},
               {"lse", "<f8", "[b, h_q, s_q]", "log sum_j e^{scaled score_j}, natural log (softmax_lse)",
                Rule::max_abs, 2, "per-row statistics of one scale (score entries), as stage 03's lse", false, ""}};
  c.outputs[0].slice_axes = 2;  // (b, s_q): one token
  c.outputs[1].slice_axes = 2;  // (b, h_q)
  c.oracle_doc = "stage 03's absorbed attention at float64 of the float32 inputs (scores, logsumexp_rows)";
  c.baseline_doc = "the same at float32";
  c.oracle = [](const Tensors& t, const nlohmann::json& p) { return attend<double>(read(t, p)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& p, DType prec) {
    const FlashIn in = read(t, p);
    return prec == DType::F4 ? attend<float>(in) : attend<double>(in);
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"flashmla_cos_diff", flashmla_cos_diff(x, e)}};
  };
  return c;
}

}  // namespace ladder::stage_records
