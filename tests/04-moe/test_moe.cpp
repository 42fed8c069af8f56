// tests/04-moe/test_moe.cpp -- stage 04 reference rungs vs the committed goldens (data/golden/04-moe/):
// the gate's topk_idx, the sort order, group sizes and kept masks EXACTLY; the layer output of every
// registered rung, float32 by the tolerance rule (baseline dense_loop<float>, k = 2), float64 within
// 1e-12 of the output's scale (same math, other summation order). Every registered rung is exercised.
// This is the lab's test (scripts/lab check 04-moe): it reads the committed files, never regenerates.
#include <doctest/doctest.h>

#include <cmath>

#include "lab_check.hpp"
#include "test_moe_util.hpp"

using namespace ladder;
using namespace ladder::moe;
using test::load_moe_case;

namespace {

const Registry& moe_registry() {
  static const Registry reg = [] {
    Registry r;
    register_moe(r);
    return r;
  }();
  return reg;
}

// float64 rungs: the same math in double, other summation order -- within 1e-12 of the output's scale.
void check_f64(const std::string& id, const std::string& name, const Mat<double>& y, const Array<double>& oracle) {
  double scale = 0;
  for (double v : oracle.data) scale = std::max(scale, std::abs(v));
  const double tol = 1e-12 * (scale > 0 ? scale : 1);
  const Array<double> cand = Array<double>::from(y);
  if (cand.shape != oracle.shape) {
    FAIL_CHECK("rung " << id << " (float64), output y, case " << name << ": shape " << shape_str(cand.shape)
                       << ", expected " << shape_str(oracle.shape));
    return;
  }
  for (int64_t i = 0; i < oracle.size(); ++i)
    if (!(std::abs(cand.data[size_t(i)] - oracle.data[size_t(i)]) <= tol)) {
      FAIL_CHECK(fmt::format("rung {} (float64), output y, case {}: first bad element at {} of {}: expected {:.6e}, "
                             "got {:.6e} (|err| {:.2e} > tolerance {:.2e} = 1e-12 of the output's scale)",
                             id, name, test::position(i, oracle.shape, {"token", "col"}), shape_str(oracle.shape),
                             oracle.data[size_t(i)], cand.data[size_t(i)],
                             std::abs(cand.data[size_t(i)] - oracle.data[size_t(i)]), tol));
      return;
    }
}

}  // namespace

