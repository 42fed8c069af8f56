// tests/03-mla/test_mla_cost.cpp -- stage 03 costs: the notes' table exactly from the registered Cost, and
// the multiply-adds every rung performs (counted in mla/gemm.hpp as it runs) == its Cost formula.
#include <doctest/doctest.h>

#include "test_mla_util.hpp"

using namespace ladder;
using namespace ladder::mla;

namespace {

// d(field)/dL at B = 1 from the registered cost (exact: every formula is linear in L).
double per_token(const Rung& r, const Config& c, int64_t elem, double Cost::*field) {
  return r.cost(cost_shape(c, 1, 2, elem)).*field - r.cost(cost_shape(c, 1, 1, elem)).*field;
}

}  // namespace

TEST_CASE("the notes' table, exact from each rung's Cost: bf16 cache bytes and FLOPs per token per layer") {
  const Config v2 = deepseek_v2();
  struct Row {
    const char* id;
    double cache_bytes, flops;
  };
  // the MLA notes' tables of cache bytes and FLOPs per token per layer (all exact)
  for (const Row& row : {Row{"CD", 81920, 81920}, Row{"CC", 1152, 33636352}, Row{"A_CC", 1152, 278528},
                         Row{"A_CC_ME", 1152, 278528}, Row{"AM", 1152, 278528}, Row{"flash_mla", 1152, 278528}}) {
    CAPTURE(row.id);
    const Rung& r = registry().find(kStage, "ref", row.id);
    CHECK(per_token(r, v2, 2, &Cost::bytes_read) == row.cache_bytes);
    CHECK(per_token(r, v2, 2, &Cost::flops) == row.flops);
  }
  // The notes' AM argument, per query: 201 + 671 MFLOP (AM) vs 67 + 185 (A_CC_ME) on the nope/out paths.
  const QueryFlops am = query_flops(Variant::AM, v2), me = query_flops(Variant::A_CC_ME, v2);
  CHECK(am.q_nope == 2.0 * 128 * 512 * 1536);  // 201,326,592
  CHECK(am.out == 2.0 * 5120 * 128 * 512);     // 671,088,640
  CHECK(me.q_nope == 2.0 * 1536 * 128 * 128 + 2.0 * 128 * 128 * 512);  // 67,108,864
  CHECK(me.out == 2.0 * 128 * 512 * 128 + 2.0 * 128 * 128 * 5120);     // 184,549,376
}

TEST_CASE("counted multiply-adds == the Cost formula for every rung (B = 3, L = 70, small config)") {
  const Weights<float> W = random_weights(small_config(), 5);
  const Inputs in = make_inputs(W, InputSpec{{70, 70, 70}, 6, true, 2, false});
  for (const Rung* r : registry().stage(kStage, "ref")) {
    CAPTURE(r->key());
    const auto& f = r->fn<RungFns>().f32;
    const Prepared<float> p = f.prepare(W, in.cache);  // prefill, outside the step
    FlopCount count;
    {
      CountFlops guard(count);
      test::mla_coverage().mark(*r);
      f.decode(W, p, in.step);
    }
    CHECK(count.flops() == r->cost(cost_shape(W.cfg, 3, 70)).flops);
  }
}

TEST_CASE("counted multiply-adds follow the formula's split into per-query and per-token parts") {
  const Weights<float> W = random_weights(small_config(), 5);
  for (const Rung* r : registry().stage(kStage, "ref")) {
    CAPTURE(r->key());
    const auto& f = r->fn<RungFns>().f32;
    double counted[2];
    for (int i = 0; i < 2; ++i) {
      const Inputs in = make_inputs(W, InputSpec{{1 + 64 * i}, 7, false, 0, false});
      const Prepared<float> p = f.prepare(W, in.cache);
      FlopCount count;
      CountFlops guard(count);
      f.decode(W, p, in.step);
      counted[i] = count.flops();
    }
    const Variant v = r->fn<RungFns>().variant;
    CHECK((counted[1] - counted[0]) / 64 == flops_per_cached_token(v, W.cfg));
    CHECK(counted[0] - flops_per_cached_token(v, W.cfg) == query_flops(v, W.cfg).total());
  }
}

TEST_CASE("cost: traffic, scratch and resident bytes as formulas of the shape") {
  const Config c = small_config();
  const auto& reg = registry();
  const Cost cd = reg.find(kStage, "ref", "CD").cost(cost_shape(c, 2, 100));
  CHECK(cd.bytes_written == 2 * 256 * 4);
  CHECK(cd.extra_bytes == 2.0 * 2 * 8 * 100 * 4);  // scores and attention weights [B, H, L]
  const Cost acc = reg.find(kStage, "ref", "A_CC").cost(cost_shape(c, 2, 100));
  const Cost me = reg.find(kStage, "ref", "A_CC_ME").cost(cost_shape(c, 2, 100));
  CHECK(acc.extra_bytes - me.extra_bytes == 2.0 * 8 * 100 * 80 * 4);  // key_states [B, H, L, kv_lora + rope]
  CHECK(acc.flops == me.flops);
  CHECK(acc.bytes_read == me.bytes_read);
  const Cost fl = reg.find(kStage, "ref", "flash_mla").cost(cost_shape(c, 2, 100));
  CHECK(fl.extra_bytes == 2.0 * 1 * 8 * 65 * 4);  // one split of <= 4 pages: partial o and lse per head
  CHECK(resident_bytes(cd) == cd.bytes_read + cd.bytes_written + cd.extra_bytes);
  CHECK_THROWS_WITH_AS(reg.find(kStage, "ref", "CD").cost(Shape{1, 2}), doctest::Contains("must be {B, L"), Error);
  CHECK_THROWS_WITH_AS(reg.find(kStage, "ref", "CD").cost(cost_shape(c, 0, 10)), doctest::Contains("B = 0"), Error);
}

TEST_CASE("CountFlops: one counter at a time") {
  FlopCount a, b;
  CountFlops guard(a);
  CHECK_THROWS_WITH_AS(CountFlops{b}, doctest::Contains("already active"), Error);
}
