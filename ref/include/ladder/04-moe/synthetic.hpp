// ladder/04-moe/synthetic.hpp -- seeded weights and inputs for stage 04 (goldens, tests, notebook, bench).
//
// Values are dyadic (small integers times a power of two): x in {-1, -7/8, ..., 1}, W_gate entries
// in [-1/8, 1/8] step 1/64, expert weights in [-1/4, 1/4] step 1/32. The gate logits x W_gate^T are
// then exact in float32 and float64 alike, so the float gate sees the same logits as the fp64 oracle
// and routing is compared exactly without near-tie luck. Each routed expert e draws from its own
// stream (Rng(seed + 1 + e)), so a model with E = 8 is the first 8 experts of the same seed's E = 16.
// Biases (e_score_correction_bias): zero, one expert pushed out (-4) or in (+4), or Zipf-skewed.
#pragma once
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/core/math.hpp"
#include "ladder/04-moe/config.hpp"

namespace ladder::moe {

inline double dyadic(Rng& rng, int half_range, double step) {
  return (double(rng.uniform_int(uint64_t(2 * half_range + 1))) - half_range) * step;
}

inline Weights<double> make_weights(const Config& c, uint64_t seed) {
  check_config(c);
  const Index E = c.n_experts, D = c.hidden, F = c.inter, Fs = c.shared_inter;
  Weights<double> w;
  w.cfg = c;
  w.W_gate.resize(E, D);
  w.bias.assign(static_cast<size_t>(E), 0.0);
  w.w1.resize(static_cast<size_t>(E * D * F));
  w.w3.resize(static_cast<size_t>(E * D * F));
  w.w2.resize(static_cast<size_t>(E * F * D));
  for (Index e = 0; e < E; ++e) {
    Rng rng(seed + 1 + uint64_t(e));
    for (Index d = 0; d < D; ++d) w.W_gate(e, d) = dyadic(rng, 8, 1.0 / 64);
    for (Index i = 0; i < D * F; ++i) w.w1[static_cast<size_t>(e * D * F + i)] = dyadic(rng, 8, 1.0 / 32);
    for (Index i = 0; i < D * F; ++i) w.w3[static_cast<size_t>(e * D * F + i)] = dyadic(rng, 8, 1.0 / 32);
    for (Index i = 0; i < F * D; ++i) w.w2[static_cast<size_t>(e * F * D + i)] = dyadic(rng, 8, 1.0 / 32);
  }
  Rng rng(seed);
  w.s1.resize(Fs ? D : 0, Fs);
  w.s3.resize(Fs ? D : 0, Fs);
  w.s2.resize(Fs, Fs ? D : 0);
  for (Index i = 0; i < w.s1.size(); ++i) w.s1.data()[i] = dyadic(rng, 8, 1.0 / 32);
  for (Index i = 0; i < w.s3.size(); ++i) w.s3.data()[i] = dyadic(rng, 8, 1.0 / 32);
  for (Index i = 0; i < w.s2.size(); ++i) w.s2.data()[i] = dyadic(rng, 8, 1.0 / 32);
  return w;
}

// The first E experts of a larger model (same seed: the same weights).
inline Weights<double> first_experts(const Weights<double>& w, const Config& c) {
  const Index E = c.n_experts, D = w.cfg.hidden, F = w.cfg.inter;
  require(E <= w.cfg.n_experts && c.hidden == D && c.inter == F && c.shared_inter == w.cfg.shared_inter,
          "moe::first_experts: config (E {}, D {}, F {}) violates a prefix of the model (E {}, D {}, F {})", E,
          c.hidden, c.inter, w.cfg.n_experts, D, F);
  Weights<double> r = w;
  r.cfg = c;
  r.W_gate = w.W_gate.topRows(E);
  r.bias.resize(static_cast<size_t>(E));
  r.w1.resize(static_cast<size_t>(E * D * F));
  r.w3.resize(static_cast<size_t>(E * D * F));
  r.w2.resize(static_cast<size_t>(E * F * D));
  check_config(c);
  return r;
}

inline Mat<double> make_tokens(Index T, Index D, uint64_t seed) {
  Rng rng(seed);
  Mat<double> x(T, D);
  for (Index i = 0; i < x.size(); ++i) x.data()[i] = dyadic(rng, 8, 1.0 / 8);
  return x;
}

// Bias patterns: "none"; "cold:E" (expert E never chosen); "hot:E" (expert E chosen by every token);
// "zipf" (expert of popularity rank r gets -0.3 ln(1 + r), ranks a seeded permutation; steps of 1/64).
inline std::vector<double> make_bias(const std::string& kind, Index E, uint64_t seed) {
  std::vector<double> b(static_cast<size_t>(E), 0.0);
  if (kind == "none") return b;
  if (kind.rfind("cold:", 0) == 0 || kind.rfind("hot:", 0) == 0) {
    const bool hot = kind[0] == 'h';
    const Index e = std::stoll(kind.substr(hot ? 4 : 5));
    require(e >= 0 && e < E, "moe::make_bias: expert {} violates 0 <= e < E = {}", e, E);
    b[static_cast<size_t>(e)] = hot ? 4.0 : -4.0;
    return b;
  }
  require(kind == "zipf", "moe::make_bias: kind '{}' violates kind in {{none, cold:E, hot:E, zipf}}", kind);
  Rng rng(seed);
  std::vector<Index> rank(static_cast<size_t>(E));
  std::iota(rank.begin(), rank.end(), Index{0});
  for (Index i = E - 1; i > 0; --i) std::swap(rank[static_cast<size_t>(i)], rank[rng.uniform_int(uint64_t(i + 1))]);
  for (Index e = 0; e < E; ++e) b[static_cast<size_t>(e)] = -std::round(64 * 0.3 * math::log(1.0 + double(rank[static_cast<size_t>(e)]))) / 64;
  return b;
}

}  // namespace ladder::moe
