// tests/05-eplb/test_eplb.cpp -- stage 05 EPLB: the worked examples of the sources, exactly, and every
// precondition. Sources: the EPLB README example (deepseek-ai/EPLB), Huiming's notes "DeepSeek Expert
// Parallelism Load Balancer (EPLB) Code Reading" (the code reading) and its printed intermediates;
// chapters/05-eplb/README.md walks the same numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "lab_check.hpp"
#include "ladder/05-eplb/eplb.hpp"

using namespace ladder;
using namespace ladder::eplb;

namespace {

Mat<double> readme_weight() {
  Mat<double> w(2, 12);
  w << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
      20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27;
  return w;
}

template <class M>
M rows(Index r, Index c, std::initializer_list<typename M::Scalar> v) {
  M m(r, c);
  Index i = 0;
  for (auto x : v) m(i / c, i % c) = x, ++i;
  REQUIRE(i == r * c);
  return m;
}

// One exact check naming the rung, the output and the example (tests/lab_check.hpp), element by element
// in row-major order: the first differing [row, col] and the count.
template <class A, class B>
void same(const std::string& rung, const std::string& output, const std::string& example, const A& got, const B& want) {
  using T = typename B::Scalar;
  std::vector<T> g, w;
  for (Index r = 0; r < want.rows(); ++r)
    for (Index c = 0; c < want.cols(); ++c) w.push_back(want(r, c));
  for (Index r = 0; r < got.rows(); ++r)
    for (Index c = 0; c < got.cols(); ++c) g.push_back(static_cast<T>(got(r, c)));
  test::check_exact<T>({rung, "float64", output, example, {"row", "col"}}, w, g, Shape{want.rows(), want.cols()});
}

}  // namespace

TEST_CASE("README example, hierarchical policy: phy2log, logcnt, log2phy, group -> node, per-GPU loads") {
  const Mat<double> w = readme_weight();
  const Placement p = rebalance_experts(w, 16, 4, 2, 8);
  CHECK(p.policy == Policy::hierarchical);
  same("hierarchical", "phy2log", "readme_example (4 groups, 2 nodes)", p.phy2log, rows<IndexMat>(2, 16, {5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1,  //
                                            7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}));
  same("hierarchical", "logcnt", "readme_example (4 groups, 2 nodes)", p.logcnt, rows<IndexMat>(2, 12, {1, 2, 1, 1, 2, 2, 1, 1, 1, 1, 2, 1,  //
                                           1, 2, 1, 1, 1, 2, 2, 1, 2, 1, 1, 1}));
  same("hierarchical", "group_node", "readme_example (4 groups, 2 nodes)", group_nodes(p, 4), rows<IndexMat>(2, 4, {1, 0, 0, 1, 1, 1, 0, 0}));
  const Mat<double> loads = gpu_loads(w, p);
  same("hierarchical", "gpu_loads", "readme_example (4 groups, 2 nodes), layer 0", Mat<double>(loads.row(0)), rows<Mat<double>>(1, 8, {121.5, 86.5, 125, 113, 147.5, 131.5, 156, 152}));
  CHECK(node_loads(loads, 2).row(0).sum() == doctest::Approx(w.row(0).sum()));
  // log2phy [2, 12, 2]: expert 5 of layer 0 sits in slots 0 and 2 (ranks 0, 1); expert 0 only in slot 12.
  REQUIRE(p.log2phy.shape == Shape{2, 12, 2});
  same("hierarchical", "log2phy", "readme_example (4 groups, 2 nodes), layer 0, expert 5", p.layer_log2phy(0).row(5), rows<IndexMat>(1, 2, {0, 2}));
  same("hierarchical", "log2phy", "readme_example (4 groups, 2 nodes), layer 0, expert 0", p.layer_log2phy(0).row(0), rows<IndexMat>(1, 2, {12, -1}));
  CHECK(check_placement(p, 2, 12).empty());
}

