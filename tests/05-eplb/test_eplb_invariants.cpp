// tests/05-eplb/test_eplb_invariants.cpp -- stage 05 EPLB on random and tie-heavy inputs, checked by
// invariants (ladder/05-eplb/check.hpp) and by brute force; corrupted maps and a wrong replication
// rule show that the checks can fail; results do not depend on the OpenMP thread count.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "golden_util.hpp"
#include "ladder/05-eplb/eplb.hpp"

using namespace ladder;
using namespace ladder::eplb;

namespace {

struct Layout {
  Index layers, experts, replicas, groups, nodes, gpus;
};

// Awkward layouts: both policies, one GPU, one slot per GPU, many nodes, no redundant slot.
const std::vector<Layout> kLayouts = {
    {2, 12, 16, 4, 2, 8},  {3, 30, 42, 6, 3, 6},    {2, 13, 13, 1, 1, 1},  {4, 15, 20, 5, 1, 4},
    {3, 97, 104, 1, 2, 8}, {2, 16, 32, 8, 4, 32},   {5, 8, 24, 3, 2, 12},  {2, 64, 72, 8, 4, 8},
    {1, 1, 7, 1, 1, 7},    {2, 256, 288, 8, 18, 144},
};

// Tie-heavy and skewed weight families.
Mat<double> make_weight(int kind, Index L, Index n, Rng& rng) {
  switch (kind) {
    case 0: return zipf_loads(rng, L, n, 64 * n, 1.0);
    case 1: return zipf_loads(rng, L, n, 64 * n, 0.5);
    case 2: return Mat<double>::Zero(L, n);
    case 3: return Mat<double>::Constant(L, n, 5.0);
    case 4: {
      Mat<double> w = Mat<double>::Zero(L, n);
      for (Index l = 0; l < L; ++l) w(l, static_cast<Index>(rng.uniform_int(static_cast<uint64_t>(n)))) = 1000;
      return w;
    }
    default: {
      Mat<double> w(L, n);
      for (Index l = 0; l < L; ++l)
        for (Index e = 0; e < n; ++e) w(l, e) = static_cast<double>(rng.uniform_int(3));
      return w;
    }
  }
}
constexpr int kWeightKinds = 6;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

// Smallest achievable max_e w[e] / c[e] over all c >= 1 with sum c = num_phy (exhaustive).
double brute_force_minmax(const std::vector<double>& w, Index num_phy) {
  const Index n = static_cast<Index>(w.size());
  std::vector<Index> c(static_cast<size_t>(n), 1);
  double best = std::numeric_limits<double>::infinity();
  std::function<void(Index, Index)> rec = [&](Index i, Index left) {
    if (i == n - 1) {
      c[static_cast<size_t>(i)] = 1 + left;
      double mx = 0;
      for (size_t e = 0; e < w.size(); ++e) mx = std::max(mx, w[e] / static_cast<double>(c[e]));
      best = std::min(best, mx);
      return;
    }
    for (Index k = 0; k <= left; ++k) c[static_cast<size_t>(i)] = 1 + k, rec(i + 1, left - k);
  };
  rec(0, num_phy - n);
  return best;
}

double max_load_per_replica(const Mat<double>& w, const IndexMat& logcnt, Index l) {
  double mx = 0;
  for (Index e = 0; e < w.cols(); ++e) mx = std::max(mx, w(l, e) / static_cast<double>(logcnt(l, e)));
  return mx;
}

}  // namespace

TEST_CASE("random and tie-heavy inputs: every placement satisfies the invariants") {
  Rng rng(2024);
  for (const Layout& t : kLayouts)
    for (int kind = 0; kind < kWeightKinds; ++kind) {
      CAPTURE(t.experts);
      CAPTURE(t.replicas);
      CAPTURE(t.nodes);
      CAPTURE(kind);
      const Mat<double> w = make_weight(kind, t.layers, t.experts, rng);
      const Placement p = rebalance_experts(w, t.replicas, t.groups, t.nodes, t.gpus);
      CHECK(p.policy == (t.groups % t.nodes == 0 ? Policy::hierarchical : Policy::global));
      const auto v = check_placement(p, t.layers, t.experts);
      CHECK_MESSAGE(v.empty(), "rung " << std::string(p.policy == Policy::hierarchical ? "hierarchical" : "global")
                    << ", output placement, case random_" << t.experts << "x" << t.replicas << "_kind" << kind
                    << " (seeded random weights): " << joined(v));
      // Load is conserved: the replicas of an expert carry exactly its weight between them.
      const Mat<double> loads = gpu_loads(w, p);
      for (Index l = 0; l < t.layers; ++l) CHECK(loads.row(l).sum() == doctest::Approx(w.row(l).sum()));
    }
}

