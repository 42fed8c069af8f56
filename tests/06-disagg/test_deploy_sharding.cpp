// tests/06-disagg/test_deploy_sharding.cpp -- stage 06: sharding rungs on P simulated ranks
// (ladder/06-disagg/deploy/sharding.hpp). The TP FFN equals the unsharded FFN under the tolerance rule (float
// candidate vs the fp64 oracle, the float unsharded FFN as baseline), a planted wrong split is caught,
// and the bytes the ring collectives actually send equal the model: all-reduce 2 (P - 1)/P of the
// tensor per rank, reduce-scatter (P - 1)/P (the JAX DeepSeek-R1 README: 2 units vs 1); the MoE dispatch
// at 4 nodes sends 3 BS h between nodes per rank by AllGather and 6 BS h by All2All (Huawei report
// Sec. 5.1).
#include <doctest/doctest.h>

#include "ladder/core/compare.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/06-disagg/deploy/sharding.hpp"

namespace {
using namespace ladder;
using namespace ladder::deploy;

Mat<double> random_mat(int64_t r, int64_t c, Rng& rng, double scale) {
  Mat<double> m(r, c);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) m(i, j) = scale * rng.normal();
  return m;
}

struct Case {
  Mat<double> x, W1, W3, W2;
};
Case make_case(int64_t T, int64_t h, int64_t F, uint64_t seed) {
  Rng rng(seed);
  return {random_mat(T, h, rng, 1.0), random_mat(h, F, rng, 0.2), random_mat(h, F, rng, 0.2), random_mat(F, h, rng, 0.1)};
}
Mat<float> f32(const Mat<double>& m) { return m.cast<float>(); }

bool passes(const Mat<double>& oracle, const Mat<float>& cand, const Mat<float>& base) {
  const CompareReport r = compare(Array<double>::from(oracle), Array<float>::from(cand), Array<float>::from(base), Tolerance{});
  if (!r.pass) MESSAGE(r.failure);
  return r.pass;
}
}  // namespace

TEST_CASE("sharding: TP FFN (column- then row-parallel) equals the unsharded FFN; all-reduce and reduce-scatter") {
  const Case c = make_case(97, 59, 113, 3);  // awkward: chunks of unequal size
  const Mat<double> oracle = ffn_swiglu<double>(c.x, c.W1, c.W3, c.W2);
  const Mat<float> base = ffn_swiglu<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2));
  for (int64_t P : {1, 2, 3, 4, 8}) {
    Comm comm(P, 4);
    const auto y = ffn_tp_all_reduce<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), comm);
    for (const auto& yr : y) CHECK(passes(oracle, yr, base));
    Comm comm2(P, 4);
    const auto part = ffn_tp_reduce_scatter<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), comm2);
    Mat<float> rows(97, 59);
    for (int64_t r = 0; r < P; ++r) {
      const auto [lo, hi] = chunk(97, P, r);
      rows.middleRows(lo, hi - lo) = part[static_cast<size_t>(r)];
    }
    CHECK(passes(oracle, rows, base));
  }
  // Planted: the last rank's partial left out of the sum (a wrong split) is caught.
  const int64_t P = 4;
  Mat<float> wrong = Mat<float>::Zero(97, 59);
  for (int64_t r = 0; r < P - 1; ++r) wrong += ffn_tp_partial<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), P, r);
  CHECK_FALSE(passes(oracle, wrong, base));
}

TEST_CASE("sharding: counted bytes -- all-reduce 2 units, reduce-scatter 1 unit per rank") {
  const Case c = make_case(96, 64, 128, 5);  // divisible by P: every chunk the same size
  for (int64_t P : {2, 4, 8}) {
    const double unit = static_cast<double>(P - 1) / static_cast<double>(P) * 96 * 64 * sizeof(float);
    Comm ar(P, 8), rs(P, 8);
    ffn_tp_all_reduce<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), ar);
    ffn_tp_reduce_scatter<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), rs);
    for (int64_t r = 0; r < P; ++r) {
      CHECK(ar.sent(r) == 2 * unit);
      CHECK(rs.sent(r) == unit);
    }
  }
  // Across nodes: a ring of 8 ranks on 2 nodes crosses the node boundary at 2 of its 8 links.
  Comm two_nodes(8, 4);
  ffn_tp_reduce_scatter<float>(f32(c.x), f32(c.W1), f32(c.W3), f32(c.W2), two_nodes);
  CHECK(two_nodes.inter[3] == 7.0 / 8 * 96 * 64 * sizeof(float));  // rank 3 -> rank 4 leaves node 0
  CHECK(two_nodes.inter[0] == 0);
}

