// tests/07-precision/test_moe_quant.cpp -- rung (d): stage 04's routed experts in A8W8 and A8W4 through the
// ragged dot (ladder/07-precision/moe_quant.hpp), judged by the contract: issue 40's wrong candidates fail
// (int4 nibbles in the wrong order, a neighbouring group's scale, the per-token scale missing, a token sent
// to the wrong expert) and right ones in another summation and expert order pass. The goldens are the cases.
#include <doctest/doctest.h>

#include "golden_util.hpp"
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

struct MoeCase {
  CaseFolder cf;
  Recipe recipe;
  MoeOperands op;
};

MoeCase load_moe(const std::string& name) {
  MoeCase c;
  c.cf = read_case(contract("07-precision"), test::golden_dir("07-precision") / name);
  c.recipe = parse_recipe(c.cf.params);
  c.op.x = from_npy<float>(c.cf.inputs.at("x"), "x").mat();
  const Array<float> w = from_npy<float>(c.cf.inputs.at("w"), "w");
  c.op.w = w.data;
  c.op.E = w.shape[0], c.op.N = w.shape[2];
  c.op.topk_idx = npy_as_int64(c.cf.inputs.at("topk_idx"), "topk_idx");
  return c;
}

bool passes(const MoeCase& c, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(contract("07-precision"), c.cf.inputs, c.cf.params, c.cf.expected, output, cand);
  INFO(output << ": " << r.text);
  return r.pass;
}

// A candidate written apart from the reference: no sort, experts visited in its own order, the integer sums
// and the float group sums in its own order, the int4 codes packed and unpacked by itself; each knob a
// mistake (or a legitimate reordering).
struct Knobs {
  bool reverse = false;           // right: k, groups and experts in descending order
  bool swap_nibbles = false;      // wrong: the high nibble read as element 2i
  bool neighbour_group = false;   // wrong: group b dequantised with group b + 1's scale
  bool drop_token_scale = false;  // wrong: y = sum acc ws, xs forgotten
  bool wrong_expert = false;      // wrong: assignment 1 sent to the next expert
};
struct Out {
  Array<int32_t> acc;
  Mat<float> y;
};
Out candidate(const MoeCase& c, const Knobs& kn) {
  const MoeOperands& m = c.op;
  const bool int4 = c.recipe.name == "moe_a8w4";
  const int64_t T = m.x.rows(), K = m.x.cols(), N = m.N, E = m.E, k = m.topk_idx.shape[1], A = T * k;
  const int64_t g = int4 ? c.recipe.group : K, nb = (K + g - 1) / g;
  const quant::Quantized xq = quant::per_token(m.x, quant::Elem::int8);
  Out o{Array<int32_t>(int4 ? Shape{A, nb, N} : Shape{A, N}), Mat<float>(A, N)};
  for (int64_t ei = 0; ei < E; ++ei) {
    const int64_t e = kn.reverse ? E - 1 - ei : ei;
    Mat<float> we(K, N);
    std::copy(m.w.begin() + e * K * N, m.w.begin() + (e + 1) * K * N, we.data());
    const quant::Quantized wq = int4 ? quant::int4_groups(we, g) : quant::per_channel(we, quant::Elem::int8);
    std::vector<uint8_t> bytes(static_cast<size_t>(N * K / 2));  // [N x K/2], element 2i low
    if (int4)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < K / 2; ++i)
          bytes[static_cast<size_t>(n * K / 2 + i)] = formats::pack_int4(static_cast<int8_t>(wq.codes[static_cast<size_t>(2 * i * N + n)]),
                                                                          static_cast<int8_t>(wq.codes[static_cast<size_t>((2 * i + 1) * N + n)]));
    auto code = [&](int64_t kk, int64_t n) -> int32_t {
      if (!int4) return static_cast<int8_t>(wq.codes[static_cast<size_t>(kk * N + n)]);
      const uint8_t b = bytes[static_cast<size_t>(n * K / 2 + kk / 2)];
      return (kk % 2 == 0) != kn.swap_nibbles ? formats::unpack_int4_lo(b) : formats::unpack_int4_hi(b);
    };
    for (int64_t a = 0; a < A; ++a) {
      const int64_t routed = m.topk_idx.data[static_cast<size_t>(a)];
      if ((kn.wrong_expert && a == 1 ? (routed + 1) % E : routed) != e) continue;
      const int64_t t = a / k;
      for (int64_t n = 0; n < N; ++n) {
        float y = 0;
        for (int64_t bi = 0; bi < nb; ++bi) {
          const int64_t b = kn.reverse ? nb - 1 - bi : bi;
          int32_t s = 0;
          for (int64_t u = b * g; u < std::min(K, (b + 1) * g); ++u) {
            const int64_t kk = kn.reverse ? std::min(K, (b + 1) * g) - 1 - (u - b * g) : u;
            s += int32_t{static_cast<int8_t>(xq.codes[static_cast<size_t>(t * K + kk)])} * code(kk, n);
          }
          o.acc.data[static_cast<size_t>((a * nb + b) * N + n)] = s;
          const float ws = wq.scales(kn.neighbour_group && nb > 1 ? (b + 1) % nb : b, n);
          const float sc = kn.drop_token_scale ? ws : xq.scales(t, 0) * ws;  // (xs ws) order: another rounding order
          y += static_cast<float>(s) * sc;
        }
        o.y(a, n) = y;
      }
    }
  }
  return o;
}

NpyData npy_f32(const Mat<float>& m) { return to_npy(Array<float>::from(m)); }

