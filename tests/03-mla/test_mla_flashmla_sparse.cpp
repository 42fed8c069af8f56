// tests/03-mla/test_mla_flashmla_sparse.cpp -- FlashMLA's FP8 "with scale" cache and sparse variants (layout
// contracts 03-mla/flashmla with a |u1 kcache or indices, 03-mla/flashmla_sparse_prefill; ladder/03-mla/flashmla.hpp):
// the flash_mla rung passes, the semantics are pinned against independent computations (the record's bytes, a sparse
// list equal to the dense rows, prefill's lse in base 2 with duplicates counted twice), and the planted bugs of a port
// fail: scales of the neighbouring 128-group, RoPE read as FP8, scale divided; -1 read as row 0, duplicates counted
// once; lse in ln where log2 is promised.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numbers>

#include "ladder/03-mla/flashmla.hpp"
#include "ladder/07-precision/kv_quant.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/formats.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

const Contract& dec() { return contract(kFlashMlaLayout); }
const Contract& pre() { return contract(kFlashMlaSparsePrefillLayout); }

struct Case {
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

// Small dims, the same code paths: FP8 needs dv % 128 == 0 (two scale groups at dv = 256).
Case decode_case(bool fp8, int64_t topk) {
  FlashMlaSpec s;
  s.h_q = 4, s.kv_fp8 = fp8, s.topk = topk;
  s.d = fp8 ? 272 : 80, s.dv = fp8 ? 256 : 64;
  Case c{flashmla_inputs(s), flashmla_params(s), {}};
  c.expected = run_oracle(dec(), c.in, c.params);
  return c;
}

Case prefill_case() {
  FlashMlaPrefillSpec s;
  s.s_q = 5, s.s_kv = 150, s.topk = 24, s.h_q = 4, s.d = 80, s.dv = 64;
  Case c{flashmla_prefill_inputs(s), flashmla_prefill_params(s), {}};
  c.expected = run_oracle(pre(), c.in, c.params);
  return c;
}

bool passes(const Contract& k, const Case& c, const Tensors& cand) {
  bool all = true;
  for (const auto& [name, d] : cand) {
    const CheckReport r = check(k, c.in, c.params, c.expected, name, d);
    INFO(k.stage, " ", name, ": ", r.text);
    all = all && r.pass;
  }
  return all;
}

}  // namespace

TEST_CASE("flashmla fp8: the record is 656 bytes at d = 576, FlashMLA's layout, and reads back bit for bit") {
  CHECK(precision::kv_record_bytes(precision::KvFormat::fp8_record, 512, 64) == 656);
  std::vector<float> x(576);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * (i < 128 ? 3.0f : 0.5f);
  const precision::KvRow q = precision::quantize_kv_row(x.data(), 512, 64, precision::KvFormat::fp8_record);
  std::vector<uint8_t> rec(656);
  precision::kv_fp8_record_write(q, 512, 64, rec.data());
  float s1 = 0;
  std::memcpy(&s1, &rec[512 + 4], 4);  // bytes 516..519: the scale of values 128..255
  CHECK(s1 == q.scales[1]);
  CHECK(rec[528] == (q.rope[0] & 0xFF));  // RoPE from byte 528, bf16 little-endian
  const precision::KvRow r = precision::kv_fp8_record_read(rec.data(), 512, 64);
  CHECK(r.codes == q.codes);
  CHECK(r.scales == q.scales);
  CHECK(r.rope == q.rope);
}

TEST_CASE("flashmla fp8: the flash_mla rung on the dequantised cache passes; the port's FP8 bugs fail") {
  const Case c = decode_case(true, 0);
  CHECK(c.in.at("kcache").dtype == DType::U1);
  CHECK(c.in.at("kcache").shape[3] == 256 + 8 + 32);
  for (const int64_t sb : {1, 3}) CHECK(passes(dec(), c, flashmla_run_flash(c.in, c.params, sb)));
  for (const FlashMlaBug bug : {FlashMlaBug::scale_neighbour, FlashMlaBug::rope_as_fp8, FlashMlaBug::scale_divide}) {
    const Tensors m = flashmla_run_flash(c.in, c.params, 2, bug);
    const CheckReport r = check(dec(), c.in, c.params, c.expected, "o", m.at("o"));
    INFO(flashmla_bug_name(bug), ": ", r.text);
    CHECK_FALSE(r.pass);
  }
  CHECK_THROWS_WITH_AS(flashmla_run_flash(c.in, c.params, 2, FlashMlaBug::dedup), doctest::Contains("concerns indices"),
                       Error);
  // The same rows unquantised (a kernel that skips the cache's FP8 and reads the float32 rows): a different answer.
  FlashMlaSpec s;
  s.h_q = 4, s.d = 272, s.dv = 256;
  const Tensors f = flashmla_run_flash(flashmla_inputs(s), flashmla_params(s), 2);
  const CheckReport r = check(dec(), c.in, c.params, c.expected, "o", f.at("o"));
  INFO(r.text);
  CHECK_FALSE(r.pass);
}

