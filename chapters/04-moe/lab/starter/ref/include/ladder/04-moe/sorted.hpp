// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/04-moe/sorted.hpp -- stage 04 rungs "sort -> ragged dot -> unsort + combine" (the JAX MoE).
//
//   dropless (decode):   sort all T*k assignments by expert, gather x[sort_idx // k], ragged_dot for
//                        gate and up, silu * up, ragged_dot for down, inverse permutation, weighted
//                        sum over the k assignments of each token (+ shared expert).
//   dropping (prefill):  the same sort; each expert keeps its first C = capacity(...) rows (lowest
//                        token index), the rest are dropped; the product runs on the kept rows only
//                        and the combine is a scatter-add of weight * row into y (unsort + sum in one).
//   ep_sharded:          expert parallelism simulated on P shards in one process: shard p holds
//                        experts [p E/P, (p+1) E/P) and sorts every other assignment to the end
//                        (ragged_dot gives zeros there); y = sum of the shards' partial y (the
//                        all-reduce). The routing and the concatenated group sizes equal the
//                        single-shard ones exactly.
//   dropless_int8:       dropless with w1, w3, w2 quantised to int8 per output channel (ragged_dot_q8).
#pragma once
#include <vector>

#include "ladder/04-moe/dense.hpp"
#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/ragged_dot.hpp"
#include "ladder/04-moe/ragged_dot_q8.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::moe {

template <class T>
struct LayerOut {
  Mat<T> y;                         // [T, D]
  std::vector<Index> sort_idx;      // [T*k] (sorted rungs; empty for the dense ones)
  std::vector<Index> group_sizes;   // [E]
  std::vector<Index> kept;          // [T*k] 1 kept / 0 dropped (dropping; all 1 otherwise)
  Index dropped = 0;
  Index capacity = 0;                    // dropping: rows per expert
  std::vector<Index> rows_per_shard;     // ep_sharded: rows each shard computed
};

struct LayerOptions {
  double capacity_factor = 2.0;  // dropping
  Index shards = 2;              // ep_sharded
};

// The three products on packed rows xs [m, D] with group sizes gs [G] and stacked weights starting at
// expert `first`; rows past sum(gs) come out zero (ragged_dot's contract).
template <class T>
Mat<T> expert_products(const Weights<T>& w, Index first, const Mat<T>& xs, const std::vector<Index>& gs) {
  const Index D = w.cfg.hidden, F = w.cfg.inter, m = xs.rows(), G = Index(gs.size());
  Mat<T> h1(m, F), h3(m, F), out(m, D);
  ragged_dot(xs.data(), m, D, w.w1.data() + first * D * F, G, F, gs.data(), h1.data());
  ragged_dot(xs.data(), m, D, w.w3.data() + first * D * F, G, F, gs.data(), h3.data());
  for (Index i = 0; i < m * F; ++i) h1.data()[i] = silu(h1.data()[i]) * h3.data()[i];
  ragged_dot(h1.data(), m, F, w.w2.data() + first * F * D, G, D, gs.data(), out.data());
  return out;
}

// xs [n, D]: row i = x[sort_idx[i] // k].
template <class T>
Mat<T> gather_rows(const Mat<T>& x, const std::vector<Index>& sort_idx, Index k, Index n) {
  Mat<T> xs(n, x.cols());
  for (Index i = 0; i < n; ++i) xs.row(i) = x.row(sort_idx[static_cast<size_t>(i)] / k);
  return xs;
}

// y_t = sum_j topk_weight[t, j] * o[inverse[t*k + j]]  (unsort, then the weighted sum in j order).
// ([[maybe_unused]]: the lab's starter leaves their use to the student; the build treats warnings as errors.)
template <class T>
LADDER_LAB_ENTRY Mat<T> unsort_combine(const Mat<T>& o, [[maybe_unused]] const Permutation& p,
                                       [[maybe_unused]] const Routing<T>& r, Index Tn, Index k) {
  Mat<T> y = Mat<T>::Zero(Tn, o.cols());
  for (Index t = 0; t < Tn; ++t)
    for (Index j = 0; j < k; ++j) {
      // TODO(lab: unsort_combine): assignment a = t*k + j sits at sorted position inverse[a]: add that row of o times its weight
    }
  return y;
}

