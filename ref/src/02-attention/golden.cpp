// ref/src/02-attention/golden.cpp -- stage 02 golden cases (data/golden/02-attention/<case>/).
//
// A covering set rather than the cross product: every sequence length of {1, 97, 113, 239, 1023, 1024,
// 1025} appears as Nq and as Nk, every head dim of {32, 59, 64, 111, 128}, causal with Nq < Nk, = Nk
// and > Nk (fully masked rows), one key only, one query only (decode), B x H > 1, a peaky case.
// See attention/golden.hpp for what is stored.
#include <map>

#include "ladder/02-attention/attention.hpp"
#include "ladder/02-attention/golden.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/02-attention/golden_cases.hpp"

namespace ladder::attention {
namespace {

const std::vector<GoldenCase>& cases() {
  auto c = [](const char* name, int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, bool causal, double q_std,
              uint64_t seed, bool sampled, const char* what) {
    return GoldenCase{name, Problem::make(B, H, Nq, Nk, d, causal), q_std, seed, sampled, what};
  };
  // Shapes beyond Problem::make: H_kv kv heads, value dim dv; a window (left, right); per-row key lengths.
  auto shape = [](int64_t B, int64_t H, int64_t H_kv, int64_t Nq, int64_t Nk, int64_t d, int64_t dv, bool causal) {
    Problem p = Problem::make(B, H, Nq, Nk, d, causal);
    p.H_kv = H_kv, p.dv = dv;
    return p;
  };
  auto window = [](Problem p, int64_t left, int64_t right) {
    p.window_left = left, p.window_right = right;
    return p;
  };
  auto lengths = [](Problem p, std::vector<int64_t> n) {
    p.seqlens = std::move(n);
    return p;
  };
  auto x = [](const char* name, Problem p, uint64_t seed, bool backward, const char* what) {
    return GoldenCase{name, std::move(p), 1, seed, false, what, backward};
  };
  static const std::vector<GoldenCase> all = {
      c("q1_k1_d32", 1, 2, 1, 1, 32, false, 1, 201, false, "one query, one key: P = 1, O = V, dQ = dK = 0"),
      c("q97_k113_d32_causal", 1, 2, 97, 113, 32, true, 1, 202, false, "Nq < Nk: row i sees keys j <= i + 16"),
      c("q97_k97_d64_peaky", 1, 1, 97, 97, 64, false, 3, 203, false, "Q ~ N(0, 9): peaky rows, the max moves often"),
      c("q113_k97_d59_causal", 2, 1, 113, 97, 59, true, 1, 204, true, "Nq > Nk: rows 0..15 see no key (O = 0)"),
      c("q239_k1_d64_causal", 2, 1, 239, 1, 64, true, 1, 205, true, "one key: only the last row sees it"),
      c("q1_k239_d111_causal", 2, 2, 1, 239, 111, true, 1, 206, true, "decode: the one query sees all 239 keys"),
      c("q239_k239_d128", 1, 2, 239, 239, 128, false, 1, 207, true, "square, head dim 128"),
      c("q1023_k1024_d59_causal", 1, 2, 1023, 1024, 59, true, 1, 208, true, "FlashAttention's test shape"),
      c("q1024_k1024_d64", 1, 1, 1024, 1024, 64, false, 1, 209, true, "GPT-2 medium's head: N = 1024, d = 64"),
      c("q1025_k1025_d111_causal", 1, 1, 1025, 1025, 111, true, 1, 210, true, "one past a power of two"),
      c("q1025_k1023_d128", 1, 1, 1025, 1023, 128, false, 1, 211, true, "Nq > Nk, no mask"),
      // The shapes only the oracle computes (problem.hpp): rungs naive and backward_naive (or naive alone).
      x("gqa_h4_kv2_q19_k23_d32_causal", shape(2, 4, 2, 19, 23, 32, 32, true), 212, true,
        "GQA: query heads 0, 1 read kv head 0 and 2, 3 kv head 1; dK, dV summed over each pair"),
      x("mqa_h3_kv1_q29_k29_d32_causal", shape(1, 3, 1, 29, 29, 32, 32, true), 213, true,
        "MQA: three query heads share one kv head"),
      x("mqa_decode_h8_kv1_q1_k77_d32", shape(2, 8, 1, 1, 77, 32, 32, false), 214, true,
        "MQA decode step: one query per head, 77 keys shared by 8 heads"),
      x("dqk192_dv128_q17_k17_causal", shape(1, 2, 2, 17, 17, 192, 128, true), 215, true,
        "d_v != d_qk: MLA prefill's per-head shape, d_qk = 192 (128 nope + 64 rope), d_v = 128"),
      x("fwd_gqa_h8_kv2_q3_k50_d64_dv32", shape(1, 8, 2, 3, 50, 64, 32, true), 216, false,
        "forward-only (no dO; O, L, m): GQA, d_v = 32, three queries of a decode with speculation"),
      x("window_l16_r0_q64_k80_d16", window(shape(1, 2, 2, 64, 80, 16, 16, false), 16, 0), 217, true,
        "sliding window (16, 0), Nk - Nq = 16: query i sees keys i .. i + 16 (causal, 16 keys of history)"),
      x("window_l5_r3_q50_k40_d16_mqa", window(shape(2, 2, 1, 50, 40, 16, 16, false), 5, 3), 218, true,
        "window (5, 3), Nq > Nk: query i sees keys i - 15 .. i - 7, rows 0..6 none; MQA"),
      x("seqlens_q1_k48_d16_gqa", lengths(shape(3, 4, 2, 1, 48, 16, 16, false), {48, 17, 0}), 219, true,
        "decode with cache_seqlens [48, 17, 0]: batch row 1 sees keys 0..16, row 2 none (O = 0, L = -inf)"),
      x("seqlens_q6_k40_d16_causal", lengths(shape(2, 2, 2, 6, 40, 16, 16, true), {40, 3}), 220, true,
        "causal prefill chunk with seqlens [40, 3]: row b = 1 aligned to 3 keys, queries 0..2 see none"),
  };
  return all;
}

Array<float> draws(Rng& rng, const Shape& s, double sd) {
  Array<float> a(s);
  for (auto& v : a.data) v = static_cast<float>(sd * rng.normal());
  return a;
}

template <class T>
double sum_of(const Array<T>& a) {
  double s = 0;
  for (T v : a.data) s += static_cast<double>(v);
  return s;
}

// The listed rows of a [..., n_rows, width] array flattened to rows: [rows.size(), width] (or [rows.size()]).
Array<double> take_rows(const Array<double>& a, const std::vector<int64_t>& rows, bool vector) {
  const int64_t w = vector ? 1 : a.cols();
  Array<double> r(vector ? Shape{static_cast<int64_t>(rows.size())} : Shape{static_cast<int64_t>(rows.size()), w});
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < w; ++j) r.data[i * w + j] = a.data[rows[i] * w + j];
  return r;
}

}  // namespace