TEST_CASE("04-moe: every registered rung on every committed case; exact integers, float by the rule") {
  Coverage cov;
  const auto names = test::moe_input_cases();
  REQUIRE(names.size() >= 13);
  for (const auto& name : names) {
    CAPTURE(name);
    const test::MoeCase c = load_moe_case(name);
    const Mat<float> x32 = c.in.x.cast<float>();
    const Weights<float> w32 = c.in.weights.cast<float>();
    for (const std::string& id : c.rungs) {
      CAPTURE(id);
      const Rung& rung = moe_registry().find(kStage, "ref", id);
      cov.mark(rung);
      if (id == "gate") {
        const auto& g = rung.fn<GateFns>();
        CHECK(compare_exact(c.routing.topk_idx, g.f64(c.in.weights, c.in.x).topk_idx).pass);
        // Dyadic inputs make the logits exact in float32 too: the float gate routes identically.
        const ExactReport r = compare_exact(c.routing.topk_idx, g.f32(w32, x32).topk_idx);
        CHECK_MESSAGE(r.pass, r.text());
        continue;
      }
      const auto& f = rung.fn<LayerFns>();
      const LayerOut<float> o32 = f.f32(w32, x32, c.routing.cast<float>(), c.in.options);
      const LayerOut<double> o64 = f.f64(c.in.weights, c.in.x, c.routing, c.in.options);
      // Every failure names the rung, the output and the first bad position (tests/lab_check.hpp).
      const std::vector<std::string> tc = {"token", "col"}, pos = {"position"};
      const Array<float> y32 = Array<float>::from(o32.y);
      const CompareReport r = test::judge_f32(c, o32.y, c.in.dropping ? &o32.kept : nullptr);
      CHECK_MESSAGE(r.pass, test::failure_line({id, "float32", "y", name, tc}, c.y, y32, r) << "\n  " << r.text());
      check_f64(id, name, o64.y, c.y);
      if (!o32.sort_idx.empty()) {
        test::check_exact({id, "float32", "sort_idx", name, pos}, c.sort_idx.data, o32.sort_idx, c.sort_idx.shape);
        // ep: the shards' concatenated group sizes
        test::check_exact({id, "float32", "group_sizes", name, {"expert"}}, c.group_sizes.data, o32.group_sizes,
                          c.group_sizes.shape);
      }
      if (c.in.dropping) {
        test::check_exact({id, "float32", "kept", name, {"assignment"}}, c.kept.data, o32.kept, c.kept.shape);
        Index dropped = 0;
        for (Index v : c.kept.data) dropped += v == 0;
        CHECK_MESSAGE(o32.dropped == dropped, "rung " << id << " (float32), output dropped, case " << name
                                                       << ": expected " << dropped << " dropped assignments, got " << o32.dropped);
      }
      if (id == "ep_sharded") CHECK(o32.rows_per_shard.size() == size_t(c.in.options.shards));
    }
  }
  // The int8 rung has its own oracle: dense_loop<double> on the dequantised weights.
  const test::MoeCase c = load_moe_case("e16_T128");
  const Rung& q8 = moe_registry().find(kStage, "ref", "dropless_int8");
  cov.mark(q8);
  const Weights<double> dq = dequantized_weights(c.in.weights);
  const Array<double> oracle = Array<double>::from(dense_loop(dq, c.in.x, c.routing));
  const Mat<float> x32 = c.in.x.cast<float>();
  const auto r32 = c.routing.cast<float>();
  const Mat<float> base = dense_loop(dq.cast<float>(), x32, r32);
  const Mat<float> y = q8.fn<LayerFns>().f32(c.in.weights.cast<float>(), x32, r32, c.in.options).y;
  const Array<float> y32 = Array<float>::from(y);
  const CompareReport r = compare(oracle, y32, Array<float>::from(base), contract(kStage).tolerance("y", DType::F4));
  CHECK_MESSAGE(r.pass, test::failure_line({"dropless_int8", "float32", "y", "e16_T128 (int8 weights)", {"token", "col"}},
                                           oracle, y32, r) << "\n  " << r.text());
  // ... and it is not the unquantised layer: the int8 error is far above the float32 tolerance.
  CHECK_FALSE(test::judge_f32(c, y).pass);
  const auto missing = cov.missing(moe_registry(), kStage, "ref");
  for (const auto& m : missing) MESSAGE("not exercised: " << m);
  CHECK(missing.empty());
}

TEST_CASE("04-moe: the dropping case really drops, and the capacity rounds half up") {
  const test::MoeCase hot = load_moe_case("e8_dropping_hot");
  CHECK(capacity(2.0, 7, 2, 8) == 4);  // round(3.5)
  CHECK(capacity(1.0, 128, 4, 16) == 32);
  CHECK(capacity(1.3, 128, 2, 8) == 42);  // 41.6
  Index dropped = 0;
  for (Index v : hot.kept.data) dropped += v == 0;
  CHECK(dropped == 3);  // expert 5 receives all 7 tokens and keeps 4 (tokens 0-3)
  const test::MoeCase zipf = load_moe_case("e16_dropping_zipf");
  dropped = 0;
  for (Index v : zipf.kept.data) dropped += v == 0;
  CHECK_MESSAGE(dropped > 0, "golden case e16_dropping_zipf drops no assignment (its committed kept mask)");
}

TEST_CASE("04-moe: routing facts of the special cases") {
  const test::MoeCase cold = load_moe_case("e8_cold_expert");
  CHECK(cold.group_sizes.data[3] == 0);
  const test::MoeCase hot = load_moe_case("e8_hot_expert");
  CHECK(hot.group_sizes.data[5] == 128);
  const test::MoeCase all = load_moe_case("e8_k_eq_E");
  for (Index g : all.group_sizes.data) CHECK(g == 7);
  // V3 weights: normalised, then times route_scale 2.5; the bias never enters them.
  const test::MoeCase z = load_moe_case("e16_zipf");
  for (Index t = 0; t < z.in.x.rows(); ++t) {
    double s = 0;
    for (Index j = 0; j < 4; ++j) s += z.routing.topk_weight.data[size_t(t * 4 + j)];
    CHECK(std::abs(s - 2.5) < 1e-12);
  }
}

