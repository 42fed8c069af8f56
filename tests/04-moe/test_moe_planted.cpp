// tests/04-moe/test_moe_planted.cpp -- planted bugs the stage-04 checks must catch: each test
// builds the wrong variant from the reference's own pieces, runs it on a committed case and asserts
// that the exact or tolerance comparison that judges the real rung rejects it.
#include <doctest/doctest.h>

#include <cmath>

#include "test_moe_util.hpp"

using namespace ladder;
using namespace ladder::moe;
using test::load_moe_case;

TEST_CASE("planted bug: the inverse permutation off by one is caught by the tolerance rule") {
  for (const std::string name : {"e8_T7", "e16_T128", "e16_zipf"}) {
    CAPTURE(name);
    const test::MoeCase c = load_moe_case(name);
    const Weights<float> w = c.in.weights.cast<float>();
    const Mat<float> x = c.in.x.cast<float>();
    const Routing<float> r = c.routing.cast<float>();
    const Index Tn = x.rows(), k = w.cfg.top_k, n = Tn * k;
    Permutation p = sort_by_expert(r.topk_idx, w.cfg.n_experts);
    const Mat<float> o = expert_products(w, 0, gather_rows(x, p.sort_idx, k, n), p.group_sizes);
    Mat<float> y = unsort_combine(o, p, r, Tn, k);
    add_shared(w, x, y);
    CHECK(test::judge_f32(c, y).pass);  // the right permutation passes
    for (auto& i : p.inverse) i = (i + 1) % n;
    Mat<float> bad = unsort_combine(o, p, r, Tn, k);
    add_shared(w, x, bad);
    CHECK_FALSE(test::judge_f32(c, bad).pass);
  }
}

TEST_CASE("planted bug: group offsets shifted by one group are caught by the tolerance rule") {
  for (const std::string name : {"e8_T128", "e16_T7", "e8_cold_expert"}) {
    CAPTURE(name);
    const test::MoeCase c = load_moe_case(name);
    const Weights<float> w = c.in.weights.cast<float>();
    const Mat<float> x = c.in.x.cast<float>();
    const Routing<float> r = c.routing.cast<float>();
    const Index Tn = x.rows(), k = w.cfg.top_k;
    const Permutation p = sort_by_expert(r.topk_idx, w.cfg.n_experts);
    // group g's rows start where group g-1's started: every row is multiplied by the previous expert's rhs
    std::vector<Index> shifted(p.group_sizes.size(), 0);
    for (size_t g = 0; g + 1 < shifted.size(); ++g) shifted[g + 1] = p.group_sizes[g];
    const Mat<float> o = expert_products(w, 0, gather_rows(x, p.sort_idx, k, Tn * k), shifted);
    Mat<float> bad = unsort_combine(o, p, r, Tn, k);
    add_shared(w, x, bad);
    CHECK_FALSE(test::judge_f32(c, bad).pass);
  }
}

TEST_CASE("planted bug: the bias used in the weights (not only in selection) is caught") {
  for (const std::string name : {"e16_zipf", "e8_hot_expert"}) {
    CAPTURE(name);
    const test::MoeCase c = load_moe_case(name);
    const Weights<double>& w = c.in.weights;
    const Config& cfg = w.cfg;
    const Mat<double> logits = gate_logits(w, c.in.x);
    Routing<double> bad{Array<Index>({c.in.x.rows(), cfg.top_k}), Array<double>({c.in.x.rows(), cfg.top_k})};
    for (Index t = 0; t < c.in.x.rows(); ++t) {
      std::vector<double> sel(static_cast<size_t>(cfg.n_experts));
      for (Index e = 0; e < cfg.n_experts; ++e)
        sel[size_t(e)] = 1.0 / (1.0 + std::exp(-logits(t, e))) + w.bias[size_t(e)];
      select_topk(cfg, sel, sel, true, bad.topk_idx.data.data() + t * cfg.top_k,
                  bad.topk_weight.data.data() + t * cfg.top_k);  // weights from the biased scores
    }
    CHECK(compare_exact(c.routing.topk_idx, bad.topk_idx).pass);  // the selection is right ...
    const Mat<float> y = dense_loop(w.cast<float>(), Mat<float>(c.in.x.cast<float>()), bad.cast<float>());
    CHECK_FALSE(test::judge_f32(c, y).pass);  // ... the layer output is not
  }
}

TEST_CASE("planted bug: capacity rounded the wrong way (down) is caught by the exact kept mask") {
  const test::MoeCase c = load_moe_case("e8_dropping_hot");
  const Permutation p = sort_by_expert(c.routing.topk_idx, c.in.weights.cfg.n_experts);
  const double exact = c.in.options.capacity_factor * double(c.in.x.rows() * c.in.weights.cfg.top_k) /
                       double(c.in.weights.cfg.n_experts);
  const auto floor_cap = static_cast<Index>(std::floor(exact));
  CHECK(floor_cap != capacity(c.in.options.capacity_factor, c.in.x.rows(), c.in.weights.cfg.top_k,
                              c.in.weights.cfg.n_experts));
  const ExactReport r = compare_exact(c.kept, test::as_array(kept_mask(c.routing.topk_idx, p, floor_cap)));
  CHECK_FALSE(r.pass);
  CHECK(compare_exact(c.kept, test::as_array(kept_mask(c.routing.topk_idx, p, floor_cap + 1))).pass);
}