// The records decoded here by hand, from FlashMLA's byte layout (not stage 07's reader): with every scale set to a
// power of two, code x scale and bf16 are exact in float32, so the FP8 oracle must equal the float32-cache oracle on
// those values bit for bit. A wrong byte offset, scale group, scale operation or RoPE decoding breaks the equality.
TEST_CASE("flashmla fp8: the oracle reads the 656-byte layout exactly (power-of-two scales: equal to a float32 cache)") {
  Case c = decode_case(true, 0);
  NpyData& k = c.in.at("kcache");
  const int64_t rows = k.shape[0] * k.shape[1], rb = k.shape[3], R = 256, G = 2, rope = 16;
  Array<float> f({k.shape[0], k.shape[1], 1, R + rope});
  for (int64_t i = 0; i < rows; ++i) {
    uint8_t* rec = &k.bytes[static_cast<size_t>(i * rb)];
    for (int64_t g = 0; g < G; ++g) {
      const float s = std::ldexp(1.0f, static_cast<int>(-5 - g));  // a different power of two per group
      if (rec[0] != 0xFF || rec[1] != 0xFF) std::memcpy(rec + R + 4 * g, &s, 4);  // rows past L stay 0xFF
    }
    float* x = &f.data[i * (R + rope)];
    for (int64_t c2 = 0; c2 < R; ++c2) {
      float s = 0;
      std::memcpy(&s, rec + R + 4 * (c2 / 128), 4);
      x[c2] = formats::from_e4m3(rec[c2]) * s;
    }
    for (int64_t c2 = 0; c2 < rope; ++c2) {
      const uint32_t bits = static_cast<uint32_t>(rec[R + 4 * G + 2 * c2] | (rec[R + 4 * G + 2 * c2 + 1] << 8)) << 16;
      std::memcpy(&x[R + c2], &bits, 4);
    }
  }
  const Tensors e8 = run_oracle(dec(), c.in, c.params);
  Tensors in32 = c.in;
  in32["kcache"] = to_npy(f);
  const Tensors e32 = run_oracle(dec(), in32, c.params);
  CHECK(e8.at("o").bytes == e32.at("o").bytes);
  CHECK(e8.at("lse").bytes == e32.at("lse").bytes);
  CHECK(e8.at("o").bytes != c.expected.at("o").bytes);  // the scales mattered
}

TEST_CASE("flashmla sparse decode: indices listing every row equal the dense call bit for bit") {
  FlashMlaSpec s;
  s.h_q = 4, s.d = 80, s.dv = 64, s.causal = false;
  Tensors in = flashmla_inputs(s);
  const nlohmann::json p = flashmla_params(s);
  const Tensors dense = run_oracle(dec(), in, p);
  const Array<int64_t> t = npy_as_int64(in.at("block_table"), "block_table");
  const int64_t B = 2, S = s.s_q, K = 140, W = t.shape[1];
  Array<int32_t> idx({B, S, K});
  std::fill(idx.data.begin(), idx.data.end(), -1);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < s.seqlens[b]; ++j)
        idx.data[(b * S + i) * K + j] = static_cast<int32_t>(t.data[b * W + j / 64] * 64 + j % 64);
  in["indices"] = to_npy(idx);
  in.erase("block_table"), in.erase("cache_seqlens");  // not read with indices (README)
  const Tensors sparse = run_oracle(dec(), in, p);
  CHECK(sparse.at("o").bytes == dense.at("o").bytes);
  CHECK(sparse.at("lse").bytes == dense.at("lse").bytes);
  nlohmann::json causal = p;
  causal["causal"] = true;
  CHECK_THROWS_WITH_AS(run_oracle(dec(), in, causal), doctest::Contains("param causal = true"), Error);
  idx.data[3] = 100000;
  in["indices"] = to_npy(idx);
  CHECK_THROWS_WITH_AS(run_oracle(dec(), in, p), doctest::Contains("input indices[0, 0, 3] = 100000"), Error);
}

