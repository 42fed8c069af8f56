// ladder/04-moe/config.hpp -- stage 04: the MoE layer's shapes, weights and routing (types only).
//
// Notation (DeepSeek-V3 config and the JAX DeepSeek-R1 README): T tokens, hidden D, E routed experts
// in n_group groups, top-k experts per token from the best topk_group groups, expert inner F
// (moe_inter), one optional shared expert of inner Fs. Expert e is the SwiGLU MLP
//   E_e(x) = (silu(x w1[e]) * (x w3[e])) w2[e]        w1, w3: [D, F], w2: [F, D]
// stored as the stacked right-hand sides ragged_dot takes: w1, w3 [E, D, F], w2 [E, F, D].
// The layer output is y_t = sum_j topk_weight[t, j] E_{topk_idx[t, j]}(x_t) + shared(x_t).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::moe {

using Index = int64_t;

enum class GateKind {
  v3_sigmoid,  // DeepSeek-V3: sigmoid scores, bias for selection only, group score = sum of top-2
  v2_softmax,  // DeepSeek-V2: softmax scores, group score = max, no normalisation of the top-k weights
};

struct Config {
  Index hidden = 0;         // D
  Index inter = 0;          // F, each routed expert's inner size
  Index n_experts = 0;      // E
  Index top_k = 1;          // k
  Index n_group = 1;        // expert groups (E % n_group == 0)
  Index topk_group = 1;     // groups kept per token
  double route_scale = 1.0;  // routed_scaling_factor (V3: 2.5)
  GateKind gate = GateKind::v3_sigmoid;
  Index shared_inter = 0;   // Fs of the one shared expert; 0 = no shared expert
};

inline void check_config(const Config& c) {
  require(c.hidden >= 1, "moe: hidden = {} violates hidden >= 1", c.hidden);
  require(c.inter >= 1, "moe: inter = {} violates inter >= 1", c.inter);
  require(c.n_experts >= 1, "moe: n_experts = {} violates n_experts >= 1", c.n_experts);
  require(c.top_k >= 1 && c.top_k <= c.n_experts, "moe: top_k = {} violates 1 <= top_k <= n_experts = {}", c.top_k,
          c.n_experts);
  require(c.n_group >= 1 && c.n_experts % c.n_group == 0,
          "moe: n_group = {} violates n_group >= 1 and n_experts % n_group == 0 (n_experts = {})", c.n_group,
          c.n_experts);
  require(c.topk_group >= 1 && c.topk_group <= c.n_group, "moe: topk_group = {} violates 1 <= topk_group <= n_group = {}",
          c.topk_group, c.n_group);
  require(c.top_k <= c.topk_group * (c.n_experts / c.n_group),
          "moe: top_k = {} violates top_k <= topk_group * experts per group = {}", c.top_k,
          c.topk_group * (c.n_experts / c.n_group));
  require(std::isfinite(c.route_scale) && c.route_scale > 0, "moe: route_scale = {} violates route_scale > 0",
          c.route_scale);
  require(c.shared_inter >= 0, "moe: shared_inter = {} violates shared_inter >= 0", c.shared_inter);
}

template <class T>
struct Weights {
  Config cfg;
  Mat<T> W_gate;        // [E, D] router
  std::vector<T> bias;  // [E] e_score_correction_bias (V3; selection only)
  std::vector<T> w1;    // [E, D, F] gate projection
  std::vector<T> w3;    // [E, D, F] up projection
  std::vector<T> w2;    // [E, F, D] down projection
  Mat<T> s1, s3;        // [D, Fs] shared expert (empty when shared_inter == 0)
  Mat<T> s2;            // [Fs, D]

  template <class U>
  Weights<U> cast() const {
    Weights<U> w;
    w.cfg = cfg;
    w.W_gate = W_gate.template cast<U>();
    w.bias.assign(bias.begin(), bias.end());
    w.w1.assign(w1.begin(), w1.end());
    w.w3.assign(w3.begin(), w3.end());
    w.w2.assign(w2.begin(), w2.end());
    w.s1 = s1.template cast<U>();
    w.s3 = s3.template cast<U>();
    w.s2 = s2.template cast<U>();
    return w;
  }
};

