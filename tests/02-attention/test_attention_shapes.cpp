// tests/02-attention/test_attention_shapes.cpp -- the shapes only the oracle computes (problem.hpp): GQA / MQA,
// d_v != d, sliding windows, per-sequence key lengths, forward-only cases. The committed goldens against an
// independent brute force written from FlashAttention's documented conventions; the contract (what `ladder
// check` and Python's ladder.check run) passing the oracle's float32 cast and failing the wrong candidates an
// engineer's kernel would produce (kv head h % H_kv, a window off by one, seqlens ignored, scale 1/sqrt(d_v));
// every other rung refusing these shapes by name.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "golden_util.hpp"
#include "ladder/02-attention/attention.hpp"
#include "ladder/02-attention/golden.hpp"
#include "ladder/02-attention/golden_cases.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

using namespace ladder;
using namespace ladder::attention;

namespace {

// The conventions, written here from their sources rather than from problem.hpp:
//   flash_attn_func: "heads of Q 0, 1, 2 attend to head 0 of K, V; 3, 4, 5 to head 1" (kv = h / (H / H_kv));
//   window_size (left, right): "query i attends keys [i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q
//   + right] inclusive", -1 unbounded, causal = right 0; flash_attn_with_kvcache: seqlen_k = cache_seqlens[b].
struct Conv {
  std::function<int64_t(int64_t h)> kv;
  int64_t left = -1, right = -1;
  bool use_seqlens = true;
  double scale = 0;  // 0: the case's
};

Conv rule_of(const Problem& p) {
  const int64_t G = p.H / p.kv_heads();
  return Conv{[G](int64_t h) { return h / G; }, p.window_left, p.causal ? 0 : p.window_right, true, p.scale};
}

struct Out {
  Array<double> O, L, m, D, dQ, dK, dV;
};

// Plain loops in double, one query row at a time.
Out brute(const Problem& p, const Conv& r, const Array<float>& Q, const Array<float>& K, const Array<float>& V,
          const Array<float>* dO) {
  const int64_t B = p.B, H = p.H, Hk = p.kv_heads(), Nq = p.Nq, Nk = p.Nk, d = p.d, dv = p.dim_v();
  Out o{Array<double>({B, H, Nq, dv}), Array<double>({B, H, Nq}), Array<double>({B, H, Nq}),
        Array<double>({B, H, Nq}),     Array<double>({B, H, Nq, d}), Array<double>({B, Hk, Nk, d}),
        Array<double>({B, Hk, Nk, dv})};
  for (auto* a : {&o.O, &o.D, &o.dQ, &o.dK, &o.dV}) std::fill(a->data.begin(), a->data.end(), 0.0);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> s(static_cast<size_t>(Nk)), pr(s.size()), dp(s.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Nq; ++i) {
        const int64_t n = r.use_seqlens && !p.seqlens.empty() ? p.seqlens[b] : Nk, kvh = r.kv(h);
        const int64_t q = ((b * H + h) * Nq + i), kv0 = (b * Hk + kvh) * Nk;
        double mx = -inf;
        for (int64_t j = 0; j < Nk; ++j) {
          const bool vis = j < n && (r.right < 0 || j <= i + n - Nq + r.right) && (r.left < 0 || j >= i + n - Nq - r.left);
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += double(Q.data[q * d + c]) * double(K.data[(kv0 + j) * d + c]);
          s[j] = vis ? r.scale * dot : -inf;
          mx = std::max(mx, s[j]);
        }
        o.m.data[q] = mx;
        if (mx == -inf) {
          o.L.data[q] = -inf;
          continue;  // O, D, dQ rows 0; nothing to dK, dV
        }
        double sum = 0;
        for (int64_t j = 0; j < Nk; ++j) sum += (pr[j] = std::exp(s[j] - mx));
        o.L.data[q] = mx + std::log(sum);
        for (int64_t j = 0; j < Nk; ++j) {
          pr[j] /= sum;
          for (int64_t c = 0; c < dv; ++c) o.O.data[q * dv + c] += pr[j] * double(V.data[(kv0 + j) * dv + c]);
        }
        if (!dO) continue;
        double D = 0;
        for (int64_t j = 0; j < Nk; ++j) {
          dp[j] = 0;
          for (int64_t c = 0; c < dv; ++c) dp[j] += double(dO->data[q * dv + c]) * double(V.data[(kv0 + j) * dv + c]);
          D += pr[j] * dp[j];
        }
        o.D.data[q] = D;
        for (int64_t j = 0; j < Nk; ++j) {
          const double ds = pr[j] * (dp[j] - D);
          for (int64_t c = 0; c < d; ++c) {
            o.dQ.data[q * d + c] += r.scale * ds * double(K.data[(kv0 + j) * d + c]);
            o.dK.data[(kv0 + j) * d + c] += r.scale * ds * double(Q.data[q * d + c]);
          }
          for (int64_t c = 0; c < dv; ++c) o.dV.data[(kv0 + j) * dv + c] += pr[j] * double(dO->data[q * dv + c]);
        }
      }
  return o;
}

std::vector<std::string> new_shape_cases() {
  std::vector<std::string> r;
  for (const std::string& n : golden_case_names())
    if (!golden_case(n).p.plain() || !golden_case(n).backward) r.push_back(n);
  return r;
}

const Array<double>& part(const Out& o, const std::string& name) {
  if (name == "O") return o.O;
  if (name == "L") return o.L;
  if (name == "m") return o.m;
  if (name == "D") return o.D;
  if (name == "dQ") return o.dQ;
  if (name == "dK") return o.dK;
  return o.dV;
}

struct Loaded {
  const Contract& c = contract(kStage);
  CaseFolder cf;
  Problem p;
  Array<float> Q, K, V, dO;
  bool backward;
  explicit Loaded(const std::string& name)
      : cf(read_case(c, test::golden_dir(kStage) / name)), p(golden_case(name).p),
        Q(from_npy<float>(cf.inputs.at("Q"), "Q")), K(from_npy<float>(cf.inputs.at("K"), "K")),
        V(from_npy<float>(cf.inputs.at("V"), "V")), backward(cf.inputs.count("dO") > 0) {
    if (backward) dO = from_npy<float>(cf.inputs.at("dO"), "dO");
  }
  Out run(const Conv& r) const { return brute(p, r, Q, K, V, backward ? &dO : nullptr); }
  CheckReport judge(const std::string& out, const Array<double>& cand) const {
    return check(c, cf.inputs, cf.params, cf.expected, out, to_npy(cand.cast<float>()));
  }
};

const char* kForward[] = {"O", "L", "m"};
const char* kAll[] = {"O", "L", "m", "D", "dQ", "dK", "dV"};

}  // namespace

