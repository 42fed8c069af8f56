// tests/04-moe/test_moe_deepgemm.cpp -- stage 04's ragged dot in DeepGEMM's grouped-GEMM layouts (layout contracts
// "04-moe/deepgemm_contiguous" and "04-moe/deepgemm_masked", ref/src/04-moe/deepgemm.cpp): the ragged_dot rung written
// into each layout passes, with DeepGEMM's calc_diff beside the verdict; the unjudged rows are unjudged (padding rows
// with padding_rows = "unjudged", rows past masked_m); mutants of real port bugs fail: a padding row written, a padding
// row's group index (-1) taken as an expert, one expert's segment shifted by a row, the masked buffer read as if it
// were packed (rows past masked_m counted into the offsets), expected_m taken for masked_m; bad layouts refused.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/core/contract.hpp"

using namespace ladder;
using namespace ladder::moe;

namespace {

struct Case {
  std::string layout;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

DeepGemmSpec small() {
  DeepGemmSpec s;
  s.n = 24;  // k = 200 (not a multiple of anything), experts with 0, 97, 1, 130, 40 rows
  return s;
}

Case make(bool masked, DeepGemmSpec s = small()) {
  Case c{masked ? kDeepGemmMasked : kDeepGemmContiguous, {}, deepgemm_params(s, masked), {}};
  c.in = masked ? deepgemm_masked_inputs(s) : deepgemm_contiguous_inputs(s);
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

CheckReport judge(const Case& c, const NpyData& d, const nlohmann::json* params = nullptr) {
  return check(contract(c.layout), c.in, params ? *params : c.params, c.expected, "d", d);
}


std::vector<int64_t> ints(const Tensors& in, const char* name) { return npy_as_int64(in.at(name), name).data; }

}  // namespace

TEST_CASE("deepgemm: the layouts are found by name; a wrong one is named") {
  CHECK(contract(kDeepGemmContiguous).stage == "04-moe/deepgemm_contiguous");
  CHECK(contract(kDeepGemmMasked).outputs.front().name == "d");
  CHECK_THROWS_WITH_AS(contract("04-moe/deepgemm_contigous"), doctest::Contains("04-moe/deepgemm_masked"), Error);
}

TEST_CASE("deepgemm: the ragged_dot rung written into each layout passes; calc_diff is reported beside") {
  for (const bool masked : {false, true}) {
    const Case c = make(masked);
    const CheckReport r = judge(c, to_npy(deepgemm_ragged_d(c.layout, c.in, c.params)));
    INFO(c.layout, ": ", r.text);
    CHECK(r.pass);
    REQUIRE(r.metrics.count("deepgemm_calc_diff"));
    CHECK(r.metrics.at("deepgemm_calc_diff") < 1e-10);  // float32 vs fp64; DeepGEMM's FP8 tests accept < 1e-3
    CHECK(r.metrics.count("not_judged") == (masked ? 1u : 0u));
  }
}

TEST_CASE("deepgemm contiguous: a padding row written fails under padding_rows zero, passes where unjudged") {
  const Case c = make(false);
  const std::vector<int64_t> idx = ints(c.in, "m_indices");
  Array<float> d = deepgemm_ragged_d(c.layout, c.in, c.params);
  const int64_t n = d.shape[1];
  int64_t last = 0;  // expert 1's last valid row (97 rows from row 0): the store one row past it
  while (idx[last + 1] == 1) ++last;
  REQUIRE(idx[last + 1] == -1);
  std::copy_n(&d.data[last * n], n, &d.data[(last + 1) * n]);
  const CheckReport r = judge(c, to_npy(d));
  INFO(r.text);
  CHECK_FALSE(r.pass);
  CHECK(r.text.find(fmt::format("[{}]", last + 1)) != std::string::npos);  // the report names the padding row
  nlohmann::json p = c.params;
  p["padding_rows"] = "unjudged";  // DeepGEMM's own tests: d from torch.empty, padding rows masked out
  const CheckReport u = judge(c, to_npy(d), &p);
  INFO(u.text);
  CHECK(u.pass);
  CHECK(u.metrics.at("not_judged") > 0);
}

TEST_CASE("deepgemm contiguous: a padding row's group index (-1) taken as an expert fails") {
  const Case c = make(false);
  // A port that reads each M block's expert from the block's last row, -1 wrapping to the last expert (Python's
  // negative index): every valid row of a partly filled block gets expert G - 1.
  const int64_t bm = c.params.at("block_m").get<int64_t>(), G = c.in.at("b").shape[0];
  std::vector<int64_t> idx = ints(c.in, "m_indices"), bad = idx;
  for (size_t i = 0; i < idx.size(); ++i) {
    const int64_t e = idx[(i / bm + 1) * bm - 1];
    if (idx[i] >= 0) bad[i] = e < 0 ? G - 1 : e;
  }
  REQUIRE(bad != idx);
  const CheckReport r = judge(c, to_npy(deepgemm_ragged_d(c.layout, deepgemm_with_ints(c.in, "m_indices", bad), c.params)));
  INFO(r.text);
  CHECK_FALSE(r.pass);
  CHECK(r.metrics.at("deepgemm_calc_diff") > 1e-3);
}

TEST_CASE("deepgemm contiguous: one expert's segment shifted by a row fails") {
  const Case c = make(false);
  const std::vector<int64_t> idx = ints(c.in, "m_indices");
  Array<float> d = deepgemm_ragged_d(c.layout, c.in, c.params);
  const int64_t n = d.shape[1];
  int64_t first = 0, last = 0;  // expert 3's segment (130 rows over two blocks)
  while (idx[first] != 3) ++first;
  for (last = first; idx[last + 1] == 3;) ++last;
  for (int64_t i = last; i >= first; --i) std::copy_n(&d.data[i * n], n, &d.data[(i + 1) * n]);
  std::fill_n(&d.data[first * n], n, 0.0f);
  const CheckReport r = judge(c, to_npy(d));
  INFO(r.text);
  CHECK_FALSE(r.pass);
}

TEST_CASE("deepgemm masked: rows past masked_m are not judged (NaN there passes), and the report counts them") {
  const Case c = make(true);
  Array<float> d = deepgemm_ragged_d(c.layout, c.in, c.params);
  const std::vector<int64_t> mm = ints(c.in, "masked_m");
  const int64_t G = d.shape[0], M = d.shape[1], n = d.shape[2];
  int64_t past = 0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = mm[g]; i < M; ++i, past += n)
      std::fill_n(&d.data[(g * M + i) * n], n, std::numeric_limits<float>::quiet_NaN());
  const CheckReport r = judge(c, to_npy(d));
  INFO(r.text);
  CHECK(r.pass);
  CHECK(r.metrics.at("not_judged") == static_cast<double>(past));
}

TEST_CASE("deepgemm masked: the buffer read as packed (rows past masked_m counted into the offsets) fails") {
  const Case c = make(true);
  const std::vector<int64_t> mm = ints(c.in, "masked_m");
  Array<float> a = from_npy<float>(c.in.at("a"), "a"), packed = a;
  const int64_t G = a.shape[0], M = a.shape[1], k = a.shape[2];
  int64_t off = 0;  // a port that takes row i of group g from flat row sum(masked_m[< g]) + i
  for (int64_t g = 0; g < G; off += mm[g], ++g)
    for (int64_t i = 0; i < mm[g]; ++i) std::copy_n(&a.data[(off + i) * k], k, &packed.data[(g * M + i) * k]);
  Tensors in = c.in;
  in["a"] = to_npy(packed);
  const CheckReport r = judge(c, to_npy(deepgemm_ragged_d(c.layout, in, c.params)));
  INFO(r.text);
  CHECK_FALSE(r.pass);
}

TEST_CASE("deepgemm masked: expected_m (the hint) taken as every group's row count fails") {
  const Case c = make(true);
  const int64_t hint = c.params.at("expected_m").get<int64_t>(), M = c.in.at("a").shape[1];
  std::vector<int64_t> mm = ints(c.in, "masked_m");
  for (int64_t& m : mm) m = std::min(hint, M);
  const CheckReport r = judge(c, to_npy(deepgemm_ragged_d(c.layout, deepgemm_with_ints(c.in, "masked_m", mm), c.params)));
  INFO(r.text);
  CHECK_FALSE(r.pass);
}

TEST_CASE("deepgemm: bad layouts are refused naming the input or param") {
  const Case c = make(false);
  const Contract& cc = contract(kDeepGemmContiguous);
  std::vector<int64_t> idx = ints(c.in, "m_indices");
  int64_t pad = 0;
  while (idx[pad] != -1) ++pad;
  idx[pad] = 1;  // a valid row after padding rows would be fine only if it continued the segment: make a gap
  idx[pad - 1] = -1;
  CHECK_THROWS_WITH_AS(run_oracle(cc, deepgemm_with_ints(c.in, "m_indices", idx), c.params),
                       doctest::Contains("m_indices"), Error);
  nlohmann::json p = c.params;
  p["block_m"] = 100;
  CHECK_THROWS_WITH_AS(run_oracle(cc, c.in, p), doctest::Contains("block_m = 100"), Error);
  p = c.params;
  p["padding_rows"] = "garbage";
  CHECK_THROWS_WITH_AS(run_oracle(cc, c.in, p), doctest::Contains("padding_rows"), Error);
  const Case m = make(true);
  std::vector<int64_t> mm = ints(m.in, "masked_m");
  mm[0] = m.in.at("a").shape[1] + 1;
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepGemmMasked), deepgemm_with_ints(m.in, "masked_m", mm), m.params),
                       doctest::Contains("masked_m[0]"), Error);
}