std::vector<int64_t> sample_rows(int64_t n) {
  const int64_t R = std::min<int64_t>(16, n);
  std::vector<int64_t> r;
  for (int64_t k = 0; k < R; ++k) r.push_back(R == 1 ? 0 : k * (n - 1) / (R - 1));
  return r;
}

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n;
  for (const auto& c : cases()) n.push_back(c.name);
  return n;
}

const GoldenCase& golden_case(const std::string& name) {
  for (const auto& c : cases())
    if (c.name == name) return c;
  throw Error("02-attention: no golden case '" + name + "'");
}

GoldenInputs golden_inputs(const GoldenCase& c) {
  const Problem& p = c.p;
  Rng rng(c.seed);
  GoldenInputs in;
  in.Q = draws(rng, {p.B, p.H, p.Nq, p.d}, c.q_std);
  in.K = draws(rng, {p.B, p.kv_heads(), p.Nk, p.d}, 1);
  in.V = draws(rng, {p.B, p.kv_heads(), p.Nk, p.dim_v()}, 1);
  if (c.backward) in.dO = draws(rng, {p.B, p.H, p.Nq, p.dim_v()}, 1);
  return in;
}

GoldenOracle golden_oracle(const GoldenCase& c, const GoldenInputs& in) {
  const Array<double> Q = in.Q.cast<double>(), K = in.K.cast<double>(), V = in.V.cast<double>();
  Forward<double> f = run_forward<double>(&naive_forward<double>, c.p, Q, K, V);
  if (!c.backward) return GoldenOracle{f.O, f.L, f.m, {}, {}, {}, {}};
  Grads<double> g = run_backward<double>(&naive_backward<double>, c.p, Q, K, V, f.O, in.dO.cast<double>(), f.L);
  return GoldenOracle{f.O, f.L, f.m, g.D, g.dQ, g.dK, g.dV};
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full) {
  const GoldenCase& c = golden_case(name);
  const Problem& p = c.p;
  const GoldenInputs in = golden_inputs(c);
  const GoldenOracle o = golden_oracle(c, in);
  std::filesystem::create_directories(dir);

  const bool sampled = c.sampled && !full;
  require(!sampled || (p.plain() && c.backward), "02-attention golden {}: a sampled case must be plain", name);
  const nlohmann::json qshape = in.Q.shape, kshape = in.K.shape, lshape = o.L.shape;
  const nlohmann::json vshape = in.V.shape, oshape = o.O.shape;
  nlohmann::json shapes = {{"Q", qshape}, {"K", kshape}, {"V", vshape}, {"O", oshape}, {"L", lshape}, {"m", lshape}};
  if (c.backward)
    shapes.update({{"dO", oshape}, {"D", lshape}, {"dQ", qshape}, {"dK", kshape}, {"dV", vshape}});
  if (!p.seqlens.empty()) shapes["seqlens"] = {p.B};
  nlohmann::json dtypes = {{c.backward ? "inputs (Q, K, V, dO)" : "inputs (Q, K, V)", "<f4"}, {"outputs", "<f8"}};
  if (!p.seqlens.empty()) dtypes["seqlens"] = "<i8";
  // The rungs that compute the case: every rung on a plain problem; otherwise the oracle's naive ones
  // (the others refuse the shape by name, problem.hpp's check_problem).
  std::vector<std::string> rungs{"naive", "flash", "tiled", "backward_naive", "backward_recompute"};
  if (!p.plain()) rungs = c.backward ? std::vector<std::string>{"naive", "backward_naive"} : std::vector<std::string>{"naive"};
  nlohmann::json j = case_manifest(
      kStage, rungs, c.seed, shapes, dtypes, rules_json(contract(kStage), shapes));
  j["case"] = name;
  j["description"] = c.what;
  j["problem"] = {{"B", p.B},           {"H", p.H},
                  {"Nq", p.Nq},         {"Nk", p.Nk},
                  {"d", p.d},           {"scale", p.scale},
                  {"causal", p.causal}, {"causal_rule", "query i attends key j iff j <= i + Nk - Nq"}};
  if (!p.plain() || !c.backward) {
    j["problem"].update({{"H_kv", p.kv_heads()},
                         {"d_v", p.dim_v()},
                         {"kv_head_rule", "query head h reads kv head h / (H / H_kv)"},
                         {"window_size", {p.window_left, p.window_right}},
                         {"window_rule", "key j visible to query i iff i + n - Nq - left <= j <= i + n - Nq + right "
                                         "(n = seqlens[b], or Nk; -1 unbounded; causal: right = 0)"},
                         {"forward_only", !c.backward}});
    if (!p.seqlens.empty()) j["problem"]["seqlens"] = p.seqlens;
  }
  j["oracle"] = "naive_forward<double> and naive_backward<double> of the float32 inputs";
  j["input"] = nlohmann::json{{"generator", c.backward ? "ladder::Rng(seed).normal(), in the order Q, K, V, dO, cast to float32"
                                                       : "ladder::Rng(seed).normal(), in the order Q, K, V, cast to float32"},
                              {"q_std", c.q_std}};
  if (sampled) {
    const std::vector<int64_t> qr = sample_rows(p.heads() * p.Nq), kr = sample_rows(p.heads() * p.Nk);
    Array<int64_t> qi({static_cast<int64_t>(qr.size())}), ki({static_cast<int64_t>(kr.size())});
    qi.data = qr;
    ki.data = kr;
    save_npy(dir / "q_rows.npy", qi);
    save_npy(dir / "k_rows.npy", ki);
    save_npy(dir / "O_rows.npy", take_rows(o.O, qr, false));
    save_npy(dir / "L_rows.npy", take_rows(o.L, qr, true));
    save_npy(dir / "m_rows.npy", take_rows(o.m, qr, true));
    save_npy(dir / "D_rows.npy", take_rows(o.D, qr, true));
    save_npy(dir / "dQ_rows.npy", take_rows(o.dQ, qr, false));
    save_npy(dir / "dK_rows.npy", take_rows(o.dK, kr, false));
    save_npy(dir / "dV_rows.npy", take_rows(o.dV, kr, false));
    j["stored"] = "sample";
    j["input_sums"] = {{"Q", sum_of(in.Q)}, {"K", sum_of(in.K)}, {"V", sum_of(in.V)}, {"dO", sum_of(in.dO)}};
    j["sample"] = "rows q_rows of [B*H*Nq, ...] (O, L, m, D, dQ) and k_rows of [B*H*Nk, d] (dK, dV)";
    j["files"] = {"q_rows.npy", "k_rows.npy",  "O_rows.npy",  "L_rows.npy", "m_rows.npy",
                  "D_rows.npy", "dQ_rows.npy", "dK_rows.npy", "dV_rows.npy"};
  } else {
    std::vector<std::string> files;
    auto save = [&](const char* f, const auto& a) {
      save_npy(dir / f, a);
      files.push_back(f);
    };
    save("Q.npy", in.Q);
    save("K.npy", in.K);
    save("V.npy", in.V);
    if (c.backward) save("dO.npy", in.dO);
    if (!p.seqlens.empty()) {
      Array<int64_t> n({p.B});
      n.data = p.seqlens;
      save("seqlens.npy", n);
    }
    save("O.npy", o.O);
    save("L.npy", o.L);
    save("m.npy", o.m);
    if (c.backward) {
      save("D.npy", o.D);
      save("dQ.npy", o.dQ);
      save("dK.npy", o.dK);
      save("dV.npy", o.dV);
    }
    j["stored"] = "full";
    j["files"] = files;
  }
  j["params"] = {{"causal", p.causal}, {"scale", p.scale}};  // the contract's params (ladder describe 02-attention)
  if (p.window_left >= 0 || p.window_right >= 0) j["params"]["window_size"] = {p.window_left, p.window_right};
  write_json(dir / "case.json", j);
  seal_case(dir);  // digest of every file: `ladder check` refuses a changed folder
}

}  // namespace ladder::attention