TEST_CASE("new-shape goldens: GQA / MQA, d_v != d, windows, seqlens, forward-only are all present") {
  bool gqa = false, mqa = false, dv = false, window = false, seqlens = false, fwd = false, empty_row = false;
  for (const std::string& n : new_shape_cases()) {
    const GoldenCase& g = golden_case(n);
    gqa = gqa || (g.p.kv_heads() > 1 && g.p.kv_heads() < g.p.H);
    mqa = mqa || (g.p.kv_heads() == 1 && g.p.H > 1);
    dv = dv || g.p.dim_v() != g.p.d;
    window = window || g.p.window_left >= 0;
    seqlens = seqlens || !g.p.seqlens.empty();
    fwd = fwd || !g.backward;
    for (int64_t x : g.p.seqlens) empty_row = empty_row || x == 0;
  }
  CHECK((gqa && mqa && dv && window && seqlens && fwd && empty_row));
  CHECK(golden_case("dqk192_dv128_q17_k17_causal").p.d == 192);
  CHECK(golden_case("dqk192_dv128_q17_k17_causal").p.dim_v() == 128);
}

TEST_CASE("new-shape goldens equal an independent brute force of FlashAttention's conventions") {
  for (const std::string& name : new_shape_cases()) {
    CAPTURE(name);
    const Loaded k(name);
    const Out o = k.run(rule_of(k.p));
    for (const char* out : k.backward ? std::vector<const char*>(std::begin(kAll), std::end(kAll))
                                      : std::vector<const char*>(std::begin(kForward), std::end(kForward))) {
      CAPTURE(out);
      const Array<double> e = npy_as_double(k.cf.expected.at(out));
      const Array<double>& b = part(o, out);
      REQUIRE(e.shape == b.shape);
      double scale = 0, err = 0;
      for (int64_t i = 0; i < e.size(); ++i) {
        if (!std::isfinite(e.data[i]) || !std::isfinite(b.data[i])) {
          CHECK(e.data[i] == b.data[i]);  // fully masked rows: -inf in both
          continue;
        }
        scale = std::max(scale, std::abs(e.data[i]));
        err = std::max(err, std::abs(e.data[i] - b.data[i]));
      }
      CHECK(err <= 1e-12 * std::max(1.0, scale));
    }
    if (!k.backward) CHECK(k.cf.expected.size() == 3);
  }
}

