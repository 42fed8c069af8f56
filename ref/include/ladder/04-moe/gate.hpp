// ladder/04-moe/gate.hpp -- stage 04 rung "gate": which k experts each token goes to, and with what weight.
//
// DeepSeek-V3 (noaux_tc; deepseek-ai/DeepSeek-V3's model code, the lecture notes' V3 review):
//   s = sigmoid(x W_gate^T)                       [T, E]  the unbiased affinities
//   s' = s + e_score_correction_bias              used for SELECTION only
//   group score = sum of the top-2 s' in each group (top-min(2, group size))
//   keep the topk_group best groups; s' of every other expert := -inf
//   topk_idx = the k largest s'
//   topk_weight = s[topk_idx] / sum_j s[topk_idx_j] * routed_scaling_factor   (bias NOT in the weights)
// DeepSeek-V2 (group-limited greedy): s = softmax(x W_gate^T); group score = max s in the group; keep
//   topk_group groups; topk_idx = the k largest s there; topk_weight = s[topk_idx] * route_scale.
// Ties, everywhere: the lower id wins (expert or group), i.e. a stable descending order. topk_idx is
// listed in descending score. Every sum runs in a fixed order (j ascending), so fp64 is bytewise
// reproducible (the logits via dot_fixed_order).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ladder/core/gemm.hpp"
#include "ladder/core/math.hpp"
#include "ladder/04-moe/config.hpp"

namespace ladder::moe {

namespace detail {
// Indices of the n largest v[i] over i in [0, size), descending; ties: lower index first.
template <class T>
std::vector<Index> top_n(const std::vector<T>& v, Index n) {
  std::vector<Index> order(v.size());
  std::iota(order.begin(), order.end(), Index{0});
  std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)]; });
  order.resize(static_cast<size_t>(n));
  return order;
}
}  // namespace detail

// logits [T, E] = x W_gate^T, each a dot product in fixed order.
template <class T>
Mat<T> gate_logits(const Weights<T>& w, const Mat<T>& x) {
  require(x.cols() == w.cfg.hidden, "moe::gate: x.cols = {} violates x.cols == hidden = {}", x.cols(), w.cfg.hidden);
  Mat<T> l(x.rows(), w.cfg.n_experts);
  for (Index t = 0; t < x.rows(); ++t)
    for (Index e = 0; e < w.cfg.n_experts; ++e)
      l(t, e) = dot_fixed_order(x.row(t).data(), w.W_gate.row(e).data(), x.cols());
  return l;
}

// Selection from per-expert selection scores `sel` (biased for V3) and weight scores `s` (unbiased).
template <class T>
void select_topk(const Config& c, const std::vector<T>& sel, const std::vector<T>& s, bool v3, Index* idx, T* wt) {
  const Index per = c.n_experts / c.n_group;
  std::vector<T> gscore(static_cast<size_t>(c.n_group));
  for (Index g = 0; g < c.n_group; ++g) {
    std::vector<T> in(sel.begin() + g * per, sel.begin() + (g + 1) * per);
    if (v3) {
      const auto top = detail::top_n(in, std::min<Index>(2, per));
      T sum = 0;
      for (Index i : top) sum += in[static_cast<size_t>(i)];
      gscore[static_cast<size_t>(g)] = sum;
    } else {
      gscore[static_cast<size_t>(g)] = *std::max_element(in.begin(), in.end());
    }
  }
  const auto keep = detail::top_n(gscore, c.topk_group);
  std::vector<T> masked(sel.size(), -std::numeric_limits<T>::infinity());
  for (Index g : keep)
    for (Index e = g * per; e < (g + 1) * per; ++e) masked[static_cast<size_t>(e)] = sel[static_cast<size_t>(e)];
  const auto top = detail::top_n(masked, c.top_k);
  T sum = 0;
  for (Index j = 0; j < c.top_k; ++j) {
    idx[j] = top[static_cast<size_t>(j)];
    wt[j] = s[static_cast<size_t>(top[static_cast<size_t>(j)])];
    sum += wt[j];
  }
  for (Index j = 0; j < c.top_k; ++j) wt[j] = (v3 ? wt[j] / sum : wt[j]) * static_cast<T>(c.route_scale);
}

// The gate of w.cfg.gate: x [T, D] -> Routing (topk_idx [T, k], topk_weight [T, k]).
template <class T>
Routing<T> gate(const Weights<T>& w, const Mat<T>& x) {
  check_weights(w);
  const Config& c = w.cfg;
  const Mat<T> logits = gate_logits(w, x);
  Routing<T> r{Array<Index>({x.rows(), c.top_k}), Array<T>({x.rows(), c.top_k})};
  const bool v3 = c.gate == GateKind::v3_sigmoid;
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < x.rows(); ++t) {
    std::vector<T> s(static_cast<size_t>(c.n_experts)), sel(static_cast<size_t>(c.n_experts));
    if (v3) {
      for (Index e = 0; e < c.n_experts; ++e) {
        s[static_cast<size_t>(e)] = T(1) / (T(1) + math::exp(-logits(t, e)));
        sel[static_cast<size_t>(e)] = s[static_cast<size_t>(e)] + w.bias[static_cast<size_t>(e)];
      }
    } else {
      T m = -std::numeric_limits<T>::infinity(), d = 0;
      for (Index e = 0; e < c.n_experts; ++e) m = std::max(m, logits(t, e));
      for (Index e = 0; e < c.n_experts; ++e) d += (s[static_cast<size_t>(e)] = math::exp(logits(t, e) - m));
      for (Index e = 0; e < c.n_experts; ++e) sel[static_cast<size_t>(e)] = (s[static_cast<size_t>(e)] /= d);
    }
    select_topk(c, sel, s, v3, r.topk_idx.data.data() + t * c.top_k, r.topk_weight.data.data() + t * c.top_k);
  }
  return r;
}

}  // namespace ladder::moe