template <class T>
LayerOut<T> sorted_dropless(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), k = w.cfg.top_k;
  const Permutation p = sort_by_expert(r.topk_idx, w.cfg.n_experts);
  const Mat<T> o = expert_products(w, 0, gather_rows(x, p.sort_idx, k, Tn * k), p.group_sizes);
  LayerOut<T> out;
  out.y = unsort_combine(o, p, r, Tn, k);
  out.sort_idx = p.sort_idx;
  out.group_sizes = p.group_sizes;
  out.kept.assign(static_cast<size_t>(Tn * k), 1);
  add_shared(w, x, out.y);
  return out;
}

template <class T>
LayerOut<T> sorted_dropping(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r, double capacity_factor) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), k = w.cfg.top_k, E = w.cfg.n_experts, D = w.cfg.hidden;
  const Permutation p = sort_by_expert(r.topk_idx, E);
  LayerOut<T> out;
  out.capacity = capacity(capacity_factor, Tn, k, E);
  out.kept = kept_mask(r.topk_idx, p, out.capacity);
  out.sort_idx = p.sort_idx;
  out.group_sizes = p.group_sizes;
  // The kept assignments in sorted order, and their per-expert counts min(group_size, C).
  std::vector<Index> rows, kept_sizes(static_cast<size_t>(E));
  for (Index e = 0; e < E; ++e) kept_sizes[static_cast<size_t>(e)] = std::min(p.group_sizes[static_cast<size_t>(e)], out.capacity);
  for (Index a : p.sort_idx)
    if (out.kept[static_cast<size_t>(a)]) rows.push_back(a);
  out.dropped = Tn * k - Index(rows.size());
  const Mat<T> o = expert_products(w, 0, gather_rows(x, rows, k, Index(rows.size())), kept_sizes);
  out.y = Mat<T>::Zero(Tn, D);
  for (size_t i = 0; i < rows.size(); ++i)  // scatter-add: unsort and weighted sum in one
    out.y.row(rows[i] / k) += r.topk_weight.data[static_cast<size_t>(rows[i])] * o.row(Index(i));
  add_shared(w, x, out.y);
  return out;
}

template <class T>
LayerOut<T> ep_sharded(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r, Index shards) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), k = w.cfg.top_k, E = w.cfg.n_experts;
  const Permutation global = sort_by_expert(r.topk_idx, E);
  LayerOut<T> out;
  out.y = Mat<T>::Zero(Tn, w.cfg.hidden);
  out.sort_idx = global.sort_idx;
  out.kept.assign(static_cast<size_t>(Tn * k), 1);
  for (Index s = 0; s < shards; ++s) {
    const Permutation p = sort_for_shard(r.topk_idx, E, shards, s);
    const Mat<T> o = expert_products(w, s * (E / shards), gather_rows(x, p.sort_idx, k, Tn * k), p.group_sizes);
    out.y += unsort_combine(o, p, r, Tn, k);  // the all-reduce, shards in order
    out.group_sizes.insert(out.group_sizes.end(), p.group_sizes.begin(), p.group_sizes.end());
    Index rows = 0;
    for (Index g : p.group_sizes) rows += g;
    out.rows_per_shard.push_back(rows);
  }
  add_shared(w, x, out.y);
  return out;
}

template <class T>
LayerOut<T> sorted_dropless_int8(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), k = w.cfg.top_k, E = w.cfg.n_experts, D = w.cfg.hidden, F = w.cfg.inter;
  const QuantizedRhs q1 = quantize_int8(w.w1, E, D, F), q3 = quantize_int8(w.w3, E, D, F),
                     q2 = quantize_int8(w.w2, E, F, D);
  const Permutation p = sort_by_expert(r.topk_idx, E);
  const Mat<T> xs = gather_rows(x, p.sort_idx, k, Tn * k);
  const Index m = xs.rows();
  Mat<T> h1(m, F), h3(m, F), o(m, D);
  ragged_dot_q8(xs.data(), m, q1, p.group_sizes.data(), h1.data());
  ragged_dot_q8(xs.data(), m, q3, p.group_sizes.data(), h3.data());
  for (Index i = 0; i < m * F; ++i) h1.data()[i] = silu(h1.data()[i]) * h3.data()[i];
  ragged_dot_q8(h1.data(), m, q2, p.group_sizes.data(), o.data());
  LayerOut<T> out;
  out.y = unsort_combine(o, p, r, Tn, k);
  out.sort_idx = p.sort_idx;
  out.group_sizes = p.group_sizes;
  out.kept.assign(static_cast<size_t>(Tn * k), 1);
  add_shared(w, x, out.y);
  return out;
}

}  // namespace ladder::moe