TEST_CASE("contract on the new shapes: the oracle's float32 cast of every output passes") {
  for (const std::string& name : new_shape_cases()) {
    CAPTURE(name);
    const Loaded k(name);
    for (const auto& [out, e] : k.cf.expected) {
      CAPTURE(out);
      const CheckReport r = k.judge(out, npy_as_double(e));
      CHECK_MESSAGE(r.pass, r.text);
    }
  }
}

TEST_CASE("contract on the new shapes: wrong kernels fail (kv head h % H_kv, window off by one, seqlens ignored, "
          "scale 1/sqrt(d_v))") {
  auto fails = [](const Loaded& k, const Conv& r, std::initializer_list<const char*> outs) {
    const Out o = k.run(r);
    for (const char* out : outs) {
      if (!k.cf.expected.count(out)) continue;
      CAPTURE(out);
      const CheckReport rep = k.judge(out, part(o, out));
      CHECK_FALSE_MESSAGE(rep.pass, rep.text);
    }
  };
  {  // GQA with the kv head as h % H_kv (interleaved groups) instead of h / (H / H_kv)
    const Loaded k("gqa_h4_kv2_q19_k23_d32_causal");
    Conv r = rule_of(k.p);
    r.kv = [&](int64_t h) { return h % k.p.kv_heads(); };
    fails(k, r, {"O", "L", "dQ", "dK", "dV"});
  }
  {
    const Loaded k("fwd_gqa_h8_kv2_q3_k50_d64_dv32");
    Conv r = rule_of(k.p);
    r.kv = [&](int64_t h) { return h % k.p.kv_heads(); };
    fails(k, r, {"O", "L"});
  }
  for (const std::string name : {"window_l16_r0_q64_k80_d16", "window_l5_r3_q50_k40_d16_mqa"}) {
    CAPTURE(name);
    const Loaded k(name);
    for (int side = 0; side < 2; ++side)
      for (int delta : {-1, 1}) {
        CAPTURE(side);
        CAPTURE(delta);
        Conv r = rule_of(k.p);
        (side ? r.right : r.left) += delta;
        fails(k, r, {"O", "L", "dQ", "dK", "dV"});
      }
  }
  for (const std::string name : {"seqlens_q1_k48_d16_gqa", "seqlens_q6_k40_d16_causal"}) {
    CAPTURE(name);
    const Loaded k(name);
    Conv r = rule_of(k.p);
    r.use_seqlens = false;  // every row attends all Nk keys (or aligns its mask to Nk)
    fails(k, r, {"O", "L", "dK"});
  }
  {  // the MLA-prefill shape scaled by 1/sqrt(d_v) instead of 1/sqrt(d_qk)
    const Loaded k("dqk192_dv128_q17_k17_causal");
    Conv r = rule_of(k.p);
    r.scale = 1 / std::sqrt(128.0);
    fails(k, r, {"O", "L", "dQ"});
  }
}