TEST_CASE("replicate_experts minimises the maximum load per replica (brute force on small cases)") {
  Rng rng(7);
  for (Index n = 1; n <= 5; ++n)
    for (Index extra = 0; extra <= 5; ++extra)
      for (int trial = 0; trial < 8; ++trial) {
        Mat<double> w(1, n);  // small integers: many ties
        for (Index e = 0; e < n; ++e) w(0, e) = static_cast<double>(rng.uniform_int(trial < 4 ? 4 : 50));
        const Replication r = replicate_experts(w, n + extra);
        CAPTURE(n);
        CAPTURE(extra);
        CHECK(r.logcnt.sum() == n + extra);
        const double got = max_load_per_replica(w, r.logcnt, 0);
        const double best = brute_force_minmax(std::vector<double>(w.data(), w.data() + n), n + extra);
        CHECK_MESSAGE(got == best, "rung replicate_experts, output logcnt, case random_n" << n << "_extra" << extra
                      << "_trial" << trial << " (seeded random weights): the heaviest replica carries " << got
                      << ", the best counts give " << best);
      }
}

TEST_CASE("a wrong replication rule (extra slots round-robin by expert id) is caught by the brute force" *
          doctest::test_suite("judge")) {
  const Mat<double> w = (Mat<double>(1, 4) << 1, 2, 3, 40).finished();
  IndexMat logcnt = IndexMat::Ones(1, 4);
  for (Index p = 0; p < 4; ++p) ++logcnt(0, p % 4);  // 8 slots, blind to the loads: every expert gets 2
  CHECK(max_load_per_replica(w, logcnt, 0) > brute_force_minmax({1, 2, 3, 40}, 8));  // 20 vs 8
  CHECK(max_load_per_replica(w, replicate_experts(w, 8).logcnt, 0) == brute_force_minmax({1, 2, 3, 40}, 8));
}

TEST_CASE("the invariant checker reports corrupted placements" * doctest::test_suite("judge")) {
  const Mat<double> w = (Mat<double>(2, 12) << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
                         20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27)
                            .finished();
  const Placement good = rebalance_experts(w, 16, 4, 2, 8);
  REQUIRE(check_placement(good, 2, 12).empty());
  const auto expect = [](const Placement& bad, const char* what) {
    const auto v = check_placement(bad, 2, 12);
    CAPTURE(what);
    CHECK_MESSAGE(joined(v).find(what) != std::string::npos, joined(v));
  };
  const auto relink = [](Placement& p) { p.log2phy = make_log2phy(p.phy2log, p.phyrank, p.logcnt); };

  Placement p = good;  // slot 12 (expert 0, its only replica) now holds expert 1: logcnt is stale
  p.phy2log(0, 12) = 1;
  expect(p, "logcnt[0][0] = 1 but phy2log holds expert 0 in 0 slots");

  p = good;  // ... and with logcnt made consistent, expert 0 has no replica left
  p.phy2log(0, 12) = 1, p.phyrank(0, 12) = 2, p.logcnt(0, 0) = 0, p.logcnt(0, 1) = 3;
  relink(p);
  expect(p, "violates logcnt >= 1 (every expert has a replica)");

  p = good;  // slots 0 and 2 (both expert 5) claim the same replica rank
  p.phyrank(0, 2) = p.phyrank(0, 0);
  expect(p, "are both replica");

  p = good;
  p.log2phy.data[5 * 2 + 1] = 7;  // layer 0, expert 5, rank 1 -> slot 7 (it holds expert 4)
  expect(p, "violates log2phy[phy2log[s]][phyrank[s]] == s");

  p = good;
  p.log2phy.data[0 * 2 + 1] = 3;  // expert 0 has one replica: its rank-1 entry must stay -1
  expect(p, "violates padding == -1");

  p = good;  // swap a slot of node 0 with a slot of node 1, keeping every map consistent
  std::swap(p.phy2log(0, 1), p.phy2log(0, 9));
  std::swap(p.phyrank(0, 1), p.phyrank(0, 9));
  relink(p);
  expect(p, "spans nodes");

  p = good;
  p.phy2log(1, 0) = 12;
  expect(p, "violates 0 <= phy2log < num_log = 12");

  p = good;
  p.logcnt = IndexMat::Ones(2, 11);
  expect(p, "violates shape [num_layers, num_log]");

  p = good;
  p.num_gpus = 5;
  expect(p, "violate equal slots per GPU");
}

