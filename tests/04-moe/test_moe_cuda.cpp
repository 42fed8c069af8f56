// tests/04-moe/test_moe_cuda.cpp -- stage 04 CUDA rungs (cuda/src/04-moe/*.cu through SIMT, every schedule)
// vs the committed goldens and the references: the gate's topk_idx and the permutation exactly, the
// dropless layer by the tolerance rule; the grouped GEMM vs ragged_dot<float> on empty groups, a group
// taking every row, and rows past sum(group_sizes). Every registered CUDA rung of the stage is run.
#include <doctest/doctest.h>

#include "ladder/cuda/device.hpp"
#include "ladder/cuda/04-moe/moe.hpp"
#include "test_moe_util.hpp"

using namespace ladder;
using namespace ladder::moe;

// Under ThreadSanitizer (the race itself is the report there) the small cases only: tails of every tile,
// top_k 4 and top_k = E, the v2 gate, no shared expert and an empty group reach every kernel's code paths
// and barriers; the T = 128 and zipf cases run the same paths again (TSan CPU time 30 s for all, 13 s for these).
// The schedules' builds run every case. A barrier removed from the grouped GEMM or the permutation is
// still reported by TSan on this subset (tried by hand on moe_gemm.cu's two barriers and moe.cu's).
bool run_under_this_build(const std::string& name) {
#if defined(SIMT_TSAN)
  for (const char* c : {"e8_T7", "e16_T7", "e8_k_eq_E", "e8_v2_gate", "e8_no_shared", "e8_cold_expert"})
    if (name == c) return true;
  return false;
#else
  (void)name;
  return true;
#endif
}

TEST_CASE("04-moe CUDA rungs on every committed case") {
  Coverage cov;
  const Registry& reg = registry();
  for (const auto& name : test::moe_input_cases()) {
    if (!run_under_this_build(name)) continue;
    CAPTURE(name);
    const test::MoeCase c = test::load_moe_case(name);
    if (c.in.dropping) continue;
    const Weights<float> w = c.in.weights.cast<float>();
    const Mat<float> x = c.in.x.cast<float>();
    const Rung& g = reg.find(kStage, "cuda", "gate");
    cov.mark(g);
    const Routing<float> r = g.fn<GateFns>().f32(w, x);
    const ExactReport ri = compare_exact(c.routing.topk_idx, r.topk_idx);
    CHECK_MESSAGE(ri.pass, ri.text());
    const Routing<float> ref_r = gate(w, x);
    double werr = 0;
    for (size_t i = 0; i < r.topk_weight.data.size(); ++i)
      werr = std::max(werr, double(std::abs(r.topk_weight.data[i] - ref_r.topk_weight.data[i])));
    CHECK(werr <= 4 * 0x1p-23 * c.in.weights.cfg.route_scale);  // the same float operations in the same order
    const Rung& d = reg.find(kStage, "cuda", "dropless");
    cov.mark(d);
    const LayerOut<float> o = d.fn<LayerFns>().f32(w, x, c.routing.cast<float>(), c.in.options);
    const CompareReport rep = test::judge_f32(c, o.y);
    CHECK_MESSAGE(rep.pass, rep.text());
    CHECK(compare_exact(c.sort_idx, test::as_array(o.sort_idx)).pass);
    CHECK(compare_exact(c.group_sizes, test::as_array(o.group_sizes)).pass);
  }
  CHECK(cov.missing(reg, kStage, "cuda").empty());
}

TEST_CASE("04-moe CUDA grouped GEMM vs ragged_dot<float>: empty groups, one group with every row, the tail") {
  Rng rng(44);
  const Index K = 37, N = 19, G = 5, m = 53;
  std::vector<float> lhs(static_cast<size_t>(m * K)), rhs(static_cast<size_t>(G * K * N));
  for (auto& v : lhs) v = float(rng.normal());
  for (auto& v : rhs) v = float(rng.normal());
  for (const std::vector<Index>& gs : {std::vector<Index>{10, 0, 17, 0, 20}, std::vector<Index>{0, 0, 53, 0, 0},
                                        std::vector<Index>{0, 0, 0, 0, 0}, std::vector<Index>{1, 2, 3, 4, 5}}) {
    std::vector<float> want(static_cast<size_t>(m * N));
    ragged_dot(lhs.data(), m, K, rhs.data(), G, N, gs.data(), want.data());
    cuda::DeviceBuffer<float> dl(lhs), dr(rhs), out(static_cast<size_t>(m * N));
    cuda::DeviceBuffer<int64_t> dg(gs);
    cuda::moe::ragged_dot(dl.data(), m, K, dr.data(), G, N, dg.data(), out.data());
    const std::vector<float> got = out.to_host();
    double err = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, double(std::abs(got[i] - want[i])));
      scale = std::max(scale, double(std::abs(want[i])));
    }
    CHECK(err <= 64 * 0x1p-23 * (scale + 1));  // two float orders of a K = 37 sum
    Index total = 0;
    for (Index g : gs) total += g;
    for (Index i = total * N; i < m * N; ++i) CHECK(got[static_cast<size_t>(i)] == 0.0f);
  }
  CHECK(cuda::moe::make_tiles({0, 17, 0}, 19).size() == 2 * 2);  // 17 rows -> 2 row tiles x 2 column tiles
}

TEST_CASE("04-moe CUDA permutation == the reference's stable counting sort (more than one chunk)") {
  Rng rng(45);
  std::vector<Index> keys(1000);
  for (auto& k : keys) k = Index(rng.uniform_int(9));  // key 8 = sentinel with G = 8
  const Permutation want = sort_by_key(keys, 8);
  cuda::DeviceBuffer<int64_t> dk(keys), si(keys.size()), inv(keys.size()), gs(8);
  cuda::moe::permute(dk.data(), Index(keys.size()), 8, si.data(), inv.data(), gs.data());
  CHECK(si.to_host() == want.sort_idx);
  CHECK(inv.to_host() == want.inverse);
  CHECK(gs.to_host() == want.group_sizes);
  CHECK_THROWS_AS(cuda::moe::permute(dk.data(), 4, 0, si.data(), inv.data(), gs.data()), Error);
}