TEST_CASE("README weights with 3 groups on 2 nodes take the global policy") {
  const Placement p = rebalance_experts(readme_weight(), 16, 3, 2, 8);
  CHECK(p.policy == Policy::global);
  same("global", "phy2log", "readme_example (3 groups, 2 nodes)", p.phy2log, rows<IndexMat>(2, 16, {10, 6, 10, 7, 0, 2, 11, 4, 5, 9, 5, 4, 8, 3, 1, 1,  //
                                            1, 10, 2, 4, 5, 11, 5, 0, 6, 7, 6, 3, 8, 8, 9, 7}));
  CHECK(check_placement(p, 2, 12).empty());
  // The global policy ignores groups: the same answer as the rung called directly.
  CHECK(rebalance_experts_global(readme_weight(), 16, 8).phy2log == p.phy2log);
}

TEST_CASE("the code reading's worked example: group loads, tokens_per_phy, pphy2phy and the 8 per-GPU totals") {
  const Mat<double> w = readme_weight();
  HierarchicalTrace<double> t;
  const Replication rep = rebalance_experts_hierarchical(w, 16, 4, 2, 8, &t);

  // Step 1 (code reading: "group loads [[262., 330., 116., 325.], [231., 280., 516., 129.]]").
  same("hierarchical", "tokens_per_group", "code_reading_example", t.tokens_per_group, rows<Mat<double>>(2, 4, {262, 330, 116, 325, 231, 280, 516, 129}));
  same("hierarchical", "group_pack", "code_reading_example", t.group_pack.pack_index, rows<IndexMat>(2, 4, {1, 0, 0, 1, 1, 1, 0, 0}));

  // Steps 2-3: the code reading's printed tokens_per_phy [L * nodes, 8] and pphy2phy. pphy2phy depends
  // on the sort's tie order (82.5 twice, 52 twice, ...); our stable sort reproduces its table exactly.
  same("hierarchical", "tokens_per_phy", "code_reading_example", t.tokens_per_phy, rows<Mat<double>>(4, 8, {61.0, 52.0, 82.5, 39.0, 4.0, 73.0, 82.5, 52.0,     //
                                                     56.0, 91.5, 86.0, 90.0, 66.0, 40.0, 91.5, 66.0,    //
                                                     93.5, 157.0, 86.0, 86.0, 16.0, 27.0, 93.5, 86.0,   //
                                                     64.0, 19.0, 98.5, 20.0, 53.5, 104.0, 98.5, 53.5}));
  same("hierarchical", "pphy2phy", "code_reading_example", t.pphy2phy, rows<IndexMat>(4, 8, {2, 3, 6, 4, 5, 7, 0, 1,  //
                                            1, 0, 6, 5, 3, 7, 2, 4,  //
                                            1, 4, 0, 7, 6, 5, 2, 3,  //
                                            5, 1, 2, 7, 6, 3, 0, 4}));

  // The code reading's verification: gather tokens_per_phy by pphy2phy, pair slots per GPU, sum over layers.
  Mat<double> per_gpu = Mat<double>::Zero(1, 8);
  for (Index r = 0; r < 4; ++r)
    for (Index q = 0; q < 8; ++q) per_gpu(0, (r % 2) * 4 + q / 2) += t.tokens_per_phy(r, t.pphy2phy(r, q));
  const Mat<double> seed_totals = rows<Mat<double>>(1, 8, {294.5, 266.0, 245.5, 285.0, 270.5, 283.5, 274.5, 269.5});
  same("hierarchical", "gpu_loads", "code_reading_example (from the trace)", per_gpu, seed_totals);
  // ... and the same totals from the final placement through the public view.
  const Placement p = make_placement(rep, Policy::hierarchical, 4, 2, 8);
  same("hierarchical", "gpu_loads", "code_reading_example (from the placement)", Mat<double>(gpu_loads(w, p).colwise().sum()), seed_totals);
}