const char* kMoeCases[] = {"moe_a8w8", "moe_a8w4_g128", "moe_a8w4_g32"};

}  // namespace

TEST_CASE("07 (d): the moe rungs pass their goldens; the golden routing has an empty and a full expert") {
  for (const char* name : kMoeCases) {
    CAPTURE(name);
    const MoeCase g = load_moe(name);
    const Rung& rung = registry().find("07-precision", "ref", g.recipe.name);
    const Tensors out = run_rung(contract("07-precision"), rung, g.cf.inputs, g.cf.params, DType::F4);
    REQUIRE(out.size() == 4);
    for (const auto& [k, v] : out) {
      CAPTURE(k);
      CHECK(passes(g, k, v));
    }
    // The oracle itself passes its own bound (float64 y); the per-element bound is tiny: ~ (nb + 2) 2^-24 G.
    CHECK(passes(g, "y", g.cf.expected.at("y")));
  }
  const MoeCase g = load_moe("moe_a8w8");
  std::vector<int64_t> count(static_cast<size_t>(g.op.E), 0);
  for (int64_t e : g.op.topk_idx.data) ++count[static_cast<size_t>(e)];
  CHECK(count[0] == 0);
  CHECK(count[1] == g.op.x.rows());
}

TEST_CASE("07 (d): right candidates in another summation and expert order pass, issue 40's wrong ones fail") {
  for (const char* name : kMoeCases) {
    CAPTURE(name);
    const MoeCase g = load_moe(name);
    const bool int4 = g.recipe.name == "moe_a8w4";
    const Out right = candidate(g, {true});
    CHECK(passes(g, "acc", to_npy(right.acc)));
    CHECK(passes(g, "y", npy_f32(right.y)));
    const Out fwd = candidate(g, {});
    CHECK(passes(g, "y", npy_f32(fwd.y)));
    // The per-token scale missing.
    CHECK_FALSE(passes(g, "y", npy_f32(candidate(g, {false, false, false, true}).y)));
    // A token routed to the wrong expert: its integer sums and outputs both differ.
    const Out wrong = candidate(g, {false, false, false, false, true});
    CHECK_FALSE(passes(g, "acc", to_npy(wrong.acc)));
    CHECK_FALSE(passes(g, "y", npy_f32(wrong.y)));
    if (!int4) continue;
    // int4 nibbles unpacked in the wrong order: k = 2i and 2i + 1 swapped.
    const Out nib = candidate(g, {false, true});
    CHECK_FALSE(passes(g, "acc", to_npy(nib.acc)));
    CHECK_FALSE(passes(g, "y", npy_f32(nib.y)));
    // The neighbouring group's scale: the integers are right, only the derived bound on y can say no.
    const Out nbr = candidate(g, {false, false, true});
    CHECK(passes(g, "acc", to_npy(nbr.acc)));
    CHECK_FALSE(passes(g, "y", npy_f32(nbr.y)));
  }
}

TEST_CASE("07 (d): one source for the bound; overflow impossible by construction or refused") {
  // a8w8's bound is the one-term case of the group sum's (the same function).
  for (const double o : {1.0, -3.5e-3, 7.25e4}) CHECK(a8w8_bound(o) == dequant_sum_bound(1, std::fabs(o)));
  CHECK(dequant_sum_bound(3, 1.0) > dequant_sum_bound(1, 1.0));
  // The largest group: 2^14 terms of |int8 x int4| <= 2^10 reach 2^24, still exact in float32.
  CHECK(kA8W4MaxGroup * 128 * 8 == int64_t{1} << 24);
  const std::vector<float> w(2 * 4 * 3, 1.0f);
  CHECK_THROWS_WITH_AS(quantize_experts(w, 2, 4, 3, true, kA8W4MaxGroup + 2), doctest::Contains("group = 16386 violates"),
                       Error);
  CHECK_THROWS_WITH_AS(quantize_experts(w, 2, 4, 3, true, 3), doctest::Contains("group = 3 violates even"), Error);
  const std::vector<float> odd(2 * 3 * 3, 1.0f);
  CHECK_THROWS_WITH_AS(quantize_experts(odd, 2, 3, 3, true, 2), doctest::Contains("K = 3 violates K % 2 == 0"), Error);
  CHECK_THROWS_WITH_AS(parse_recipe(nlohmann::json{{"recipe", "moe_a8w8"}, {"group", 64}}),
                       doctest::Contains("params.group violates recipe == moe_a8w4"), Error);
  CHECK_THROWS_WITH_AS(parse_recipe(nlohmann::json{{"recipe", "moe_a8w4"}, {"group", 7}}),
                       doctest::Contains("params.group = 7 violates"), Error);
  // A moe case without its routing, and a plain GEMM case given one, are refused naming topk_idx.
  const MoeCase g = load_moe("moe_a8w8");
  Tensors no_route = g.cf.inputs;
  no_route.erase("topk_idx");
  CHECK_THROWS_WITH_AS(run_oracle(contract("07-precision"), no_route, g.cf.params), doctest::Contains("topk_idx"), Error);
  Tensors bad_route = g.cf.inputs;
  Array<int64_t> idx = g.op.topk_idx;
  idx.data[3] = g.op.E;
  bad_route["topk_idx"] = to_npy(idx);
  CHECK_THROWS_WITH_AS(run_oracle(contract("07-precision"), bad_route, g.cf.params),
                       doctest::Contains("topk_idx[3] = 5 violates"), Error);
}