// ---- FP8 (04-moe/deepgemm_*_fp8): stage 07's recipe and bound ---------------------------------------------------

namespace {

Case make_fp8(bool masked, const std::string& scales) {
  DeepGemmSpec s = small();
  s.k = 300;  // three k blocks, each at its own magnitude
  s.scales = scales;
  Case c{masked ? kDeepGemmMaskedFp8 : kDeepGemmContiguousFp8, deepgemm_fp8_inputs(s, masked),
         deepgemm_fp8_params(s, masked), {}};
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

CheckReport judge_fp8(const Case& c, const Tensors& in) {
  return judge(c, deepgemm_run_fp8(c.layout, in, c.params).at("d"));
}

}  // namespace

TEST_CASE("deepgemm fp8: stage 07's fp8_block rung passes in both layouts, fp32 and UE8M0 scales, any accumulator") {
  for (const bool masked : {false, true})
    for (const char* scales : {"fp32", "ue8m0"}) {
      const Case c = make_fp8(masked, scales);
      for (const int acc_bits : {14, 24}) {  // DeepSeek-V3's 14-bit accumulator, and a float32 one
        const CheckReport r = judge(c, deepgemm_run_fp8(c.layout, c.in, c.params, acc_bits).at("d"));
        INFO(c.layout, " ", scales, " acc_bits ", acc_bits, ": ", r.text);
        CHECK(r.pass);
        CHECK(r.rule == "bound");
        CHECK(r.metrics.at("deepgemm_calc_diff") < 1e-6);
      }
    }
}

TEST_CASE("deepgemm fp8: activation scales read untransposed ([m, k/128] row-major) fail") {
  for (const bool masked : {false, true}) {
    const Case c = make_fp8(masked, "fp32");
    Array<float> sa = from_npy<float>(c.in.at("sa"), "sa"), bad = sa;
    const int64_t KB = sa.shape[sa.shape.size() - 2], ld = sa.shape.back(), slabs = masked ? sa.shape[0] : 1;
    for (int64_t q = 0; q < slabs; ++q)  // a port reading logical (i, kb) at flat i KB + kb of the slab
      for (int64_t i = 0; i < ld; ++i)
        for (int64_t kb = 0; kb < KB; ++kb) bad.data[(q * KB + kb) * ld + i] = sa.data[q * KB * ld + i * KB + kb];
    for (float& v : bad.data) v = v > 0 ? v : 1.0f;  // the alignment padding read as scales: keep them valid
    Tensors in = c.in;
    in["sa"] = to_npy(bad);
    const CheckReport r = judge_fp8(c, in);
    INFO(c.layout, ": ", r.text);
    CHECK_FALSE(r.pass);
  }
}

TEST_CASE("deepgemm fp8: weight scales of the wrong block (k block off by one) fail; UE8M0 refuses a non-power of two") {
  const Case c = make_fp8(false, "ue8m0");
  Array<float> sb = from_npy<float>(c.in.at("sb"), "sb"), bad = sb;
  const int64_t KB = sb.shape[2];
  for (size_t i = 0; i < sb.data.size(); ++i) bad.data[i] = sb.data[i - i % KB + (i % KB + 1) % KB];
  Tensors in = c.in;
  in["sb"] = to_npy(bad);
  const CheckReport r = judge_fp8(c, in);
  INFO(r.text);
  CHECK_FALSE(r.pass);
  CHECK(r.metrics.at("deepgemm_calc_diff") > 1e-3);
  bad = sb;
  bad.data[0] *= 1.5f;
  in["sb"] = to_npy(bad);
  CHECK_THROWS_WITH_AS(run_oracle(contract(c.layout), in, c.params), doctest::Contains("sb[0]"), Error);
  Array<float> a = from_npy<float>(c.in.at("a"), "a");
  a.data[c.in.at("a").shape[1]] = 0.3f;  // not an E4M3 value
  in = c.in;
  in["a"] = to_npy(a);
  CHECK_THROWS_WITH_AS(run_oracle(contract(c.layout), in, c.params), doctest::Contains("E4M3"), Error);
}