TEST_CASE("every violation line starts with the name of the invariant it breaks" * doctest::test_suite("judge")) {
  const Mat<double> w = (Mat<double>(1, 8) << 9, 1, 1, 1, 5, 1, 1, 1).finished();
  const Placement good = rebalance_experts(w, 12, 4, 2, 4);
  REQUIRE(check_placement(good, 1, 8).empty());
  std::vector<Placement> bad(5, good);
  bad[0].phy2log(0, 0) = 8;                                // phy2log_in_range
  bad[1].logcnt(0, 1) = 2;                                 // logcnt_counts_slots
  bad[2].log2phy.data[1] = -7;                             // log2phy_inverse or _padding
  std::swap(bad[3].phy2log(0, 0), bad[3].phy2log(0, 11));  // group_on_one_node (ranks, log2phy stale too)
  bad[4].num_gpus = 5;                                     // equal_slots_per_gpu
  for (const Placement& p : bad) {
    const auto v = check_placement(p, 1, 8);
    REQUIRE(!v.empty());
    for (const std::string& line : v) {
      const bool named = std::any_of(std::begin(kInvariants), std::end(kInvariants), [&](const Invariant& i) {
        return line.rfind(std::string(i.name) + ": ", 0) == 0;
      });
      CHECK_MESSAGE(named, "no invariant name at the start of: " << line);
    }
  }
}

// One layer, the global policy: slots, ranks and log2phy derived from phy2log.
Placement global_placement(const std::vector<Index>& slots, Index num_log, Index num_gpus) {
  Placement p;
  const Index R = static_cast<Index>(slots.size());
  p.phy2log = IndexMat(1, R), p.phyrank = IndexMat(1, R), p.logcnt = IndexMat::Zero(1, num_log);
  for (Index s = 0; s < R; ++s) p.phy2log(0, s) = slots[s], p.phyrank(0, s) = p.logcnt(0, slots[s])++;
  p.log2phy = make_log2phy(p.phy2log, p.phyrank, p.logcnt);
  p.policy = Policy::global, p.num_gpus = num_gpus;
  return p;
}

TEST_CASE("distinct_per_gpu: only where promised; eplb.py does not promise it (EPLB issue #22)" *
          doctest::test_suite("judge")) {
  CheckOptions distinct;
  distinct.distinct_per_gpu = true;
  // 4 experts, 8 slots, 4 GPUs of 2 slots: expert 0 on three GPUs, never twice on one.
  const Placement spread = global_placement({0, 1, 0, 2, 0, 3, 1, 2}, 4, 4);
  CHECK(check_placement(spread, 1, 4, distinct).empty());
  // The same counts with two replicas of expert 0 on GPU 0: consistent maps, so only the promise breaks.
  const Placement twice = global_placement({0, 0, 1, 2, 0, 3, 1, 2}, 4, 4);
  CHECK(check_placement(twice, 1, 4).empty());
  const auto v = check_placement(twice, 1, 4, distinct);
  REQUIRE(v.size() == 1);
  CHECK(v[0] == "distinct_per_gpu: layer 0: GPU 0 holds expert 0 in slots 0 and 1");
  // Issue #22's layout (256 experts, 288 slots, 16 groups, 2 nodes, 32 GPUs): our eplb.py reproduction also puts two
  // replicas of one hot expert on one GPU for some Zipf loads -- valid by the policy's own invariants.
  int with_duplicates = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    Rng rng(seed);
    const Placement p = rebalance_experts(zipf_loads(rng, 1, 256, 4096 * 8, 1.2), 288, 16, 2, 32);
    REQUIRE(check_placement(p, 1, 256).empty());
    with_duplicates += !check_placement(p, 1, 256, distinct).empty();
  }
  CHECK(with_duplicates > 0);
  MESSAGE(with_duplicates << " of 16 seeded Zipf loads give a GPU two replicas of one expert");
}