TEST_CASE("flashmla sparse decode (float32 and FP8 caches): the rung passes; -1 as row 0 and dedup fail") {
  for (const bool fp8 : {false, true}) {
    const Case c = decode_case(fp8, 40);
    CHECK(c.params.at("causal") == false);
    CHECK(passes(dec(), c, flashmla_run_flash(c.in, c.params, 1)));
    for (const FlashMlaBug bug : {FlashMlaBug::invalid_as_row0, FlashMlaBug::dedup}) {
      const Tensors m = flashmla_run_flash(c.in, c.params, 1, bug);
      const CheckReport r = check(dec(), c.in, c.params, c.expected, "o", m.at("o"));
      INFO(fp8, " ", flashmla_bug_name(bug), ": ", r.text);
      CHECK_FALSE(r.pass);
    }
  }
}

TEST_CASE("flashmla sparse prefill: lse and max_logits in base 2, duplicates counted, invalid entries skipped") {
  const Case c = prefill_case();
  const Array<float> q = from_npy<float>(c.in.at("q"), "q"), kv = from_npy<float>(c.in.at("kv"), "kv");
  const Array<int64_t> idx = npy_as_int64(c.in.at("indices"), "indices");
  const double scale = c.params.at("sm_scale").get<double>();
  const Array<double> lse = npy_as_double(c.expected.at("lse")), mx = npy_as_double(c.expected.at("max_logits"));
  for (int64_t n : {0, 4}) {  // token n, head 1: sum_k e^{s} over the listed valid entries, duplicates twice
    double sum = 0, m = -INFINITY;
    for (int64_t k = 0; k < 24; ++k) {
      const int64_t v = idx.data[n * 24 + k];
      if (v < 0 || v >= 150) continue;
      double dot = 0;
      for (int64_t d = 0; d < 80; ++d) dot += static_cast<double>(q.data[(n * 4 + 1) * 80 + d]) * kv.data[v * 80 + d];
      sum += std::exp(scale * dot), m = std::max(m, scale * dot);
    }
    CHECK(lse.data[n * 4 + 1] == doctest::Approx(std::log2(sum)).epsilon(1e-12));
    CHECK(mx.data[n * 4 + 1] == doctest::Approx(m * std::numbers::log2e).epsilon(1e-12));
  }
}

TEST_CASE("flashmla sparse prefill: the rung passes; lse in ln, -1 as row 0, dedup fail") {
  const Case c = prefill_case();
  for (const int64_t sb : {1, 2}) CHECK(passes(pre(), c, flashmla_prefill_run_flash(c.in, c.params, sb)));
  Array<double> ln = npy_as_double(c.expected.at("lse"));
  for (double& v : ln.data) v *= std::numbers::ln2;  // the natural lse a decode kernel returns
  const CheckReport rl = check(pre(), c.in, c.params, c.expected, "lse", to_npy(ln));
  INFO(rl.text);
  CHECK_FALSE(rl.pass);
  for (const FlashMlaBug bug : {FlashMlaBug::invalid_as_row0, FlashMlaBug::dedup}) {
    const Tensors m = flashmla_prefill_run_flash(c.in, c.params, 1, bug);
    const CheckReport r = check(pre(), c.in, c.params, c.expected, "out", m.at("out"));
    INFO(flashmla_bug_name(bug), ": ", r.text);
    CHECK_FALSE(r.pass);
  }
  CHECK_THROWS_WITH_AS(flashmla_prefill_run_flash(c.in, c.params, 1, FlashMlaBug::scale_divide),
                       doctest::Contains("concerns FP8 records"), Error);
  Tensors bad = c.in;
  bad.erase("indices");
  CHECK_THROWS_WITH_AS(run_oracle(pre(), bad, c.params), doctest::Contains("indices"), Error);
}
