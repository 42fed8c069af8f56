// ladder/04-moe/quant.hpp -- the int8 option of the JAX MoE: per-output-channel weight quantisation.
//
// rhs [G, K, N] -> q [G, K, N] int8 and scale [G, N] = max_k |rhs[g, k, n]| / 127 (1 where the column
// is zero); q = round(rhs / scale). ragged_dot_q8 (ragged_dot_q8.hpp) multiplies by the codes and scales
// each output column. The oracle of the dropless_int8 rung is dense_loop on dequantized_weights.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/04-moe/config.hpp"

namespace ladder::moe {

// Per-output-channel int8 weights: q [G, K, N], scale [G, N], w ~= q * scale.
struct QuantizedRhs {
  Index G = 0, K = 0, N = 0;
  std::vector<int8_t> q;
  std::vector<double> scale;
};

template <class T>
QuantizedRhs quantize_int8(const std::vector<T>& rhs, Index G, Index K, Index N) {
  require(Index(rhs.size()) == G * K * N, "moe::quantize_int8: rhs has {} entries, violates G * K * N = {}",
          rhs.size(), G * K * N);
  QuantizedRhs r{G, K, N, std::vector<int8_t>(rhs.size()), std::vector<double>(static_cast<size_t>(G * N))};
  for (Index g = 0; g < G; ++g)
    for (Index n = 0; n < N; ++n) {
      double amax = 0;
      for (Index k = 0; k < K; ++k) amax = std::max(amax, std::abs(double(rhs[static_cast<size_t>((g * K + k) * N + n)])));
      const double s = amax > 0 ? amax / 127.0 : 1.0;
      r.scale[static_cast<size_t>(g * N + n)] = s;
      for (Index k = 0; k < K; ++k)
        r.q[static_cast<size_t>((g * K + k) * N + n)] = static_cast<int8_t>(std::lround(double(rhs[static_cast<size_t>((g * K + k) * N + n)]) / s));
    }
  return r;
}

// q * scale as T (the weights the int8 rung effectively uses; the oracle of that rung runs on these).
template <class T>
std::vector<T> dequantize(const QuantizedRhs& r) {
  std::vector<T> w(r.q.size());
  for (Index g = 0; g < r.G; ++g)
    for (Index k = 0; k < r.K; ++k)
      for (Index n = 0; n < r.N; ++n)
        w[static_cast<size_t>((g * r.K + k) * r.N + n)] = T(r.q[static_cast<size_t>((g * r.K + k) * r.N + n)]) * T(r.scale[static_cast<size_t>(g * r.N + n)]);
  return w;
}

// The weights the dropless_int8 rung effectively uses, as T (its oracle: dense_loop on these).
template <class T>
Weights<T> dequantized_weights(const Weights<T>& w) {
  const Index E = w.cfg.n_experts, D = w.cfg.hidden, F = w.cfg.inter;
  Weights<T> d = w;
  d.w1 = dequantize<T>(quantize_int8(w.w1, E, D, F));
  d.w3 = dequantize<T>(quantize_int8(w.w3, E, D, F));
  d.w2 = dequantize<T>(quantize_int8(w.w2, E, F, D));
  return d;
}

}  // namespace ladder::moe