TEST_CASE("results do not depend on the OpenMP thread count") {
  // Shapes big enough that the packing and replication loops do run in parallel (detail::kParallelWork).
  Rng rng(58);
  const Mat<double> w = zipf_loads(rng, 128, 256, 4096 * 8, 1.0);
  REQUIRE(128.0 * 288 * 144 >= ladder::eplb::detail::kParallelWork);  // global packing: rows x items x packs
  Placement g1, g4;
  test::with_threads(1, [&] { g1 = rebalance_experts(w, 288, 8, 18, 144); });
  test::with_threads(4, [&] { g4 = rebalance_experts(w, 288, 8, 18, 144); });
  CHECK(g1.phy2log == g4.phy2log);
  CHECK(g1.log2phy.data == g4.log2phy.data);
  Placement h1, h4;
  test::with_threads(1, [&] { h1 = rebalance_experts(w, 288, 8, 4, 32); });
  test::with_threads(3, [&] { h4 = rebalance_experts(w, 288, 8, 4, 32); });
  CHECK(h1.phy2log == h4.phy2log);
  const Mat<double> wide = zipf_loads(rng, 32, 512, 512 * 64, 0.8);
  REQUIRE(32.0 * (800 - 512) * 512 >= ladder::eplb::detail::kParallelWork);  // replicate: rows x extra slots x experts
  Replication r1, r4;
  test::with_threads(1, [&] { r1 = replicate_experts(wide, 800); });
  test::with_threads(4, [&] { r4 = replicate_experts(wide, 800); });
  CHECK(r1.phy2log == r4.phy2log);
  CHECK(r1.rank == r4.rank);
}

TEST_CASE("EPLB improves the balance of a skewed load (V3 prefill layout)") {
  Rng rng(11);
  const Mat<double> w = zipf_loads(rng, 8, 256, 4096 * 8, 1.0);
  const Placement p = rebalance_experts(w, 288, 8, 4, 32);
  CHECK(imbalance(gpu_loads(w, p)).overall < imbalance(static_gpu_loads(w, 32)).overall);
  CHECK(imbalance(gpu_loads(w, p)).overall >= 1.0);
}

TEST_CASE("data plane loops: load counting and round-robin mapping to replicas") {
  const Mat<double> w = (Mat<double>(1, 4) << 10, 40, 10, 20).finished();
  const Placement p = rebalance_experts(w, 8, 1, 1, 2);  // extra slots: 1, 1 (tie with 3), 3, 1
  REQUIRE(p.logcnt == (IndexMat(1, 4) << 1, 4, 1, 2).finished());
  const IndexMat topk = (IndexMat(4, 2) << 1, 3, 1, 0, 1, -1, 1, 3).finished();
  CHECK(count_expert_load(topk, 4) == std::vector<Index>{1, 4, 0, 2});
  const IndexMat phys = map_to_physical(topk, p, 0);
  const IndexMat l2p = p.layer_log2phy(0);
  for (Index t = 0; t < 4; ++t)
    for (Index j = 0; j < 2; ++j) {
      const Index e = topk(t, j);
      if (e < 0) {
        CHECK(phys(t, j) == -1);
        continue;
      }
      CHECK(p.phy2log(0, phys(t, j)) == e);         // a replica of the routed expert
      CHECK(phys(t, j) == l2p(e, t % p.logcnt(0, e)));  // the round-robin rule
    }
  CHECK(phys(0, 0) != phys(1, 0));  // consecutive tokens of expert 1 use different replicas
}
