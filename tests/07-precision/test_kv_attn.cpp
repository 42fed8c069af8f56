// tests/07-precision/test_kv_attn.cpp -- rungs (e) and (f): MLA decode over an int8 / FP8 KV cache
// (ladder/07-precision/kv_quant.hpp) and bf16 tiled attention (attn_bf16.hpp), judged through the contract by the
// bound of attn_bound.hpp. Issue 40's wrong candidates fail: a per-token scale of the neighbouring token, the FP8
// record's block scales transposed or missing, its RoPE part quantised to E4M3 where the record keeps bf16, P
// truncated where RNE is declared, O accumulated in bf16 where float32 is declared; the right recipe computed in
// another order (keys and channels reversed, tiles walked backwards) or in float64 passes. The goldens are the cases.
#include <doctest/doctest.h>

#include <cmath>

#include "golden_util.hpp"
#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

struct Loaded {
  CaseFolder cf;
  Recipe recipe;
};
Loaded load_kv(const std::string& name) {
  Loaded c;
  c.cf = read_case(contract("07-precision"), test::golden_dir("07-precision") / name);
  c.recipe = parse_recipe(c.cf.params);
  return c;
}
bool passes(const Loaded& c, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(contract("07-precision"), c.cf.inputs, c.cf.params, c.cf.expected, output, cand);
  INFO(output << ": " << r.text);
  if (!r.pass) MESSAGE(output << " fails: worst err / bound = " << r.metrics.at("worst_err_over_bound"));
  return r.pass;
}

// ---- rung (e): an MLA candidate of its own (reversed sums), with issue 40's mistakes as switches ----------------
struct KvCand {
  bool neighbour_scale = false;  // kv_int8: token j dequantised with token j+1's scale (j-1 for the last)
  bool transposed = false;       // kv_fp8: the [L, R/128] scales read as [R/128, L]
  bool missing = false;          // the scales left out (codes taken as values; kv_fp8: the latent's)
  bool rope_fp8 = false;         // kv_fp8: the rope part through E4M3 with its own amax/448 scale
  bool in_f64 = false;           // the right recipe with float64 arithmetic
};

template <class T>
std::vector<T> kv_candidate(const MlaKvOperands& m, KvFormat f, const KvCand& k, std::vector<T>& lse) {
  const int64_t D = m.R + m.rope, nb = m.R / 128;
  std::vector<T> u(static_cast<size_t>(m.B * m.hidden));
  lse.assign(static_cast<size_t>(m.B * m.H), 0);
  for (int64_t b = 0; b < m.B; ++b) {
    const int64_t L = m.seqlens[static_cast<size_t>(b)];
    std::vector<KvRow> rows;
    for (int64_t j = 0; j < L; ++j) rows.push_back(quantize_kv_row(m.row(b, j), m.R, m.rope, f));
    std::vector<T> deq(static_cast<size_t>(L * D));
    for (int64_t j = 0; j < L; ++j)
      for (int64_t c = 0; c < D; ++c) {
        float s = kv_scale(rows[static_cast<size_t>(j)], f, m.R, c);
        if (k.neighbour_scale && L > 1) s = rows[static_cast<size_t>(j + 1 < L ? j + 1 : j - 1)].scales[0];
        if (k.transposed && c < m.R) {
          const int64_t flat = j * nb + c / 128;  // (j, block) read from a [nb, L] array
          s = rows[static_cast<size_t>((flat % L))].scales[static_cast<size_t>(flat / L)];
        }
        if (k.missing && (c < m.R || f == KvFormat::int8_token)) s = 1.0f;
        T v = static_cast<T>(static_cast<float>(kv_code_value(rows[static_cast<size_t>(j)], f, m.R, c)) * s);
        if (k.rope_fp8 && c >= m.R) {
          float amax = 0;
          for (int64_t r = m.R; r < D; ++r) amax = std::max(amax, std::fabs(m.row(b, j)[r]));
          const float rs = quant::tile_scale(amax, quant::Elem::e4m3, quant::ScaleRule::amax);
          v = static_cast<T>(formats::from_e4m3(formats::to_e4m3(m.row(b, j)[c] / rs)) * rs);
        }
        deq[static_cast<size_t>(j * D + c)] = v;
      }
    std::vector<T> olat(static_cast<size_t>(m.H * m.R), 0), s(static_cast<size_t>(L));
    for (int64_t h = 0; h < m.H; ++h) {
      T mx = -INFINITY, l = 0;
      for (int64_t j = L - 1; j >= 0; --j) {  // keys and channels reversed
        T dot = 0;
        for (int64_t c = D - 1; c >= 0; --c) {
          const T q = c < m.R ? m.q_abs[static_cast<size_t>((b * m.H + h) * m.R + c)]
                              : m.q_pe[static_cast<size_t>((b * m.H + h) * m.rope + c - m.R)];
          dot += q * deq[static_cast<size_t>(j * D + c)];
        }
        s[static_cast<size_t>(j)] = dot * static_cast<T>(m.sigma);
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      for (int64_t j = L - 1; j >= 0; --j) {
        const T p = std::exp(s[static_cast<size_t>(j)] - mx);
        l += p;
        for (int64_t c = 0; c < m.R; ++c) olat[static_cast<size_t>(h * m.R + c)] += p * deq[static_cast<size_t>(j * D + c)];
      }
      for (int64_t c = 0; c < m.R; ++c) olat[static_cast<size_t>(h * m.R + c)] /= l;
      lse[static_cast<size_t>(b * m.H + h)] = mx + std::log(l);
    }
    for (int64_t i = 0; i < m.hidden; ++i) {
      T y = 0;
      for (int64_t c = m.H * m.R - 1; c >= 0; --c)
        y += static_cast<T>(m.w_o[static_cast<size_t>(i * m.H * m.R + c)]) * olat[static_cast<size_t>(c)];
      u[static_cast<size_t>(b * m.hidden + i)] = y;
    }
  }
  return u;
}

// {u passes, lse passes} for the candidate on golden case `name`.
std::pair<bool, bool> kv_judge(const std::string& name, const KvCand& k) {
  const Loaded c = load_kv(name);
  const MlaKvOperands m = mla_operands(c.cf.inputs, c.recipe);
  const KvFormat f = kv_format(c.recipe);
  if (k.in_f64) {
    std::vector<double> lse;
    const std::vector<double> u = kv_candidate<double>(m, f, k, lse);
    return {passes(c, "u", npy_of(u, {m.B, m.hidden})), passes(c, "lse", npy_of(lse, {m.B, m.H}))};
  }
  std::vector<float> lse;
  const std::vector<float> u = kv_candidate<float>(m, f, k, lse);
  return {passes(c, "u", npy_of(u, {m.B, m.hidden})), passes(c, "lse", npy_of(lse, {m.B, m.H}))};
}

}  // namespace