TEST_CASE("forward-only case: O, L, m checked; a backward output or rung is a clear error") {
  const Loaded k("fwd_gqa_h8_kv2_q3_k50_d64_dv32");
  REQUIRE_FALSE(k.backward);
  CHECK(k.judge("O", npy_as_double(k.cf.expected.at("O"))).pass);
  for (const char* out : {"dQ", "dK", "dV", "D"}) {
    CAPTURE(out);
    CHECK_THROWS_WITH_AS(k.judge(out, npy_as_double(k.cf.expected.at("O"))), doctest::Contains("needs input dO"),
                         Error);
  }
  const Rung& bwd = registry().find(kStage, "ref", "backward_naive");
  CHECK_THROWS_WITH_AS(run_rung(k.c, bwd, k.cf.inputs, k.cf.params, DType::F4), doctest::Contains("needs input dO"),
                       Error);
  // The oracle of the same inputs without dO gives the forward outputs only.
  const Tensors out = run_oracle(k.c, k.cf.inputs, k.cf.params);
  CHECK(out.size() == 3);
  CHECK(out.at("O").bytes == k.cf.expected.at("O").bytes);
}

TEST_CASE("rungs other than naive refuse the new shapes, naming the constraint") {
  const Contract& c = contract(kStage);
  const std::pair<const char*, const char*> cases[] = {
      {"gqa_h4_kv2_q19_k23_d32_causal", "H_q = 4, H_kv = 2 violates H_q == H_kv"},
      {"dqk192_dv128_q17_k17_causal", "d = 192, d_v = 128 violates d_v == d"},
      {"window_l16_r0_q64_k80_d16", "window_size = (16, 0) violates no window"},
      {"seqlens_q6_k40_d16_causal", "seqlens given violates no per-sequence lengths"}};
  for (const auto& [name, msg] : cases) {
    CAPTURE(name);
    const CaseFolder cf = read_case(c, test::golden_dir(kStage) / name);
    for (const char* id : {"flash", "tiled", "backward_recompute"})
      for (const std::string backend : {"ref", "cuda"}) {
        if (backend == "cuda" && std::string(id) != "tiled") continue;  // SIMT is slow; one CUDA rung suffices
        CAPTURE(id);
        CAPTURE(backend);
        const Rung& r = registry().find(kStage, backend, id);
        CHECK_THROWS_WITH_AS(run_rung(c, r, cf.inputs, cf.params, DType::F4), doctest::Contains(msg), Error);
      }
    const Rung& naive = registry().find(kStage, "ref", "naive");
    CHECK(run_rung(c, naive, cf.inputs, cf.params, DType::F4).count("O") == 1);
  }
}

TEST_CASE("bad new-shape inputs are named: H_q % H_kv, window_size, seqlens") {
  const Contract& c = contract(kStage);
  const CaseFolder cf = read_case(c, test::golden_dir(kStage) / "seqlens_q6_k40_d16_causal");
  Tensors in = cf.inputs;
  nlohmann::json params = cf.params;
  params["window_size"] = {-2, 0};
  CHECK_THROWS_WITH_AS(run_oracle(c, in, params), doctest::Contains("window_size = (-2, 0) violates"), Error);
  params["window_size"] = {4, 2};  // causal is right = 0
  CHECK_THROWS_WITH_AS(run_oracle(c, in, params), doctest::Contains("causal with window_size right = 2"), Error);
  params["window_size"] = "wide";
  CHECK_THROWS_WITH_AS(run_oracle(c, in, params), doctest::Contains("param window_size"), Error);
  Array<int64_t> n({2});
  n.data = {41, 3};
  in["seqlens"] = to_npy(n);
  CHECK_THROWS_WITH_AS(run_oracle(c, in, cf.params), doctest::Contains("seqlens[0] = 41 violates"), Error);
  Tensors gqa = read_case(c, test::golden_dir(kStage) / "mqa_h3_kv1_q29_k29_d32_causal").inputs;
  Array<float> K({1, 2, 29, 32});
  gqa["K"] = gqa["V"] = to_npy(K);
  CHECK_THROWS_WITH_AS(run_oracle(c, gqa, {}), doctest::Contains("violates H_q % H_kv == 0"), Error);
}

TEST_CASE("describe 02-attention names the new shapes") {
  const std::string d = describe(contract(kStage));
  for (const char* s : {"[B, H_kv, Nk, d]", "[B, H_kv, Nk, d_v]", "h / (H_q / H_kv)", "window_size", "seqlens",
                        "forward-only", "d_v"})
    CHECK_MESSAGE(d.find(s) != std::string::npos, s);
}
