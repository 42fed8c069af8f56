// ladder/04-moe/dense.hpp -- stage 04 rungs "dense loop" (THE ORACLE) and "dense fallback".
//
// dense_loop: per token t, per selected expert j (ascending), y_t += topk_weight[t, j] E_e(x_t); then
// + shared(x_t). The notes' equation read literally; at T = double it writes the goldens (every
// product through ladder::gemm's fixed order, the sums over j in order). A kept mask (the dropping
// rung's decision) restricts it to the kept assignments: the oracle of the dropping rung.
// dense_fallback: every token through every expert, multiplied by a dense [T, E] weight matrix that
// is zero where the expert was not selected -- the generic lowering of ragged_dot (E/k times the
// FLOPs of the routed work; the JAX README's complaint). Same result, different sum order.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/core/gemm.hpp"
#include "ladder/core/math.hpp"
#include "ladder/04-moe/config.hpp"

namespace ladder::moe {

template <class T>
T silu(T v) {
  return v / (T(1) + math::exp(-v));  // ladder::math for double: the same bits on every CPU (goldens)
}

// out [n, D] = (silu(X w1) * (X w3)) w2 for X [n, D]; w1, w3 [D, Fi], w2 [Fi, D] (row-major).
template <class T>
void swiglu_rows(const T* w1, const T* w3, const T* w2, Index D, Index Fi, const T* X, Index n, T* out) {
  if (Fi == 0) {  // an inner size of 0 (no shared expert): the empty sum, exactly 0
    std::fill(out, out + n * D, T(0));
    return;
  }
  std::vector<T> h1(static_cast<size_t>(n * Fi)), h3(static_cast<size_t>(n * Fi));
  gemm<T>(n, Fi, D, T(1), X, D, Op::N, w1, Fi, Op::N, h1.data(), Fi);
  gemm<T>(n, Fi, D, T(1), X, D, Op::N, w3, Fi, Op::N, h3.data(), Fi);
  for (size_t i = 0; i < h1.size(); ++i) h1[i] = silu(h1[i]) * h3[i];
  gemm<T>(n, D, Fi, T(1), h1.data(), Fi, Op::N, w2, D, Op::N, out, D);
}

// Routed expert e on rows X [n, D].
template <class T>
void expert_rows(const Weights<T>& w, Index e, const T* X, Index n, T* out) {
  const Index D = w.cfg.hidden, F = w.cfg.inter;
  swiglu_rows(w.w1.data() + e * D * F, w.w3.data() + e * D * F, w.w2.data() + e * F * D, D, F, X, n, out);
}

// y [T, D] += shared(x) (no-op without a shared expert).
template <class T>
void add_shared(const Weights<T>& w, const Mat<T>& x, Mat<T>& y) {
  const Index Fs = w.cfg.shared_inter, D = w.cfg.hidden;
  if (Fs == 0 || x.rows() == 0) return;
  Mat<T> s(x.rows(), D);
  swiglu_rows(w.s1.data(), w.s3.data(), w.s2.data(), D, Fs, x.data(), x.rows(), s.data());
  for (Index t = 0; t < x.rows(); ++t)
    for (Index d = 0; d < D; ++d) y(t, d) += s(t, d);
}

template <class T>
void check_layer_inputs(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r) {
  check_weights(w);
  require(x.cols() == w.cfg.hidden, "moe: x.cols = {} violates x.cols == hidden = {}", x.cols(), w.cfg.hidden);
  check_routing(r, w.cfg, x.rows());
}

// The oracle. kept (optional, [T*k]): only assignments with kept[a] != 0 contribute.
template <class T>
Mat<T> dense_loop(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r, const std::vector<Index>* kept = nullptr) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), D = w.cfg.hidden, k = w.cfg.top_k;
  require(!kept || Index(kept->size()) == Tn * k, "moe::dense_loop: kept has {} entries, violates T * k = {}",
          kept ? kept->size() : 0, Tn * k);
  Mat<T> y = Mat<T>::Zero(Tn, D);
#pragma omp parallel for schedule(static)
  for (Index t = 0; t < Tn; ++t) {
    std::vector<T> o(static_cast<size_t>(D));
    for (Index j = 0; j < k; ++j) {
      const Index a = t * k + j;
      if (kept && (*kept)[static_cast<size_t>(a)] == 0) continue;
      expert_rows(w, r.topk_idx.data[static_cast<size_t>(a)], x.row(t).data(), 1, o.data());
      const T wt = r.topk_weight.data[static_cast<size_t>(a)];
      for (Index d = 0; d < D; ++d) y(t, d) += wt * o[static_cast<size_t>(d)];
    }
  }
  add_shared(w, x, y);
  return y;
}

// Every expert on every token, masked by the dense routing weights.
template <class T>
Mat<T> dense_fallback(const Weights<T>& w, const Mat<T>& x, const Routing<T>& r) {
  check_layer_inputs(w, x, r);
  const Index Tn = x.rows(), D = w.cfg.hidden, k = w.cfg.top_k, E = w.cfg.n_experts;
  Mat<T> mask = Mat<T>::Zero(Tn, E);  // [T, E] routing weight, 0 where not selected
  for (Index t = 0; t < Tn; ++t)
    for (Index j = 0; j < k; ++j) mask(t, r.topk_idx.data[static_cast<size_t>(t * k + j)]) += r.topk_weight.data[static_cast<size_t>(t * k + j)];
  Mat<T> y = Mat<T>::Zero(Tn, D);
  Mat<T> o(Tn, D);
  for (Index e = 0; e < E; ++e) {
    if (Tn) expert_rows(w, e, x.data(), Tn, o.data());
    for (Index t = 0; t < Tn; ++t)
      for (Index d = 0; d < D; ++d) y(t, d) += mask(t, e) * o(t, d);
  }
  add_shared(w, x, y);
  return y;
}

}  // namespace ladder::moe