TEST_CASE("balanced_packing: n / num_packs per pack, lightest pack first, identity with one item per pack") {
  const Mat<double> w = rows<Mat<double>>(1, 6, {5, 1, 4, 2, 3, 3});
  const Packing p = balanced_packing(w, 2);
  // Order (stable) items 0, 2, 4, 5, 3, 1: 0 -> pack 0; 2 -> pack 1 (0 < 5); 4 -> pack 1 (4 < 5);
  // 5 -> pack 0 (5 < 7); 3 -> pack 1 (7 < 8); 1 -> pack 0, the only pack with room. Both end at 9.
  same("balanced_packing", "pack_index", "chapter_example [5, 1, 4, 2, 3, 3] in 2 packs", p.pack_index, rows<IndexMat>(1, 6, {0, 0, 1, 1, 1, 0}));
  same("balanced_packing", "rank_in_pack", "chapter_example [5, 1, 4, 2, 3, 3] in 2 packs", p.rank_in_pack, rows<IndexMat>(1, 6, {0, 2, 0, 2, 1, 1}));
  const Packing id = balanced_packing(w, 6);
  same("balanced_packing", "pack_index", "one item per pack", id.pack_index, rows<IndexMat>(1, 6, {0, 1, 2, 3, 4, 5}));
  same("balanced_packing", "rank_in_pack", "one item per pack", id.rank_in_pack, IndexMat(IndexMat::Zero(1, 6)));
  // Ties: equal weights keep index order and equal packs take the lowest id.
  const Packing ties = balanced_packing(rows<Mat<double>>(1, 4, {1, 1, 1, 1}), 2);
  same("balanced_packing", "pack_index", "ties [1, 1, 1, 1] in 2 packs", ties.pack_index, rows<IndexMat>(1, 4, {0, 1, 0, 1}));
}

TEST_CASE("replicate_experts: first slots are the experts, extra slots by argmax weight / logcnt") {
  const Replication r = replicate_experts(rows<Mat<double>>(1, 3, {6, 2, 3}), 6);
  // Loads per replica 6, 2, 3 -> expert 0; then 3, 2, 3 tie: lowest id -> expert 0; then 2, 2, 3 -> expert 2.
  same("replicate_experts", "phy2log", "chapter_example [6, 2, 3] on 6 slots", r.phy2log, rows<IndexMat>(1, 6, {0, 1, 2, 0, 0, 2}));
  same("replicate_experts", "rank", "chapter_example [6, 2, 3] on 6 slots", r.rank, rows<IndexMat>(1, 6, {0, 0, 0, 1, 2, 1}));
  same("replicate_experts", "logcnt", "chapter_example [6, 2, 3] on 6 slots", r.logcnt, rows<IndexMat>(1, 3, {3, 1, 2}));
}

TEST_CASE("float32 instantiation (eplb.py's precision) agrees with the fp64 oracle on token counts") {
  const Mat<double> w = readme_weight();
  const Placement pd = rebalance_experts(w, 16, 4, 2, 8);
  const Placement pf = rebalance_experts(Mat<float>(w.cast<float>()), 16, 4, 2, 8);
  CHECK(pf.phy2log == pd.phy2log);
  CHECK(pf.log2phy.data == pd.log2phy.data);
}

