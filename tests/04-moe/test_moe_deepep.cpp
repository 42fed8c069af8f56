// tests/04-moe/test_moe_deepep.cpp -- stage 04's expert parallelism in DeepEP's dispatch / combine layouts (layout
// contracts "04-moe/deepep_normal" and "04-moe/deepep_low_latency", ref/src/04-moe/deepep*.cpp): the candidate computed
// another way (the senders' loop, rows in reverse order, combine at float32) passes every output, and so do rows in yet
// another order with NaN in the unspecified padding; each mutant of a real port bug fails with the output that names it
// (a dropped / duplicated token, a token sent to a rank holding none of its experts, is_token_in_rank wrong, local vs
// global recv_topk_idx, per-expert counts off by one, an FP8 scale of the wrong block, combine weights twice / not at
// all, -1 entries routed); bad input is refused naming the parameter.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ladder/04-moe/deepep.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/formats.hpp"

using namespace ladder;
using namespace ladder::moe;

namespace {

struct Case {
  std::string layout;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case make(bool ll, DeepEpSpec s = {}) {
  Case c{ll ? kDeepEpLowLatency : kDeepEpNormal, deepep_inputs(s), deepep_params(s, ll), {}};
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

std::vector<std::string> failing(const Case& c, const Tensors& cand) {
  std::vector<std::string> f;
  for (const CheckReport& r : deepep_check(c.layout, c.in, c.params, c.expected, cand))
    if (!r.pass) f.push_back(r.output);
  return f;
}

}  // namespace

TEST_CASE("deepep: the layouts are found by name and describe themselves") {
  CHECK(contract(kDeepEpNormal).outputs.front().name == "num_tokens_per_rank");
  CHECK(contract(kDeepEpLowLatency).outputs.front().name == "recv_count");
  CHECK(describe(contract(kDeepEpLowLatency)).find("recv_x_scales") != std::string::npos);
  CHECK_THROWS_WITH_AS(contract("04-moe/deepep_lowlatency"), doctest::Contains("04-moe/deepep_low_latency"), Error);
}

TEST_CASE("deepep: the oracle's counts agree with each other (tokens per rank, per expert, received)") {
  const Case c = make(false);
  const auto pr = npy_as_int64(c.expected.at("num_tokens_per_rank"), "a").data;
  const auto nr = npy_as_int64(c.expected.at("num_recv_tokens"), "b").data;
  const auto pe = npy_as_int64(c.expected.at("num_tokens_per_expert"), "c").data;
  const auto re = npy_as_int64(c.expected.at("num_recv_tokens_per_expert"), "d").data;
  const int64_t R = 4, E = 16;
  for (int64_t d = 0; d < R; ++d) {
    int64_t sent = 0;
    for (int64_t s = 0; s < R; ++s) sent += pr[s * R + d];
    CHECK(sent == nr[d]);  // what every rank sends to d is what d receives
  }
  for (int64_t e = 0; e < E; ++e) {
    int64_t sent = 0;
    for (int64_t s = 0; s < R; ++s) sent += pe[s * E + e];
    CHECK(sent == re[e]);  // [R, L] flattened is [E]: DeepEP's gbl_num_tokens_per_expert.view(num_ranks, -1)
  }
  const auto lc = npy_as_int64(make(true).expected.at("recv_count"), "e").data;
  CHECK(lc == re);  // the low-latency counts per expert are the same tokens
}

TEST_CASE("deepep: correct candidates computed other ways pass every output; mutants fail where they should") {
  const std::map<std::string, std::string> caught_by = {
      {"a dropped token (a received row lost, counts unchanged)", "recv_src"},
      {"a duplicated token (one row received twice)", "recv_src"},
      {"-1 topk entries routed (a negative index wrapping to the last expert)", "combined_x"},
      {"combine weights applied twice", "combined_x"},
      {"combine weights not applied", "combined_x"},
      {"per-expert count off by one (recv_count)", "recv_count"},
      {"FP8 scale of the wrong 128-block", "recv_x_scales"},
      {"is_token_in_rank wrong for one token", "is_token_in_rank"},
      {"recv_topk_idx global instead of local", "recv_topk_idx"},
      {"per-expert count off by one (num_recv_tokens_per_expert)", "num_recv_tokens_per_expert"},
      {"a token sent to a rank holding none of its experts", "recv_src"}};
  for (const bool ll : {false, true}) {
    const Case c = make(ll);
    const std::vector<DeepEpVariant> vs = deepep_variants(c.layout, c.in, c.params);
    CHECK(vs.size() == (ll ? 9u : 11u));
    for (const DeepEpVariant& v : vs) {
      const std::vector<std::string> f = failing(c, v.candidate);
      INFO(c.layout, ": ", v.name, " failed: ", f.size());
      if (!v.mutant) {
        CHECK(f.empty());
        continue;
      }
      REQUIRE(caught_by.count(v.name));
      CHECK(std::find(f.begin(), f.end(), caught_by.at(v.name)) != f.end());
    }
  }
}

TEST_CASE("deepep: -1 routed changes the layout counts; a misrouted token the received count") {
  const Case c = make(false);
  for (const DeepEpVariant& v : deepep_variants(c.layout, c.in, c.params)) {
    const std::vector<std::string> f = failing(c, v.candidate);
    if (v.name.rfind("-1 topk", 0) == 0) CHECK(std::find(f.begin(), f.end(), "num_tokens_per_expert") != f.end());
    if (v.name.rfind("a token sent", 0) == 0) CHECK(std::find(f.begin(), f.end(), "num_recv_tokens") != f.end());
  }
}

TEST_CASE("deepep: a receive buffer without the candidate's recv_src beside it is refused naming recv_src") {
  const Case c = make(false);
  const Tensors good = deepep_run(c.layout, c.in, c.params);
  CHECK_THROWS_WITH_AS(check(contract(c.layout), c.in, c.params, c.expected, "recv_x", good.at("recv_x")),
                       doctest::Contains("recv_src"), Error);
  const CheckReport r = check(contract(c.layout), c.in, c.params, c.expected, "recv_x", good.at("recv_x"), "", good);
  INFO(r.text);
  CHECK(r.pass);
  CHECK(r.text.find("matched") != std::string::npos);
}

TEST_CASE("deepep: bad input is refused naming the parameter") {
  const Case c = make(false);
  const Contract& k = contract(kDeepEpNormal);
  nlohmann::json p = c.params;
  p.erase("num_experts");
  CHECK_THROWS_WITH_AS(run_oracle(k, c.in, p), doctest::Contains("param num_experts is required"), Error);
  p = c.params, p["num_experts"] = 18;
  CHECK_THROWS_WITH_AS(run_oracle(k, c.in, p), doctest::Contains("multiple of num_ranks"), Error);
  p = c.params, p["num_ranks"] = 2;
  CHECK_THROWS_WITH_AS(run_oracle(k, c.in, p), doctest::Contains("input x"), Error);
  Tensors in = c.in;
  Array<int64_t> idx = npy_as_int64(in.at("topk_idx"), "topk_idx");
  idx.data[1] = 16;
  in["topk_idx"] = to_npy(idx);
  CHECK_THROWS_WITH_AS(run_oracle(k, in, c.params), doctest::Contains("topk_idx[0, 0, 1] = 16"), Error);
  idx.data[1] = idx.data[0];
  in["topk_idx"] = to_npy(idx);
  CHECK_THROWS_WITH_AS(run_oracle(k, in, c.params), doctest::Contains("twice"), Error);
  const Case l = make(true);
  p = l.params, p["num_max_dispatch_tokens_per_rank"] = 5;
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepEpLowLatency), l.in, p),
                       doctest::Contains("num_max_dispatch_tokens_per_rank = 5"), Error);
  DeepEpSpec s;
  s.hidden = 200;
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepEpLowLatency), deepep_inputs(s), deepep_params(s, true)),
                       doctest::Contains("multiple of 128"), Error);
}