TEST_CASE("04-moe: ragged_dot follows the JAX contract") {
  const Index m = 6, K = 3, N = 2, G = 3;
  std::vector<double> lhs(m * K), rhs(G * K * N);
  for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = double(i % 5) - 2;
  for (size_t i = 0; i < rhs.size(); ++i) rhs[i] = double(i % 7) - 3;
  const std::vector<Index> gs{2, 0, 3};  // an empty group; row 5 is past sum(group_sizes)
  std::vector<double> out(m * N, 99.0);
  ragged_dot(lhs.data(), m, K, rhs.data(), G, N, gs.data(), out.data());
  const Index group_of[] = {0, 0, 2, 2, 2};
  std::vector<double> want(m * N, 0.0);  // small integers: exact in any summation order; row 5 stays 0
  for (Index i = 0; i < 5; ++i)
    for (Index n = 0; n < N; ++n)
      for (Index k = 0; k < K; ++k) want[size_t(i * N + n)] += lhs[size_t(i * K + k)] * rhs[size_t((group_of[i] * K + k) * N + n)];
  // Two checks, so that a failure says which part of the contract broke: the rows of the groups, the
  // zero row past sum(group_sizes) = 5.
  const auto rows = [N](const std::vector<double>& v, Index a, Index b) {
    return std::vector<double>(v.begin() + a * N, v.begin() + b * N);
  };
  test::check_exact({"ragged_dot", "float64", "out", "group_sizes_2_0_3, the rows of the groups", {"row", "col"}},
                    rows(want, 0, 5), rows(out, 0, 5), Shape{5, N});
  test::check_exact({"ragged_dot", "float64", "out", "group_sizes_2_0_3, row 5 past sum(group_sizes)", {"row", "col"}},
                    rows(want, 5, 6), rows(out, 5, 6), Shape{1, N});
  const std::vector<Index> too_many{4, 0, 3};
  CHECK_THROWS_AS(ragged_dot(lhs.data(), m, K, rhs.data(), G, N, too_many.data(), out.data()), Error);
  const std::vector<Index> negative{-1, 0, 3};
  CHECK_THROWS_AS(ragged_dot(lhs.data(), m, K, rhs.data(), G, N, negative.data(), out.data()), Error);
}

TEST_CASE("04-moe: the sort is a stable argsort by expert; the sentinel key goes last") {
  const std::vector<Index> keys{2, 0, 2, 1, 0, 3, 2};  // key 3 = sentinel with G = 3
  const Permutation p = sort_by_key(keys, 3);
  const std::vector<Index> inverse{3, 0, 4, 2, 1, 6, 5};
  const test::What w{"sort_by_key", "", "sort_idx", "keys_2_0_2_1_0_3_2", {"position"}};  // integers: no precision
  test::check_exact(w, {1, 4, 3, 0, 2, 6, 5}, p.sort_idx, Shape{7});
  test::check_exact({w.rung, w.precision, "group_sizes", w.test_case, {"expert"}}, {2, 1, 3}, p.group_sizes, Shape{3});
  test::check_exact({w.rung, w.precision, "inverse", w.test_case, {"assignment"}}, inverse, p.inverse, Shape{7});
  CHECK_THROWS_AS(sort_by_key({0, 4}, 3), Error);
}

TEST_CASE("04-moe: invalid input throws ladder::Error naming the parameter") {
  Config c{97, 61, 8, 2, 3, 1, 2.5, GateKind::v3_sigmoid, 0};
  CHECK_THROWS_WITH_AS(check_config(c), doctest::Contains("n_group = 3"), Error);
  c.n_group = 4;
  c.topk_group = 5;
  CHECK_THROWS_WITH_AS(check_config(c), doctest::Contains("topk_group = 5"), Error);
  const test::MoeCase e = load_moe_case("e8_T7");
  Routing<double> bad = e.routing;
  bad.topk_idx.data[3] = 8;
  CHECK_THROWS_WITH_AS(dense_loop(e.in.weights, e.in.x, bad), doctest::Contains("topk_idx[3] = 8"), Error);
  CHECK_THROWS_AS(sorted_dropping(e.in.weights, e.in.x, e.routing, 0.0), Error);
  CHECK_THROWS_AS(ep_sharded(e.in.weights, e.in.x, e.routing, 3), Error);
  const Mat<double> wrong_x = Mat<double>::Zero(2, 5);
  CHECK_THROWS_WITH_AS(gate(e.in.weights, wrong_x), doctest::Contains("x.cols = 5"), Error);
}

TEST_CASE("04-moe: cost -- the dense fallback does E/k times the routed FLOPs") {
  const Shape s{4096, 7168, 2048, 32, 8, 0};
  const Rung& loop = moe_registry().find(kStage, "ref", "dense_loop");
  const Rung& fb = moe_registry().find(kStage, "ref", "dense_fallback");
  CHECK(fb.cost(s).flops / loop.cost(s).flops == doctest::Approx(32.0 / 8.0).epsilon(1e-12));
  CHECK_THROWS_AS(loop.cost({1, 2, 3}), Error);
}