TEST_CASE("sharding: attention DP -> TP -> DP (gather the compressed rows, heads split, all-to-all back)") {
  const int64_t hm = 59, r = 23, H = 6, d = 11;
  Rng rng(9);
  LowRankAttention<double> w{random_mat(hm, r, rng, 0.3), random_mat(r, H * d, rng, 0.3), random_mat(r, H * d, rng, 0.3),
                             random_mat(r, H * d, rng, 0.3), random_mat(H * d, hm, rng, 0.2), H, d};
  const LowRankAttention<float> wf{f32(w.W_down), f32(w.W_q), f32(w.W_k), f32(w.W_v), f32(w.W_o), H, d};
  int64_t checked_bytes = 0;
  for (int64_t Tn : {97, 96}) {  // 97: uneven chunks; 96: even, where the counted bytes equal the model
  const Mat<double> x = random_mat(Tn, hm, rng, 1.0);
  const Mat<double> oracle = low_rank_attention<double>(w, x);
  const Mat<float> base = low_rank_attention<float>(wf, f32(x));
  for (int64_t P : {1, 2, 3, 6}) {
    std::vector<Mat<float>> rows;
    for (int64_t k = 0; k < P; ++k) {
      const auto [lo, hi] = chunk(Tn, P, k);
      rows.push_back(f32(x).middleRows(lo, hi - lo));
    }
    Comm comm(P, 2);
    const auto y = low_rank_attention_dp_tp<float>(wf, rows, comm);
    Mat<float> all(Tn, hm);
    for (int64_t k = 0; k < P; ++k) {
      const auto [lo, hi] = chunk(Tn, P, k);
      all.middleRows(lo, hi - lo) = y[static_cast<size_t>(k)];
    }
    CHECK(passes(oracle, all, base));
    // Counted bytes per rank: the all-gather of the r-wide compressed rows plus the all-to-all of the
    // attention output's off-rank blocks.
    if (Tn % P == 0 && H % P == 0) {
      const double ag = static_cast<double>(P - 1) / static_cast<double>(P) * Tn * r * sizeof(float);
      const double a2a = static_cast<double>(P - 1) / static_cast<double>(P) * Tn * (H / P) * d * sizeof(float);
      for (int64_t k = 0; k < P; ++k) CHECK(comm.sent(k) == doctest::Approx(ag + a2a).epsilon(1e-12));
      checked_bytes += P > 1;
    }
  }
  }
  CHECK(checked_bytes == 3);
  const int64_t Tn = 97;
  const Mat<double> x = random_mat(Tn, hm, rng, 1.0);
  const Mat<double> oracle = low_rank_attention<double>(w, x);
  const Mat<float> base = low_rank_attention<float>(wf, f32(x));
  // Planted: the all-to-all puts the heads back in the wrong order (rank 0's three heads after rank 1's),
  // written as the same product with W_o's two row blocks swapped -> caught.
  Comm comm(2, 2);
  std::vector<Mat<float>> rows = {f32(x).topRows(49), f32(x).bottomRows(48)};
  LowRankAttention<float> swapped = wf;
  swapped.W_o.topRows(3 * d).swap(swapped.W_o.bottomRows(3 * d));
  const auto y = low_rank_attention_dp_tp<float>(swapped, rows, comm);
  Mat<float> all(Tn, hm);
  all.topRows(49) = y[0], all.bottomRows(48) = y[1];
  CHECK_FALSE(passes(oracle, all, base));
}

TEST_CASE("sharding: MoE dispatch between nodes, AllGather 3 BS h vs All2All 6 BS h (32 ranks, 4 nodes, top-8)") {
  const int64_t P = 32, per_node = 8, BS = 16, h = 7168;
  // Each token's 8 experts on 8 different ranks spaced 4 apart: two per node, six of eight off the node.
  const auto route = [](int64_t r, int64_t) {
    std::vector<int64_t> d;
    for (int64_t j = 0; j < 8; ++j) d.push_back((r + 4 * j) % 32);
    return d;
  };
  const DispatchCount c = count_dispatch(P, per_node, BS, h, 1.0, route);
  CHECK(c.allgather_inter_per_rank == 3.0 * BS * h);
  CHECK(c.all2all_inter_per_rank == 6.0 * BS * h);
}
