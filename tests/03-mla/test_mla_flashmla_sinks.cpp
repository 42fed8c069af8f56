// tests/03-mla/test_mla_flashmla_sinks.cpp -- FlashMLA's sparse extras (ladder/03-mla/flashmla.hpp): a lonely query
// token (every index invalid) gets o = 0 and lse = +inf, judged exactly; topk_length (only the leftmost entries read);
// attn_sink (o scaled by e^lse / (e^lse + e^sink), lse unchanged). The semantics are pinned against independent
// computations (the same indices with the tail set to -1; the sink's factor applied by hand), the flash_mla rung passes
// (the sink merged as a split of its own), and the planted bugs fail: a lonely token's o NaN and lse -inf, topk_length
// ignored, the sink ignored.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "ladder/03-mla/flashmla.hpp"
#include "ladder/core/contract.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

const Contract& dec() { return contract(kFlashMlaLayout); }
const Contract& pre() { return contract(kFlashMlaSparsePrefillLayout); }
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case decode_case(bool fp8, bool lonely, bool topk_length, bool sink) {
  FlashMlaSpec s;
  s.h_q = 4, s.kv_fp8 = fp8, s.topk = 40, s.lonely = lonely, s.topk_length = topk_length, s.sink = sink;
  s.d = fp8 ? 272 : 80, s.dv = fp8 ? 256 : 64;
  Case c{flashmla_inputs(s), flashmla_params(s), {}};
  c.expected = run_oracle(dec(), c.in, c.params);
  return c;
}

Case prefill_case(bool lonely, bool topk_length, bool sink) {
  FlashMlaPrefillSpec s;
  s.s_q = 5, s.s_kv = 150, s.topk = 24, s.h_q = 4, s.d = 80, s.dv = 64;
  s.lonely = lonely, s.topk_length = topk_length, s.sink = sink;
  Case c{flashmla_prefill_inputs(s), flashmla_prefill_params(s), {}};
  c.expected = run_oracle(pre(), c.in, c.params);
  return c;
}

CheckReport judge(const Contract& k, const Case& c, const std::string& name, const NpyData& d) {
  return check(k, c.in, c.params, c.expected, name, d);
}

bool passes(const Contract& k, const Case& c, const Tensors& cand) {
  bool all = true;
  for (const auto& [name, d] : cand) {
    const CheckReport r = judge(k, c, name, d);
    INFO(k.stage, " ", name, ": ", r.text);
    all = all && r.pass;
  }
  return all;
}

}  // namespace

TEST_CASE("flashmla lonely token (decode, float32 and FP8): o exactly 0, lse exactly +inf; NaN / -inf / tiny o fail") {
  for (const bool fp8 : {false, true}) {
    const Case c = decode_case(fp8, true, false, false);
    const Array<double> o = npy_as_double(c.expected.at("o")), lse = npy_as_double(c.expected.at("lse"));
    const int64_t H = 4, R = o.shape[3], S = lse.shape[2];
    for (int64_t i = 0; i < H * R; ++i) CHECK(o.data[i] == 0.0);  // token (0, 0): its first H x R values
    for (int64_t h = 0; h < H; ++h) {
      CHECK(lse.data[h * S] == kInf);              // lse [b, h_q, s_q]: [0, h, 0]
      CHECK(std::isfinite(lse.data[h * S + 1]));   // token (0, 1) attends as usual
    }
    const Tensors good = flashmla_run_flash(c.in, c.params, 1);
    CHECK(passes(dec(), c, good));
    CHECK(judge(dec(), c, "o", good.at("o")).metrics.at("flashmla_cos_diff") < 1e-6);
    const Tensors bad = flashmla_run_flash(c.in, c.params, 1, FlashMlaBug::lonely_nan);
    for (const char* name : {"o", "lse"}) {
      const CheckReport r = judge(dec(), c, name, bad.at(name));
      INFO(fp8, " lonely_nan ", name, ": ", r.text);
      CHECK_FALSE(r.pass);
      CHECK(r.text.find("inf") != std::string::npos);
    }
    Array<float> tiny = from_npy<float>(good.at("o"), "o"), fin = from_npy<float>(good.at("lse"), "lse");
    tiny.data[5] = 1e-30f;  // exact: the lonely token's slice has scale 0, so tolerance 0
    fin.data[0] = 80.0f;    // a large finite lse where +inf is promised
    CHECK_FALSE(judge(dec(), c, "o", to_npy(tiny)).pass);
    CHECK_FALSE(judge(dec(), c, "lse", to_npy(fin)).pass);
  }
}

TEST_CASE("flashmla lonely token (sparse prefill): out 0, max_logits -inf, lse +inf; the NaN port fails") {
  const Case c = prefill_case(true, false, false);
  const Array<double> mx = npy_as_double(c.expected.at("max_logits")), lse = npy_as_double(c.expected.at("lse"));
  for (int64_t h = 0; h < 4; ++h) CHECK((mx.data[h] == -kInf && lse.data[h] == kInf && std::isfinite(lse.data[4 + h])));
  CHECK(passes(pre(), c, flashmla_prefill_run_flash(c.in, c.params, 1)));
  const Tensors bad = flashmla_prefill_run_flash(c.in, c.params, 1, FlashMlaBug::lonely_nan);
  CHECK_FALSE(judge(pre(), c, "out", bad.at("out")).pass);
  CHECK_FALSE(judge(pre(), c, "lse", bad.at("lse")).pass);
}

