// tests/07-precision/test_precision.cpp -- stage 07: A8W8 and FP8 block-scaled GEMM under their recipes.
// Exactness where the recipe is deterministic (int32 sums, codes, scales), the emulated accumulator's
// rounding, and issue 40's list: wrong candidates fail the contract's check, right ones computed in
// another order or blocking pass. The committed goldens are the cases.
#include <doctest/doctest.h>

#include <functional>

#include "golden_util.hpp"
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/07-precision/smoothquant.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

struct Case {
  CaseFolder cf;
  Mat<float> x, w;
  Recipe recipe;
};

Case load(const std::string& name) {
  Case c;
  c.cf = read_case(contract("07-precision"), test::golden_dir("07-precision") / name);
  c.recipe = parse_recipe(c.cf.params);
  if (c.recipe.moe() || c.recipe.kv() || c.recipe.attn()) return c;  // test_moe_quant.cpp, test_kv_attn.cpp read those
  c.x = from_npy<float>(c.cf.inputs.at("x"), "x").mat();
  c.w = from_npy<float>(c.cf.inputs.at("w"), "w").mat();
  return c;
}

bool passes(const Case& c, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(contract("07-precision"), c.cf.inputs, c.cf.params, c.cf.expected, output, cand);
  INFO(output << ": " << r.text);
  return r.pass;
}
NpyData npy(const Mat<float>& m) { return to_npy(Array<float>::from(m)); }

// A8W8 candidate with its pieces replaceable: quantiser rounding, the int accumulation, the dequant.
struct A8W8Cand {
  formats::Round round = formats::Round::nearest_even;
  bool int16_acc = false, reverse_k = false, drop_token_scale = false, bf16_out = false;
};
struct A8W8Out {
  Array<int32_t> xq, acc;
  Mat<float> y;
};
A8W8Out a8w8_candidate(const Mat<float>& x, const Mat<float>& w, const A8W8Cand& k) {
  const quant::Quantized xq0 = quant::per_token(x, quant::Elem::int8), wq = quant::per_channel(w, quant::Elem::int8);
  const int64_t m = x.rows(), kk = x.cols(), n = w.cols();
  A8W8Out o{Array<int32_t>({m, kk}), Array<int32_t>({m, n}), Mat<float>(m, n)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < kk; ++c) o.xq.data[i * kk + c] = formats::to_int8(x(i, c) / xq0.scales(i, 0), k.round);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      int16_t s16 = 0;
      for (int64_t t = 0; t < kk; ++t) {
        const int64_t c = k.reverse_k ? kk - 1 - t : t;
        const int32_t p = o.xq.data[i * kk + c] * static_cast<int8_t>(wq.codes[c * n + j]);
        s += p;
        s16 = static_cast<int16_t>(static_cast<uint16_t>(s16) + static_cast<uint16_t>(p));  // wraps
      }
      o.acc.data[i * n + j] = k.int16_acc ? s16 : s;
      const float sc = k.drop_token_scale ? wq.scales(0, j) : xq0.scales(i, 0) * wq.scales(0, j);  // (xs ws) order
      const float y = static_cast<float>(o.acc.data[i * n + j]) * sc;
      o.y(i, j) = k.bf16_out ? formats::from_bf16(formats::to_bf16(y)) : y;
    }
  return o;
}

// FP8 candidate: its own accumulator and promotion interval, chunk order, scale lookups, code rounding.
struct Fp8Cand {
  int bits = 14;
  int64_t nc = 128;
  bool reverse = false;  // chunks and the terms inside them in descending k
  formats::Round round = formats::Round::nearest_even;
  formats::Overflow overflow = formats::Overflow::saturate;
  std::function<float(const quant::Quantized&, int64_t i, int64_t kb)> xs = [](const quant::Quantized& q, int64_t i,
                                                                                int64_t kb) { return q.scales(i, kb); };
  std::function<float(const quant::Quantized&, int64_t kb, int64_t jb)> ws =
      [](const quant::Quantized& q, int64_t kb, int64_t jb) { return q.scales(kb, jb); };
  bool bf16_out = false;
};
struct Fp8Out {
  Array<int32_t> xq;
  Mat<float> y;
};
Fp8Out fp8_candidate(const Mat<float>& x, const Mat<float>& w, const Fp8Recipe& declared, const Fp8Cand& k) {
  quant::Quantized xq = fp8_quantize_x(x, declared);  // the scales; codes redone with the candidate's rounding
  for (int64_t i = 0; i < xq.rows; ++i)
    for (int64_t c = 0; c < xq.cols; ++c)
      xq.codes[i * xq.cols + c] = formats::to_e4m3(x(i, c) / xq.scale_at(i, c), k.round, k.overflow);
  const quant::Quantized wq = quant::blocks_128x128(w);
  const int64_t m = x.rows(), kk = x.cols(), n = w.cols(), chunks = (kk + k.nc - 1) / k.nc;
  Fp8Out o{codes_i32(xq), Mat<float>(m, n)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float out = 0;
      for (int64_t t = 0; t < chunks; ++t) {
        const int64_t ch = k.reverse ? chunks - 1 - t : t, k0 = ch * k.nc, k1 = std::min(k0 + k.nc, kk);
        LimitedAccumulator acc{k.bits, AccRound::nearest_even, 0};
        for (int64_t u = k0; u < k1; ++u) {
          const int64_t c = k.reverse ? k1 - 1 - (u - k0) : u;
          acc.add(xq.element(i, c) * wq.element(c, j));
        }
        out += acc.value() * (k.xs(xq, i, k0 / 128) * k.ws(wq, k0 / 128, j / 128));
      }
      o.y(i, j) = k.bf16_out ? formats::from_bf16(formats::to_bf16(out)) : out;
    }
  return o;
}

}  // namespace

