// tests/03-mla/test_mla_flashmla.cpp -- stage 03 in FlashMLA's interface (layout contract "03-mla/flashmla",
// ref/src/03-mla/flashmla.cpp): the oracle vs stage 03's own contract oracle on the same numbers, the num_splits
// contract (no split argument changes the oracle's bytes; the flash_mla rung passes at several split sizes), and
// mutants of real FlashMLA-port bugs that check must reject: a wrong block_table entry, lse in log2 where ln is
// promised, o written [h_q, s_q] into the [s_q, h_q] buffer, the causal flag ignored for s_q > 1.
#include <doctest/doctest.h>

#include <cmath>

#include "ladder/03-mla/flashmla.hpp"
#include "ladder/core/contract.hpp"
#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

const Contract& fc() { return contract(kFlashMlaLayout); }

struct Case {
  FlashMlaSpec spec;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case make(FlashMlaSpec s = {}) {
  s.h_q = 8, s.d = 80, s.dv = 64;  // small dims, the same code paths (d - dv = 16 rope dims)
  Case c{s, flashmla_inputs(s), flashmla_params(s), {}};
  c.expected = run_oracle(fc(), c.in, c.params);
  return c;
}

CheckReport judge(const Case& c, const std::string& out, const NpyData& cand) {
  return check(fc(), c.in, c.params, c.expected, out, cand);
}

bool failed_names(const CheckReport& r, const std::string& what) {
  for (const std::string& f : r.failed)
    if (f.find(what) != std::string::npos) return true;
  return r.text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("flashmla: the layout contract is found by name, and a wrong layout is named") {
  CHECK(fc().stage == "03-mla/flashmla");
  CHECK(fc().outputs.size() == 2);
  CHECK_THROWS_WITH_AS(contract("03-mla/flashmlb"), doctest::Contains("layouts: 03-mla/flashmla"), Error);
}

TEST_CASE("flashmla: the flash_mla rung passes at several split sizes; the oracle ignores num_splits bit for bit") {
  const Case c = make();
  for (const int64_t split_blocks : {1, 2, 3}) {
    const Tensors f = flashmla_run_flash(c.in, c.params, split_blocks);
    for (const char* out : {"o", "lse"}) {
      const CheckReport r = judge(c, out, f.at(out));
      INFO(split_blocks, " ", out, ": ", r.text);
      CHECK(r.pass);
      REQUIRE(r.metrics.count("flashmla_cos_diff"));
      CHECK(r.metrics.at("flashmla_cos_diff") < 1e-10);  // float32 vs fp64: far below FlashMLA's bf16 1e-5
    }
  }
  for (const int splits : {1, 7, 64}) {
    nlohmann::json p = c.params;
    p["num_splits"] = splits;
    const Tensors e = run_oracle(fc(), c.in, p);
    CHECK(e.at("o").bytes == c.expected.at("o").bytes);
    CHECK(e.at("lse").bytes == c.expected.at("lse").bytes);
  }
}

TEST_CASE("flashmla: the cos_diff is FlashMLA's (1 - 2 sum xy / sum(xx + yy))") {
  Array<double> x({3}), y({3});
  x.data = {1, 2, 3}, y.data = {1, 2, 4};
  CHECK(flashmla_cos_diff(x, y) == doctest::Approx(1.0 / 35.0));  // 1 - 2 * 17 / (14 + 21)
  CHECK(flashmla_cos_diff(x, x) == 0.0);
}

TEST_CASE("flashmla: a wrong block_table entry fails") {
  Case c = make();
  Tensors bad = c.in;
  Array<int64_t> t = npy_as_int64(bad.at("block_table"), "block_table");
  Array<int32_t> t32(t.shape);
  for (size_t i = 0; i < t.data.size(); ++i) t32.data[i] = static_cast<int32_t>(t.data[i]);
  const int64_t nb = c.in.at("kcache").shape[0];
  t32.data[1] = static_cast<int32_t>((t32.data[1] + 1) % nb);  // sequence 0's second page points elsewhere
  bad["block_table"] = to_npy(t32);
  const Tensors m = flashmla_run_flash(bad, c.params, 4);
  const CheckReport r = judge(c, "o", m.at("o"));
  INFO(r.text);
  CHECK_FALSE(r.pass);
  CHECK(failed_names(r, "max_abs"));
  CHECK(r.metrics.at("flashmla_cos_diff") > 1e-4);
}

TEST_CASE("flashmla: lse in log2 where ln is promised fails") {
  const Case c = make();
  Array<double> lse = npy_as_double(c.expected.at("lse"));
  for (double& v : lse.data) v /= std::log(2.0);
  const CheckReport r = judge(c, "lse", to_npy(lse));
  INFO(r.text);
  CHECK_FALSE(r.pass);
  CHECK(failed_names(r, "max_abs"));
}

TEST_CASE("flashmla: o laid out [b, h_q, s_q, dv] in the [b, s_q, h_q, dv] buffer fails") {
  const Case c = make();
  const Array<double> o = npy_as_double(c.expected.at("o"));
  const int64_t B = o.shape[0], S = o.shape[1], H = o.shape[2], R = o.shape[3];
  Array<double> swapped(o.shape);  // same shape, same bytes per row: only the row order is HND
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t r = 0; r < R; ++r)
          swapped.data[((b * H + h) * S + s) * R + r] = o.data[((b * S + s) * H + h) * R + r];
  const CheckReport r = judge(c, "o", to_npy(swapped));
  INFO(r.text);
  CHECK_FALSE(r.pass);
}

TEST_CASE("flashmla: the causal flag ignored for s_q > 1 fails") {
  const Case c = make();
  nlohmann::json p = c.params;
  p["causal"] = false;
  const Tensors m = flashmla_run_flash(c.in, p, 4);
  for (const char* out : {"o", "lse"}) {
    const CheckReport r = judge(c, out, m.at(out));
    INFO(out, ": ", r.text);
    CHECK_FALSE(r.pass);
  }
}

TEST_CASE("flashmla: bad inputs are refused naming the input") {
  const Case c = make();
  Tensors bad = c.in;
  bad.erase("cache_seqlens");
  CHECK_THROWS_WITH_AS(run_oracle(fc(), bad, c.params), doctest::Contains("cache_seqlens"), Error);
  FlashMlaSpec s;
  s.seqlens = {1, 77};  // causal with s_q = 2: sequence 0 has fewer rows than query tokens
  s.h_q = 8, s.d = 80, s.dv = 64;
  CHECK_THROWS_WITH_AS(run_oracle(fc(), flashmla_inputs(s), flashmla_params(s)),
                       doctest::Contains("cache_seqlens[0] = 1 violates >= s_q = 2"), Error);
}

// The adapter both ways on a committed stage 03 case (s_q_2: MTP, two query tokens per sequence): stage 03's
// inputs laid out as FlashMLA's (q = [q_abs | q^R] per head from h at float64, rounded to float32 as a kernel
// gets it; the blocks as kcache [num_blocks, 64, 1, 576-like]), the FlashMLA-layout oracle run, and its o, lse
// laid back as stage 03's outputs (lse [b, h_q, s_q] -> [N, H]; u = W_O W_UV o^lat, stage 03's absorbed output
// path) judged by stage 03's own contract against stage 03's own oracle (CD from h at float64).
TEST_CASE("flashmla: a stage 03 golden re-laid into FlashMLA's layout and back passes stage 03's check") {
  const Contract& mc = contract(kStage);
  const CaseFolder cf = read_case(mc, test::mla_dir("s_q_2"));
  const Weights<double> W = load_model(test::mla_dir(kModelCase)).cast<double>();
  const Config& cfg = W.cfg;
  const Mat<double> h = from_npy<float>(cf.inputs.at("h"), "h").mat().cast<double>();
  const std::vector<int64_t> q_pos = npy_as_int64(cf.inputs.at("q_pos"), "q_pos").data;
  const std::vector<int64_t> q_lens = npy_as_int64(cf.inputs.at("q_lens"), "q_lens").data;
  const int64_t N = h.rows(), S = q_lens[0], B = N / S, H = cfg.n_heads, R = cfg.kv_lora_rank, D = cfg.kv_dim();
  for (int64_t ql : q_lens) REQUIRE(ql == S);  // FlashMLA's s_q is one per batch
  const Mat<double> cQ = query_latent(W, h);
  const Mat<double> q_abs = absorb_query(W, query_nope(W, cQ)), q_pe = query_rope(W, cQ, q_pos);
  Array<float> q({B, S, H, D});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t k = 0; k < D; ++k)
        q.data[(n * H + hh) * D + k] = static_cast<float>(k < R ? q_abs(n, hh * R + k) : q_pe(n, hh * cfg.qk_rope + k - R));
  NpyData kc = cf.inputs.at("blocks");
  kc.shape = {kc.shape[0], kc.shape[1], 1, kc.shape[2]};
  const Tensors in{{"q", to_npy(q)}, {"kcache", kc}, {"block_table", cf.inputs.at("block_table")},
                   {"cache_seqlens", cf.inputs.at("seqlens")}};
  const nlohmann::json params{{"causal", true}, {"head_dim_v", R}, {"softmax_scale", cfg.scale()}};
  const Tensors out = run_oracle(fc(), in, params);
  const Array<double> o = from_npy<double>(out.at("o"), "o"), lse = from_npy<double>(out.at("lse"), "lse");
  Array<double> lse_nh({N, H});
  Mat<double> o_lat(N, H * R);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t hh = 0; hh < H; ++hh) {
      lse_nh.data[n * H + hh] = lse.data[((n / S) * H + hh) * S + n % S];
      for (int64_t r = 0; r < R; ++r) o_lat(n, hh * R + r) = o.data[(n * H + hh) * R + r];
    }
  Output<double> u;
  u.u = Mat<double>(N, cfg.hidden);
  absorbed_output(W, o_lat, u);
  // Judged as float32 outputs: the path went through float32 q (a kernel's input), so its error is float32's.
  const CheckReport rl = check(mc, cf.inputs, cf.params, cf.expected, "lse", to_npy(lse_nh.cast<float>()));
  const CheckReport ru = check(mc, cf.inputs, cf.params, cf.expected, "u", to_npy(Array<double>::from(u.u).cast<float>()));
  INFO("lse: ", rl.text, "\nu: ", ru.text);
  CHECK(rl.pass);
  CHECK(ru.pass);
}