TEST_CASE("07 rung (e): the record sizes, the reference rung and its goldens") {
  CHECK(kv_record_bytes(KvFormat::fp8_record, 512, 64) == 656);  // FlashMLA's stated size
  CHECK(kv_record_bytes(KvFormat::int8_token, 512, 64) == 580);
  CHECK_THROWS_WITH_AS(check_kv_dims(KvFormat::fp8_record, 500, 64), doctest::Contains("kv_lora % 128"), Error);
  for (const char* name : {"kv_int8_mla", "kv_fp8_mla"}) {
    const Loaded c = load_kv(name);
    const Tensors out = run_rung(contract("07-precision"), registry().find("07-precision", "ref", c.recipe.name),
                                 c.cf.inputs, c.cf.params, DType::F4);
    CHECK(passes(c, "u", out.at("u")));
    CHECK(passes(c, "lse", out.at("lse")));
  }
}

TEST_CASE("07 rung (e): right candidates in another order or in float64 pass") {
  for (const char* name : {"kv_int8_mla", "kv_fp8_mla"}) {
    CAPTURE(name);
    CHECK(kv_judge(name, {}) == std::pair{true, true});
    KvCand f64;
    f64.in_f64 = true;
    CHECK(kv_judge(name, f64) == std::pair{true, true});
  }
}

TEST_CASE("07 rung (e): issue 40's wrong KV caches fail") {
  KvCand k;
  k.neighbour_scale = true;
  CHECK_FALSE(kv_judge("kv_int8_mla", k).first);
  KvCand m8;
  m8.missing = true;
  CHECK_FALSE(kv_judge("kv_int8_mla", m8).first);
  KvCand t;
  t.transposed = true;
  CHECK_FALSE(kv_judge("kv_fp8_mla", t).first);
  KvCand mi;
  mi.missing = true;
  CHECK_FALSE(kv_judge("kv_fp8_mla", mi).first);
  KvCand r;
  r.rope_fp8 = true;
  const auto [u_ok, lse_ok] = kv_judge("kv_fp8_mla", r);
  CHECK_FALSE((u_ok && lse_ok));
}