TEST_CASE("07: int8 GEMM is exact, and K past int32's reach is refused naming K") {
  Rng rng(1);
  const int64_t m = 3, k = 300, n = 5;
  std::vector<int8_t> a(m * k), b(k * n);
  for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(256)) - 128);
  for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(256)) - 128);
  std::vector<int32_t> c(m * n);
  gemm_s8s8s32(a.data(), b.data(), c.data(), m, k, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) s += int64_t{a[i * k + t]} * b[t * n + j];
      CHECK(c[i * n + j] == s);
    }
  // The largest K: every product (-128)(-128) = 2^14, the sum 131071 * 2^14 = 2^31 - 2^14 fits.
  std::vector<int8_t> v(kA8W8MaxK, -128);
  int32_t out = 0;
  gemm_s8s8s32(v.data(), v.data(), &out, 1, kA8W8MaxK, 1);
  CHECK(out == 2147467264);
  CHECK_THROWS_WITH_AS(gemm_s8s8s32(v.data(), v.data(), &out, 1, kA8W8MaxK + 1, 1),
                       doctest::Contains("K = 131072 violates K <= 131071"), Error);
}

TEST_CASE("07: the emulated accumulator rounds as stated") {
  CHECK(round_significant(0b1011'0111, 4, AccRound::nearest_even) == 0b1011'0000);  // 183: below the half -> 176
  CHECK(round_significant(0b1011'1001, 4, AccRound::nearest_even) == 0b1100'0000);  // 185: above -> 192
  CHECK(round_significant(0b1011'1001, 4, AccRound::toward_zero) == 0b1011'0000);
  CHECK(round_significant(0b1001'1000, 4, AccRound::nearest_even) == 0b1010'0000);  // tie, odd -> up
  CHECK(round_significant(0b1010'1000, 4, AccRound::nearest_even) == 0b1010'0000);  // tie, even -> stays
  CHECK(round_significant(-185, 4, AccRound::nearest_even) == -192);
  CHECK(round_significant(-185, 4, AccRound::toward_zero) == -176);
  // 24 bits is a float32 accumulator: the same bits as float32 additions of the exact products.
  Rng rng(2);
  LimitedAccumulator acc{24, AccRound::nearest_even, 0};
  float f = 0;
  for (int t = 0; t < 5000; ++t) {
    auto code = [&rng] {  // any E4M3 value but NaN (0x7F, 0xFF), either sign
      return formats::from_e4m3(static_cast<uint8_t>(rng.uniform_int(0x7F) | (rng.uniform_int(2) << 7)));
    };
    const float p = code() * code();
    acc.add(p);
    f = f + p;
    REQUIRE(acc.value() == f);
  }
}

TEST_CASE("07: the reference rungs pass every golden case through the contract") {
  const Contract& c = contract("07-precision");
  for (const std::string& name : golden_case_names()) {
    CAPTURE(name);
    const Case g = load(name);
    const Rung& rung = registry().find("07-precision", "ref", g.recipe.name);
    const Tensors out = run_rung(c, rung, g.cf.inputs, g.cf.params, DType::F4);
    for (const auto& [k, v] : out) {
      CAPTURE(k);
      CHECK(passes(g, k, v));
    }
    CHECK(out.count("acc") ==
          (g.recipe.name == "fp8_block" || g.recipe.name == "bf16_gemm" || g.recipe.kv() || g.recipe.attn() ? 0u : 1u));
    // The rung of the other recipe refuses the case, naming both.
    const Rung& other = registry().find("07-precision", "ref", g.recipe.name == "a8w8" ? "fp8_block" : "a8w8");
    CHECK_THROWS_WITH_AS(run_rung(c, other, g.cf.inputs, g.cf.params, DType::F4), doctest::Contains("params.recipe is"),
                         Error);
  }
}

TEST_CASE("07: A8W8 -- right candidates in another order pass, issue 40's wrong ones fail") {
  for (const std::string name : {"a8w8_outliers", "a8w8_large_sums"}) {
    CAPTURE(name);
    const Case g = load(name);
    const A8W8Out right = a8w8_candidate(g.x, g.w, {formats::Round::nearest_even, false, true, false, false});
    CHECK(passes(g, "xq", to_npy(right.xq)));
    CHECK(passes(g, "acc", to_npy(right.acc)));
    CHECK(passes(g, "y", npy(right.y)));
    CHECK_FALSE(passes(g, "xq", to_npy(a8w8_candidate(g.x, g.w, {formats::Round::toward_zero}).xq)));
    // An int16 accumulator (what pmaddubsw-style pairs saturate to) overflows where sums pass 2^15: the
    // large-sums case (int32 itself cannot overflow: K <= 131071 is enforced).
    if (name == "a8w8_large_sums") {
      const A8W8Out wrap = a8w8_candidate(g.x, g.w, {formats::Round::nearest_even, true});
      CHECK_FALSE(passes(g, "acc", to_npy(wrap.acc)));
      CHECK_FALSE(passes(g, "y", npy(wrap.y)));
    }
    CHECK_FALSE(passes(g, "y", npy(a8w8_candidate(g.x, g.w, {formats::Round::nearest_even, false, false, true}).y)));
    CHECK_FALSE(passes(g, "y", npy(a8w8_candidate(g.x, g.w, {formats::Round::nearest_even, false, false, false, true}).y)));
  }
}

TEST_CASE("07: FP8 block-scaled -- right candidates in another order pass, issue 40's wrong ones fail") {
  for (const std::string name : {"fp8_blocks", "fp8_k1024", "fp8_acc24_nc32", "fp8_static_saturate"}) {
    CAPTURE(name);
    const Case g = load(name);
    const Fp8Recipe& r = g.recipe.fp8;
    // Right: a float32 accumulator promoted every 32, chunks and terms in descending k; and the declared
    // accumulator width promoted every 64, ascending.
    Fp8Cand wide;
    wide.bits = 24, wide.nc = 32, wide.reverse = true;
    const Fp8Out a = fp8_candidate(g.x, g.w, r, wide);
    CHECK(passes(g, "xq", to_npy(a.xq)));
    CHECK(passes(g, "y", npy(a.y)));
    Fp8Cand same;
    same.bits = r.acc_bits, same.nc = std::min<int64_t>(64, r.nc);
    CHECK(passes(g, "y", npy(fp8_candidate(g.x, g.w, r, same).y)));
    // Wrong: codes rounded toward zero where RNE is declared.
    Fp8Cand rtz;
    rtz.round = formats::Round::toward_zero;
    CHECK_FALSE(passes(g, "xq", to_npy(fp8_candidate(g.x, g.w, r, rtz).xq)));
    if (name == "fp8_static_saturate") {  // no saturation: |x| / scale past 464 becomes NaN
      Fp8Cand nosat;
      nosat.overflow = formats::Overflow::to_inf_or_nan;
      const Fp8Out o = fp8_candidate(g.x, g.w, r, nosat);
      CHECK_FALSE(passes(g, "xq", to_npy(o.xq)));
      CHECK_FALSE(passes(g, "y", npy(o.y)));
      continue;  // one static scale everywhere: the scale mix-ups below change nothing on the activations
    }
    // Wrong: the weight scales transposed; a block's scale taken from its neighbour (weights, activations).
    const int64_t kb = (g.x.cols() + 127) / 128, nb = (g.w.cols() + 127) / 128;
    if (kb == nb) {
      Fp8Cand tr;
      tr.ws = [](const quant::Quantized& q, int64_t b, int64_t jb) { return q.scales(jb, b); };
      CHECK_FALSE(passes(g, "y", npy(fp8_candidate(g.x, g.w, r, tr).y)));
    }
    Fp8Cand nw;
    nw.ws = [nb](const quant::Quantized& q, int64_t b, int64_t jb) { return q.scales(b, (jb + 1) % nb); };
    if (nb > 1) CHECK_FALSE(passes(g, "y", npy(fp8_candidate(g.x, g.w, r, nw).y)));
    Fp8Cand nx;
    nx.xs = [kb](const quant::Quantized& q, int64_t i, int64_t b) { return q.scales(i, kb > 1 ? (b + 1) % kb : b); };
    if (kb > 1) CHECK_FALSE(passes(g, "y", npy(fp8_candidate(g.x, g.w, r, nx).y)));
    // A bf16 result passed off as the float32-accumulator recipe.
    if (r.acc_bits == 24) {
      Fp8Cand bf;
      bf.bits = 24, bf.nc = r.nc, bf.bf16_out = true;
      CHECK_FALSE(passes(g, "y", npy(fp8_candidate(g.x, g.w, r, bf).y)));
    }
  }
}

TEST_CASE("07: the derived bound is the recipe's: tighter for a wider accumulator, the oracle itself passes") {
  const Fp8Recipe v3;  // 14 bits, RNE, N_C = 128
  Fp8Recipe f32 = v3;
  f32.acc_bits = 24;
  CHECK(fp8_bound(v3, 4096, 1.0) > 0.0078);  // gamma_127(2^-14): 127 roundings of 2^-14
  CHECK(fp8_bound(v3, 4096, 1.0) < 0.0080);
  CHECK(fp8_bound(f32, 4096, 1.0) < 1e-5);
  const Case g = load("fp8_blocks");
  CHECK(passes(g, "y", g.cf.expected.at("y")));
  CHECK_THROWS_WITH_AS(parse_recipe(nlohmann::json{{"recipe", "fp8_block"}, {"nc", 48}}),
                       doctest::Contains("nc = 48 violates"), Error);
  CHECK_THROWS_WITH_AS(parse_recipe(nlohmann::json{{"recipe", "a8w8"}, {"acc_bits", 14}}),
                       doctest::Contains("params.acc_bits violates recipe == fp8_block"), Error);
  CHECK_THROWS_WITH_AS(parse_recipe(nlohmann::json{{"recipe", "fp16"}}), doctest::Contains("params.recipe = 'fp16'"),
                       Error);
}

TEST_CASE("07: a truncating accumulator is within its own recipe's bound; a narrower one than declared fails") {
  Rng rng(3);
  Mat<float> x(4, 1024), w(1024, 6);
  for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(rng.normal());
  for (int64_t i = 0; i < w.size(); ++i) w.data()[i] = static_cast<float>(rng.normal());
  Fp8Recipe rtz;
  rtz.acc_round = AccRound::toward_zero;
  const Fp8Result f = fp8_gemm(x, w, rtz);
  const Fp8Oracle o = fp8_oracle(f.xq, f.wq);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) CHECK(std::fabs(f.y(i, j) - o.y(i, j)) <= fp8_bound(rtz, 1024, o.g(i, j)));
  // Declared: a float32 accumulator promoted every 32 (the golden case); computed: an 8-bit one.
  const Case g = load("fp8_acc24_nc32");
  Fp8Cand narrow;
  narrow.bits = 8, narrow.nc = 32;
  CHECK_FALSE(passes(g, "y", npy(fp8_candidate(g.x, g.w, g.recipe.fp8, narrow).y)));
}

// Rung (b): SmoothQuant on the seeded outlier-channel data (smoothquant.hpp). The trend is computed here
// from the data, never typed: smoothing at a = 0.5 beats both unsmoothed granularities and both ends of a.
TEST_CASE("07: SmoothQuant's table: smoothing at a = 0.5 beats per-tensor and per-token int8; a = 0 and 1 are worse") {
  const std::vector<SqRow> t = smoothquant_table(sq_data());
  REQUIRE(t.size() == 5);
  const SqRow& mid = t[2];
  CHECK(mid.alpha == 0.5);
  CHECK(mid.token_plain < mid.tensor_plain);                    // per-token helps a little
  CHECK(mid.token_smooth < mid.token_plain);                    // smoothing helps more
  CHECK(mid.tensor_smooth < mid.tensor_plain);
  for (const SqRow& r : t) {
    CHECK(r.violation <= 1);                                    // the right smoothing keeps X W
    if (r.alpha != 0.5) CHECK(mid.token_smooth < r.token_smooth);  // a = 0.5 is the table's best
  }
}

TEST_CASE("07: SmoothQuant: a scale applied to X and not undone in W is caught") {
  const Smoother wrong = [](const Mat<float>& x, const Mat<float>& w, double a, Mat<float>& xs, Mat<float>& ws) {
    const std::vector<float> s = quant::smoothquant_scales(x, w, a);
    xs = x;
    ws = w;
    for (int64_t j = 0; j < x.cols(); ++j) xs.col(j) /= s[static_cast<size_t>(j)];
  };
  const std::vector<SqRow> right = smoothquant_table(sq_data());
  const std::vector<SqRow> t = smoothquant_table(sq_data(), wrong);
  for (size_t i = 0; i < t.size(); ++i) {
    CHECK(t[i].violation > 1);                          // the smoothing check fails it
    CHECK(t[i].token_smooth > right[i].tensor_plain);  // and its error is worse than not smoothing at all
  }
}