TEST_CASE("flashmla topk_length: entries past it are not read (= the tail set to -1); ignoring it fails") {
  const Case c = decode_case(false, false, true, false);
  const Array<int64_t> len = npy_as_int64(c.in.at("topk_length"), "topk_length");
  CHECK(len.shape == std::vector<int64_t>{2});
  CHECK(len.data[0] < 40);
  Array<int64_t> idx = npy_as_int64(c.in.at("indices"), "indices");
  for (int64_t n = 0; n < 2 * 2; ++n)
    for (int64_t k = len.data[n / 2]; k < 40; ++k) idx.data[n * 40 + k] = -1;
  Tensors cut = c.in;
  cut.erase("topk_length");
  cut["indices"] = to_npy(idx);
  const Tensors e = run_oracle(dec(), cut, c.params);
  CHECK(e.at("o").bytes == c.expected.at("o").bytes);
  CHECK(e.at("lse").bytes == c.expected.at("lse").bytes);
  CHECK(passes(dec(), c, flashmla_run_flash(c.in, c.params, 1)));
  const CheckReport r = judge(dec(), c, "o", flashmla_run_flash(c.in, c.params, 1, FlashMlaBug::topk_length_ignored).at("o"));
  INFO(r.text);
  CHECK_FALSE(r.pass);
  Tensors over = c.in;
  over["topk_length"] = to_npy(Array<int32_t>({2}, 41));
  CHECK_THROWS_WITH_AS(run_oracle(dec(), over, c.params), doctest::Contains("input topk_length[0] = 41"), Error);
  // Prefill: topk_length [s_q].
  const Case p = prefill_case(false, true, false);
  CHECK(p.in.at("topk_length").shape == std::vector<int64_t>{5});
  CHECK(passes(pre(), p, flashmla_prefill_run_flash(p.in, p.params, 1)));
  CHECK_FALSE(judge(pre(), p, "out", flashmla_prefill_run_flash(p.in, p.params, 1, FlashMlaBug::topk_length_ignored).at("out")).pass);
  Tensors dense = c.in;
  dense.erase("indices");
  CHECK_THROWS_WITH_AS(run_oracle(dec(), dense, c.params), doctest::Contains("need input indices"), Error);
}

TEST_CASE("flashmla attn_sink: o x e^lse / (e^lse + e^sink), lse unchanged; -inf no effect, +inf o = 0; ignoring fails") {
  for (const bool prefill : {false, true}) {
    const Case c = prefill ? prefill_case(false, false, true) : decode_case(false, false, false, true);
    Tensors plain_in = c.in;
    plain_in.erase("attn_sink");
    const Contract& k = prefill ? pre() : dec();
    const char* oname = prefill ? "out" : "o";
    const Tensors plain = run_oracle(k, plain_in, c.params);
    CHECK(plain.at("lse").bytes == c.expected.at("lse").bytes);
    const Array<float> sink = from_npy<float>(c.in.at("attn_sink"), "attn_sink");
    CHECK((sink.data[0] == -INFINITY && sink.data[1] == INFINITY));
    const Array<double> o = npy_as_double(c.expected.at(oname)), o0 = npy_as_double(plain.at(oname));
    const Array<double> lse = npy_as_double(plain.at("lse"));
    const int64_t H = 4, R = o.shape.back(), S = prefill ? 5 : 2;
    for (int64_t h = 0; h < H; ++h) {  // token 0 (decode: (0, 0)); lse's layout: prefill [s_q, h], decode [b, h, s_q]
      const double l = prefill ? lse.data[h] * std::numbers::ln2 : lse.data[h * S];
      const double f = 1.0 / (1.0 + std::exp(static_cast<double>(sink.data[h]) - l));
      for (int64_t r = 0; r < R; r += 7) {
        const double want = o0.data[h * R + r] * f;
        CHECK(o.data[h * R + r] == doctest::Approx(want).epsilon(1e-12));
        if (h == 0) CHECK(o.data[h * R + r] == o0.data[h * R + r]);
        if (h == 1) CHECK(o.data[h * R + r] == 0.0);
      }
      if (h >= 2) CHECK((f > 0.01 && f < 0.99));  // the sink matters in this case
    }
    const Tensors good = prefill ? flashmla_prefill_run_flash(c.in, c.params, 1) : flashmla_run_flash(c.in, c.params, 1);
    CHECK(passes(k, c, good));
    const Tensors bad = prefill ? flashmla_prefill_run_flash(c.in, c.params, 1, FlashMlaBug::sink_ignored)
                                : flashmla_run_flash(c.in, c.params, 1, FlashMlaBug::sink_ignored);
    const CheckReport r = judge(k, c, oname, bad.at(oname));
    INFO(r.text);
    CHECK_FALSE(r.pass);
    CHECK(judge(k, c, "lse", bad.at("lse")).pass);  // the sink never touches lse
    Tensors nan = c.in;
    Array<float> ns = sink;
    ns.data[2] = std::numeric_limits<float>::quiet_NaN();
    nan["attn_sink"] = to_npy(ns);
    CHECK_THROWS_WITH_AS(run_oracle(k, nan, c.params), doctest::Contains("input attn_sink[2] is NaN"), Error);
  }
}