// ---- rung (f): a bf16 attention candidate of its own (tiles walked backwards), with mistakes as switches ---------
struct AttnCand {
  formats::Round p_round = formats::Round::nearest_even;
  bool bf16_acc = false;  // O's accumulator rounded to bf16 after every addition
  bool backwards = true;  // tiles from the last to the first (a right reordering)
};
AttnResult attn_candidate(const AttnOperands& a, const AttnCand& k) {
  AttnResult r{std::vector<float>(static_cast<size_t>(a.Lq * a.dv)), std::vector<float>(static_cast<size_t>(a.Lq))};
  const int64_t T = (a.Lk + a.bc - 1) / a.bc;
  for (int64_t i = 0; i < a.Lq; ++i) {
    float m = -INFINITY, l = 0;
    std::vector<float> acc(static_cast<size_t>(a.dv), 0.0f);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t j0 = (k.backwards ? T - 1 - t : t) * a.bc, n = std::min(a.bc, a.Lk - j0);
      std::vector<float> S(static_cast<size_t>(n));
      float mt = m;
      for (int64_t j = 0; j < n; ++j) {
        float dot = 0;
        for (int64_t c = a.d - 1; c >= 0; --c)
          dot += bf16_round(a.q[static_cast<size_t>(i * a.d + c)]) * bf16_round(a.k[static_cast<size_t>((j0 + j) * a.d + c)]);
        S[static_cast<size_t>(j)] = dot * a.sigma;
        mt = std::max(mt, S[static_cast<size_t>(j)]);
      }
      const float alpha = m == -INFINITY ? 0.0f : std::exp(m - mt);
      float rowsum = 0;
      for (auto& o : acc) o = k.bf16_acc ? bf16_round(o * alpha) : o * alpha;
      for (int64_t j = 0; j < n; ++j) {
        const float p = std::exp(S[static_cast<size_t>(j)] - mt);
        rowsum += p;
        for (int64_t c = 0; c < a.dv; ++c) {
          const float vb = bf16_round(a.v[static_cast<size_t>((j0 + j) * a.dv + c)]);
          const float o = acc[static_cast<size_t>(c)] + bf16_round(p, k.p_round) * vb;
          acc[static_cast<size_t>(c)] = k.bf16_acc ? bf16_round(o) : o;
        }
      }
      l = alpha * l + rowsum;
      m = mt;
    }
    for (int64_t c = 0; c < a.dv; ++c) r.o[static_cast<size_t>(i * a.dv + c)] = acc[static_cast<size_t>(c)] / l;
    r.lse[static_cast<size_t>(i)] = m + std::log(l);
  }
  return r;
}
std::pair<bool, bool> attn_judge(const std::string& name, const AttnCand& k) {
  const Loaded c = load_kv(name);
  const AttnOperands a = attn_operands(c.cf.inputs, c.recipe);
  const AttnResult r = attn_candidate(a, k);
  return {passes(c, "o", npy_of(r.o, {a.Lq, a.dv})), passes(c, "lse", npy_of(r.lse, {a.Lq}))};
}

TEST_CASE("07 rung (f): the reference rung and a reordered candidate pass every golden") {
  for (const char* name : {"attn_bf16_k1024", "attn_bf16_ptrunc", "attn_bf16_q5_k113"}) {
    CAPTURE(name);
    const Loaded c = load_kv(name);
    const Tensors out = run_rung(contract("07-precision"), registry().find("07-precision", "ref", "attn_bf16"),
                                 c.cf.inputs, c.cf.params, DType::F4);
    CHECK(passes(c, "o", out.at("o")));
    CHECK(passes(c, "lse", out.at("lse")));
    CHECK(attn_judge(name, {}) == std::pair{true, true});
    // The oracle itself (float64, unrounded) is right within the bound too.
    CHECK(passes(c, "o", c.cf.expected.at("o")));
  }
}

TEST_CASE("07 rung (f): P truncated where RNE is declared, O accumulated in bf16 where float32 is declared: fail") {
  AttnCand rtz;
  rtz.p_round = formats::Round::toward_zero;
  rtz.backwards = false;  // the max key first, as the case places it: every P then lies just above 1/2
  CHECK_FALSE(attn_judge("attn_bf16_ptrunc", rtz).first);
  AttnCand acc;
  acc.bf16_acc = true;
  CHECK_FALSE(attn_judge("attn_bf16_k1024", acc).first);
}

TEST_CASE("07 rungs (e), (f): a recipe's inputs, outputs and params are refused elsewhere, naming them") {
  const Loaded c = load_kv("attn_bf16_q5_k113");
  const Contract& ct = contract("07-precision");
  nlohmann::json p = c.cf.params;
  p["bc"] = 0;
  CHECK_THROWS_WITH_AS(run_oracle(ct, c.cf.inputs, p), doctest::Contains("params.bc"), Error);
  p = {{"recipe", "a8w8"}, {"softmax_scale", 0.1}};
  CHECK_THROWS_WITH_AS(parse_recipe(p), doctest::Contains("params.softmax_scale"), Error);
  Tensors in = c.cf.inputs;
  in.erase("v");
  CHECK_THROWS_WITH_AS(run_oracle(ct, in, c.cf.params), doctest::Contains("input v is missing"), Error);
  in = c.cf.inputs;
  in["x"] = in.at("q");
  CHECK_THROWS_WITH_AS(run_oracle(ct, in, c.cf.params), doctest::Contains("input x does not belong"), Error);
}