TEST_CASE("every precondition raises ladder::Error naming the parameter, the value and the constraint") {
  const Mat<double> w = readme_weight();
  const auto throws = [](auto&& f, const std::string& msg) {
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(f(), doctest::Contains(msg.c_str()), ladder::Error);
  };
  throws([&] { rebalance_experts(w, 10, 4, 2, 4); },
         "rebalance_experts: num_replicas = 10 violates num_replicas % num_gpus == 0 (num_gpus = 4)");
  throws([&] { rebalance_experts(w, 8, 4, 2, 8); }, "num_replicas = 8 violates num_replicas >= num_log (num_log = 12)");
  throws([&] { rebalance_experts(w, 16, 4, 3, 8); }, "num_gpus = 8 violates num_gpus % num_nodes == 0 (num_nodes = 3)");
  throws([&] { rebalance_experts(w, 16, 5, 1, 8); },
         "num_log = 12 violates num_log % num_groups == 0 (num_groups = 5)");
  throws([&] { rebalance_experts(w, 16, 0, 2, 8); }, "num_groups = 0 violates num_groups >= 1");
  throws([&] { rebalance_experts(w, 16, 4, 0, 8); }, "num_nodes = 0 violates num_nodes >= 1");
  throws([&] { rebalance_experts(w, 16, 4, 2, 0); }, "num_gpus = 0 violates num_gpus >= 1");
  throws([&] { rebalance_experts(w, -16, 4, 2, 8); }, "num_replicas = -16 violates num_replicas >= 1");
  throws([&] { rebalance_experts_hierarchical(w, 16, 3, 2, 8); },
         "rebalance_experts_hierarchical: num_groups = 3 violates num_groups % num_nodes == 0 (num_nodes = 2)");
  throws([&] { rebalance_experts_hierarchical(w, 12, 4, 2, 8); },
         "num_physical = 12 violates num_physical % num_gpus == 0 (num_gpus = 8)");
  throws([&] { rebalance_experts_hierarchical(w, 8, 4, 2, 4); },
         "num_physical = 8 violates num_physical >= num_log (num_log = 12)");
  throws([&] { rebalance_experts_global(w, 20, 8); }, "num_physical = 20 violates num_physical % num_gpus == 0");
  throws([&] { balanced_packing(w, 5); }, "weight.cols = 12 violates weight.cols % num_packs == 0 (num_packs = 5)");
  throws([&] { balanced_packing(w, 0); }, "num_packs = 0 violates num_packs >= 1");
  throws([&] { replicate_experts(w, 11); }, "num_phy = 11 violates num_phy >= num_log (num_log = 12)");

  Mat<double> bad = w;
  bad(1, 3) = -2;
  throws([&] { rebalance_experts(bad, 16, 4, 2, 8); }, "weight(1, 3) = -2 violates weight finite and >= 0");
  bad(1, 3) = std::numeric_limits<double>::quiet_NaN();
  throws([&] { replicate_experts(bad, 16); }, "weight(1, 3) = nan violates weight finite and >= 0");
  bad(1, 3) = std::numeric_limits<double>::infinity();
  throws([&] { balanced_packing(bad, 2); }, "weight(1, 3) = inf violates weight finite and >= 0");
  throws([&] { rebalance_experts(Mat<double>(0, 12), 16, 4, 2, 8); },
         "weight.rows (num_layers) = 0 violates num_layers >= 1");
  throws([&] { rebalance_experts(Mat<double>(2, 0), 16, 4, 2, 8); }, "weight.cols = 0 violates weight.cols >= 1");

  // Views, synthetic loads and the data-plane loops check their inputs too.
  const Placement p = rebalance_experts(w, 16, 4, 2, 8);
  throws([&] { gpu_loads(Mat<double>(3, 12), p); }, "weight shape [3, 12] violates");
  throws([&] { node_loads(gpu_loads(w, p), 3); }, "num_gpus = 8 violates num_gpus % num_nodes == 0 (num_nodes = 3)");
  throws([&] { group_nodes(p, 5); }, "num_groups = 5 violates num_log % num_groups == 0");
  Rng rng(1);
  throws([&] { zipf_loads(rng, 1, 4, 10, -1.0); }, "s = -1 violates s finite and >= 0");
  throws([&] { count_expert_load(rows<IndexMat>(1, 2, {0, 12}), 12); },
         "topk(0, 1) = 12 violates -1 <= topk < num_log = 12");
  throws([&] { map_to_physical(rows<IndexMat>(1, 1, {0}), p, 2); }, "layer = 2 violates 0 <= layer < 2");
}