TEST_CASE("deepep low latency: DeepEP's tests' cast (x * (448 / amax), scale amax / 448) gives stage 07's codes here") {
  // DeepEP tests/utils.py per_token_cast_to_fp8 multiplies by 448 / amax (amax clamped at 1e-4); stage 07's quantiser
  // divides by amax / 448. The two pre-images may differ in the last bit, which moves an E4M3 code only at a rounding
  // midpoint: count how often on the default case (every block's amax is far above 1e-4).
  const Case c = make(true);
  const Array<float> x = from_npy<float>(c.in.at("x"), "x");
  const int64_t H = x.shape[2];
  int64_t same = 0, total = 0;
  for (int64_t g = 0; g < x.shape[0] * x.shape[1]; ++g)
    for (int64_t b = 0; b < H / 128; ++b) {
      float amax = 0;
      for (int64_t h = b * 128; h < b * 128 + 128; ++h) amax = std::max(amax, std::fabs(x.data[g * H + h]));
      amax = std::max(amax, 1e-4f);
      for (int64_t h = b * 128; h < b * 128 + 128; ++h, ++total) {
        const float s = amax / 448.0f;
        same += formats::to_e4m3(x.data[g * H + h] * (448.0f / amax)) == formats::to_e4m3(x.data[g * H + h] / s);
      }
    }
  MESSAGE(same, " of ", total, " codes equal");
  CHECK(same == total);
}

TEST_CASE("deepep: a receive buffer of the wrong dtype or shape is bad input, not a reordering") {
  const Case c = make(false);
  Tensors good = deepep_run(c.layout, c.in, c.params);
  const Array<float> x = from_npy<float>(good.at("recv_x"), "recv_x");
  Array<double> x64(x.shape);
  std::copy(x.data.begin(), x.data.end(), x64.data.begin());
  CHECK_THROWS_WITH_AS(check(contract(c.layout), c.in, c.params, c.expected, "recv_x", to_npy(x64), "", good),
                       doctest::Contains("dtype"), Error);
  Array<float> cut({x.shape[0], x.shape[1] - 1, x.shape[2]});
  CHECK_THROWS_WITH_AS(check(contract(c.layout), c.in, c.params, c.expected, "recv_x", to_npy(cut), "", good),
                       doctest::Contains("shape"), Error);
}