template <class T>
void check_weights(const Weights<T>& w) {
  const Config& c = w.cfg;
  check_config(c);
  const auto E = c.n_experts, D = c.hidden, F = c.inter, Fs = c.shared_inter;
  require(w.W_gate.rows() == E && w.W_gate.cols() == D, "moe: W_gate is [{}, {}], violates [E, D] = [{}, {}]",
          w.W_gate.rows(), w.W_gate.cols(), E, D);
  require(Index(w.bias.size()) == E, "moe: bias has {} entries, violates [E] = {}", w.bias.size(), E);
  require(Index(w.w1.size()) == E * D * F && Index(w.w3.size()) == E * D * F,
          "moe: w1/w3 have {}/{} entries, violates E * D * F = {}", w.w1.size(), w.w3.size(), E * D * F);
  require(Index(w.w2.size()) == E * F * D, "moe: w2 has {} entries, violates E * F * D = {}", w.w2.size(), E * F * D);
  // No shared expert (Fs = 0): s1, s3 [D, 0] and s2 [0, D] as a model file holds them, or all empty [0, 0].
  const bool none = Fs == 0 && w.s1.cols() == 0 && w.s3.cols() == 0 && w.s2.rows() == 0 &&
                    (w.s1.rows() == 0 || w.s1.rows() == D) && (w.s3.rows() == 0 || w.s3.rows() == D) &&
                    (w.s2.cols() == 0 || w.s2.cols() == D);
  const bool some = Fs > 0 && w.s1.rows() == D && w.s1.cols() == Fs && w.s3.rows() == D && w.s3.cols() == Fs &&
                    w.s2.rows() == Fs && w.s2.cols() == D;
  require(none || some,
          "moe: shared expert weights s1 [{}, {}], s3 [{}, {}], s2 [{}, {}] violate s1, s3 [D, Fs], s2 [Fs, D] with "
          "D = {}, Fs = shared_inter = {} (Fs = 0: no shared expert, [D, 0] and [0, D])",
          w.s1.rows(), w.s1.cols(), w.s3.rows(), w.s3.cols(), w.s2.rows(), w.s2.cols(), D, Fs);
}

// The gate's decision: topk_idx [T, k] (descending score; ties: lowest expert id first) and topk_weight.
template <class T>
struct Routing {
  Array<Index> topk_idx;  // [T, k]
  Array<T> topk_weight;   // [T, k]
  Index tokens() const { return topk_idx.shape.empty() ? 0 : topk_idx.shape[0]; }
  Index k() const { return topk_idx.shape.size() < 2 ? 0 : topk_idx.shape[1]; }
  template <class U>
  Routing<U> cast() const {
    return Routing<U>{topk_idx, topk_weight.template cast<U>()};
  }
};

template <class T>
void check_routing(const Routing<T>& r, const Config& c, Index tokens) {
  require(r.topk_idx.shape == Shape{tokens, c.top_k}, "moe: topk_idx.shape = {} violates [T, k] = [{}, {}]",
          shape_str(r.topk_idx.shape), tokens, c.top_k);
  require(r.topk_weight.shape == r.topk_idx.shape, "moe: topk_weight.shape = {} violates == topk_idx.shape = {}",
          shape_str(r.topk_weight.shape), shape_str(r.topk_idx.shape));
  for (Index i = 0; i < r.topk_idx.size(); ++i)
    require(r.topk_idx.data[i] >= 0 && r.topk_idx.data[i] < c.n_experts,
            "moe: topk_idx[{}] = {} violates 0 <= topk_idx < n_experts = {}", i, r.topk_idx.data[i], c.n_experts);
}

}  // namespace ladder::moe
