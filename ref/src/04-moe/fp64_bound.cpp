// ref/src/04-moe/fp64_bound.cpp -- the allowance of a float64 MoE layer (Contract::fp64_bound), derived.
//
// Per token t, in the model of core/fp64_bound.hpp (Ev: a value and its error bound; Sum: any order,
// gamma_{n-1} sum |terms|), for the oracle's routing (topk_idx and kept are judged exactly, so a right
// candidate routes the same way):
//   l_e  = x_t . W_gate_e                gamma_D sum_d |x_td W_gate_ed|
//   s_e  = softmax_e(l) (V2)             01's softmax with l's errors in the exponents, E terms
//        | 1 / (1 + e^{-l_e}) (V3)       the exp's 2 ulp, l's error through it, a sum and a division
//   w_j  = s_{idx_j} [/ sum_j s_{idx_j} (V3)] * route_scale       a sum of k, a division, a product
//   h1_f = x . w1_f, h3_f = x . w3_f     gamma_D, as l;  g_f = silu(h1_f) h3_f, silu(v) = v / (1 + e^{-v})
//   o_d  = sum_f g_f w2_fd               g's errors through |w2|, gamma_F sum_f |g_f w2_fd|
//   y_td = sum_j w_j o_jd + shared_d     the k + 1 terms' errors, gamma_{k+1} sum |terms| (shared: as o)
// The oracle (gate<double>, dense_loop<double>) divides once; a candidate may take a reciprocal (2u: the
// softmax, the sigmoid, silu as v * sigmoid(v)) and sum in any order (sorted, ragged, sharded: the order of
// the sums is the rungs' difference). The allowance is the oracle's bound plus the candidate's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/04-moe/config.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/fp64_bound.hpp"

namespace ladder::moe {

namespace {

using namespace fp64;

// SwiGLU of one token x [D] through w1, w3 [D, F], w2 [F, D] (row-major): the error bound of each output.
std::vector<double> swiglu(const double* w1, const double* w3, const double* w2, Index D, Index F, const double* x,
                           double div_rel, std::vector<double>& value) {
  std::vector<Ev> g(static_cast<size_t>(F));
  for (Index f = 0; f < F; ++f) {
    Sum a, b;
    for (Index d = 0; d < D; ++d) a.add(mul({x[d], 0}, {w1[d * F + f], 0})), b.add(mul({x[d], 0}, {w3[d * F + f], 0}));
    const Ev h1 = a.done(), h3 = b.done();
    const Ev silu = div(h1, add({1, 0}, fp64::exp({-h1.v, h1.e})), div_rel);
    g[static_cast<size_t>(f)] = mul(silu, h3);
  }
  std::vector<double> e(static_cast<size_t>(D));
  value.assign(static_cast<size_t>(D), 0.0);
  for (Index d = 0; d < D; ++d) {
    Sum o;
    for (Index f = 0; f < F; ++f) o.add(mul(g[static_cast<size_t>(f)], {w2[f * D + d], 0}));
    const Ev r = o.done();
    e[static_cast<size_t>(d)] = r.e, value[static_cast<size_t>(d)] = r.v;
  }
  return e;
}

}  // namespace

// Contract::fp64_bound of 04-moe: y and topk_weight, for the oracle's routing (topk_idx [T, k]; kept: the
// dropping rung's mask, empty for dropless).
Tensors fp64_allowance(const Weights<double>& w, const Mat<double>& x, const Array<int64_t>& topk_idx,
                       const std::vector<int64_t>& kept) {
  const Config& c = w.cfg;
  const Index Tn = x.rows(), D = c.hidden, F = c.inter, E = c.n_experts, k = c.top_k, Fs = c.shared_inter;
  Array<double> by({Tn, D}), bw({Tn, k});
  for (const bool cand : {false, true}) {
    const double div_rel = cand ? 2 * u : u;
#pragma omp parallel for schedule(static)
    for (Index t = 0; t < Tn; ++t) {
      const double* xt = x.row(t).data();
      std::vector<Ev> l(static_cast<size_t>(E)), s(static_cast<size_t>(E));
      double m = -kInf, lo = kInf;
      for (Index e = 0; e < E; ++e) {
        Sum a;
        for (Index d = 0; d < D; ++d) a.add(mul({xt[d], 0}, {w.W_gate(e, d), 0}));
        l[static_cast<size_t>(e)] = a.done();
        m = std::max(m, l[static_cast<size_t>(e)].v), lo = std::min(lo, l[static_cast<size_t>(e)].v);
      }
      if (c.gate == GateKind::v3_sigmoid) {
        for (Index e = 0; e < E; ++e) {
          const Ev le = l[static_cast<size_t>(e)];
          s[static_cast<size_t>(e)] = div({1, 0}, add({1, 0}, fp64::exp({-le.v, le.e})), div_rel);
        }
      } else {
        Sum ds;
        for (Index e = 0; e < E; ++e) ds.add(fp64::exp(sub(l[static_cast<size_t>(e)], {m, 0})));
        Ev d = ds.done();
        if (cand) d.e += rescale_rel(static_cast<double>(E - 1), m - lo) * d.v;
        for (Index e = 0; e < E; ++e) s[static_cast<size_t>(e)] = div(fp64::exp(sub(l[static_cast<size_t>(e)], {m, 0})), d, div_rel);
      }
      std::vector<Ev> wt(static_cast<size_t>(k));
      Sum ws;
      for (Index j = 0; j < k; ++j) ws.add(s[static_cast<size_t>(topk_idx.data[t * k + j])]);
      for (Index j = 0; j < k; ++j) {
        Ev v = s[static_cast<size_t>(topk_idx.data[t * k + j])];
        if (c.gate == GateKind::v3_sigmoid) v = div(v, ws.done(), div_rel);
        wt[static_cast<size_t>(j)] = mul(v, {c.route_scale, 0});
        bw.data[t * k + j] += wt[static_cast<size_t>(j)].e;
      }
      std::vector<Sum> y(static_cast<size_t>(D));
      std::vector<double> val;
      for (Index j = 0; j < k; ++j) {
        if (!kept.empty() && kept[static_cast<size_t>(t * k + j)] == 0) continue;
        const Index e = topk_idx.data[t * k + j];
        const std::vector<double> eo = swiglu(w.w1.data() + e * D * F, w.w3.data() + e * D * F, w.w2.data() + e * F * D,
                                              D, F, xt, div_rel, val);
        for (Index d = 0; d < D; ++d)
          y[static_cast<size_t>(d)].add(mul(wt[static_cast<size_t>(j)], {val[static_cast<size_t>(d)], eo[static_cast<size_t>(d)]}));
      }
      if (Fs > 0) {
        const std::vector<double> eo = swiglu(w.s1.data(), w.s3.data(), w.s2.data(), D, Fs, xt, div_rel, val);
        for (Index d = 0; d < D; ++d) y[static_cast<size_t>(d)].add({val[static_cast<size_t>(d)], eo[static_cast<size_t>(d)]});
      }
      for (Index d = 0; d < D; ++d) by.data[t * D + d] += y[static_cast<size_t>(d)].done().e;
    }
  }
  return Tensors{{"y", to_npy(by)}, {"topk_weight", to_npy(bw)}};
}

}  // namespace ladder::moe
