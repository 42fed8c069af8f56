// tests/05-eplb/test_eplb_float32.cpp -- ladder's EPLB oracle reproduces eplb.py's float32 arithmetic.
//
// An independent re-implementation of eplb.py (written from its source, in float32 where it is float32:
// weight.float(), tokens_per_mlog / mlogcnt, pack sums of 0-d float32 tensors), on a small reproducer (where
// float32 and double order tied GPU loads differently) and on random inputs, against the registry's rungs
// (what goldens, `ladder eplb` and `ladder check` use).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/05-eplb/eplb.hpp"

using namespace ladder;
using V = std::vector<int64_t>;
using F = std::vector<float>;

namespace {

// eplb.py balanced_packing on one row.
void packing(const F& w, int64_t packs, V& pack_index, V& rank) {
  const int64_t n = static_cast<int64_t>(w.size()), per = n / packs;
  pack_index.assign(n, 0), rank.assign(n, 0);
  if (per == 1) { std::iota(pack_index.begin(), pack_index.end(), 0); return; }
  V idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
  F load(packs, 0.f);
  V items(packs, 0);
  for (int64_t g : idx) {
    int64_t best = -1;
    for (int64_t p = 0; p < packs; ++p)
      if (items[p] < per && (best < 0 || load[p] < load[best])) best = p;
    pack_index[g] = best, rank[g] = items[best]++;
    load[best] = load[best] + w[g];
  }
}

// eplb.py rebalance_experts_hierarchical on one layer (global = 1 group, 1 node).
V eplb_py(const F& w, int64_t R, int64_t G, int64_t N, int64_t P) {
  const int64_t n = static_cast<int64_t>(w.size()), gs = n / G, lpn = n / N, ppn = R / N, gpn = P / N;
  F tg(G, 0.f);
  for (int64_t g = 0; g < G; ++g) for (int64_t k = 0; k < gs; ++k) tg[g] = tg[g] + w[g * gs + k];
  V gp, gr;
  packing(tg, N, gp, gr);
  V mlog2log(n);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t k = 0; k < gs; ++k) mlog2log[(gp[g] * (G / N) + gr[g]) * gs + k] = g * gs + k;
  V phy2log(R);
  for (int64_t node = 0; node < N; ++node) {
    F tm(lpn);
    for (int64_t m = 0; m < lpn; ++m) tm[m] = w[mlog2log[node * lpn + m]];
    V phy2mlog(ppn), cnt(lpn, 1);
    std::iota(phy2mlog.begin(), phy2mlog.begin() + lpn, 0);
    for (int64_t p = lpn; p < ppn; ++p) {
      int64_t best = 0;
      for (int64_t e = 1; e < lpn; ++e)
        if (tm[e] / static_cast<float>(cnt[e]) > tm[best] / static_cast<float>(cnt[best])) best = e;
      phy2mlog[p] = best, ++cnt[best];
    }
    F tp(ppn);
    for (int64_t p = 0; p < ppn; ++p) tp[p] = tm[phy2mlog[p]] / static_cast<float>(cnt[phy2mlog[p]]);
    V pi, pr;
    packing(tp, gpn, pi, pr);
    for (int64_t p = 0; p < ppn; ++p) phy2log[node * ppn + pi[p] * (ppn / gpn) + pr[p]] = mlog2log[node * lpn + phy2mlog[p]];
  }
  return phy2log;
}

V ladder_phy2log(const F& w, int64_t R, int64_t G, int64_t N, int64_t P) {
  Tensors in{{"weight", to_npy(Array<float>({1, static_cast<int64_t>(w.size())}, 0.f))}};
  Array<double> a({1, static_cast<int64_t>(w.size())});
  for (size_t i = 0; i < w.size(); ++i) a.data[i] = w[i];
  in["weight"] = to_npy(a);
  const nlohmann::json params = {{"num_replicas", R}, {"num_groups", G}, {"num_nodes", N}, {"num_gpus", P}};
  const Tensors out = run_oracle(contract("05-eplb"), in, params);
  return npy_as_int64(out.at("phy2log"), "phy2log").data;
}

}  // namespace

TEST_CASE("05-eplb: the float32 reproducer gives eplb.py's phy2log") {
  const F w{8, 0, 4, 10, 1};
  CHECK(eplb_py(w, 9, 1, 1, 3) == V{2, 0, 1, 3, 3, 4, 3, 0, 0});
  CHECK(ladder_phy2log(w, 9, 1, 1, 3) == V{2, 0, 1, 3, 3, 4, 3, 0, 0});
  // The same greedy in double (rebalance_experts<double>) orders the tied GPU loads the other way.
  const Mat<double> wd = (Mat<double>(1, 5) << 8, 0, 4, 10, 1).finished();
  const eplb::Placement pd = eplb::rebalance_experts(wd, 9, 1, 1, 3);
  CHECK(V(pd.phy2log.row(0).begin(), pd.phy2log.row(0).end()) == V{2, 0, 4, 3, 3, 1, 3, 0, 0});
}

TEST_CASE("05-eplb: ladder equals an independent float32 eplb.py on random inputs") {
  Rng rng(2024);
  int differ_from_double = 0, n_cases = 0;
  for (int t = 0; t < 400; ++t) {
    const int64_t n = 4 + static_cast<int64_t>(rng.uniform_int(9)), P = 1 + static_cast<int64_t>(rng.uniform_int(4));
    const int64_t R = P * ((n + P - 1) / P + static_cast<int64_t>(rng.uniform_int(3)));
    F w(n);
    for (float& v : w) v = static_cast<float>(rng.uniform_int(12));
    CAPTURE(t);
    const V want = eplb_py(w, R, 1, 1, P);
    CHECK(ladder_phy2log(w, R, 1, 1, P) == want);
    Mat<double> wd(1, n);
    for (int64_t i = 0; i < n; ++i) wd(0, i) = w[i];
    const eplb::Placement pd = eplb::rebalance_experts(wd, R, 1, 1, P);
    differ_from_double += V(pd.phy2log.row(0).begin(), pd.phy2log.row(0).end()) != want;
    ++n_cases;
    // hierarchical: 2 groups on 2 nodes
    if (n % 2 == 0 && P % 2 == 0 && R % 2 == 0) CHECK(ladder_phy2log(w, R, 2, 2, P) == eplb_py(w, R, 2, 2, P));
  }
  MESSAGE(differ_from_double << " of " << n_cases << " random inputs differ between float32 and double");
  CHECK(differ_from_double > 0);  // the inputs do exercise the float32 ties
}
