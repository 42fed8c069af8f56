// ladder/02-attention/flash.hpp -- stage 02, rung 2: FlashAttention for one query row (notes §3.6, Fig. 8).
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive -> flash (one row, online) <- this file -> tiled (blocks, FA2 loop order) -> backward
//   03 mla ... 06 disagg (see attention/problem.hpp)
//
// One pass over the keys carries three values for query row k: the running max m_i, the running
// denominator d'_i and the already normalised output o'_i (notes Fig. 7):
//   x_i  = Q[k,:] K[i,:]^T * scale
//   m_i  = max(m_{i-1}, x_i)
//   d'_i = d'_{i-1} e^{m_{i-1} - m_i} + e^{x_i - m_i}
//   o'_i = o'_{i-1} d'_{i-1} e^{m_{i-1} - m_i} / d'_i + e^{x_i - m_i} / d'_i V[i,:]
// and O[k,:] = o'_N. The code evaluates the o' line in its equal form o'_i = o'_{i-1} + w_i (V[i,:] - o'_{i-1})
// with w_i = e^{x_i - m_i} / d'_i: by the d' line the first factor is d'_{i-1} e^{m_{i-1} - m_i} / d'_i
// = 1 - w_i. Same recurrence, fewer roundings per key (one weight, one fused multiply-add per element,
// exactly rounded on every CPU): written as two scaled terms its float32 error was 2.2-2.6x the naive
// rung's on the N = 1024 golden cases, at the tolerance rule's k = 2, and CPU dependent (the naive
// baseline's GEMM blocking follows the vector width); this form measured 1.0-1.2x there. S and P are never materialised, but K and V are read once per query row: the
// traffic that tiling (tiled.hpp) removes. Masked keys (causal) are simply not visited; a row that
// sees no key keeps o' = 0, m = -inf, d' = 0, so L = m + log d' = -inf (the defined fully masked row).
#pragma once
#include "ladder/core/eigen.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "ladder/02-attention/problem.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention {

// Fig. 8 for row i of one head: q [d], K, V [Nk, d] of that head -> o [d]; returns {m_N, L = m_N + log d'_N}.
template <class T>
std::pair<T, T> flash_row(const Problem& p, int64_t i, const T* q, const T* K, const T* V, T* o) {
  const int64_t d = p.d, last = p.last_key(i);
  Eigen::Map<const RowVec<T>> qv(q, d);
  std::fill(o, o + d, T(0));                          // o'_0 = 0
  T m = -std::numeric_limits<T>::infinity(), dp = 0;  // m_0 = -inf, d'_0 = 0
  for (int64_t j = 0; j <= last; ++j) {
    Eigen::Map<const RowVec<T>> kj(K + j * d, d);
    const T* vj = V + j * d;
    const T x = T(p.scale) * qv.dot(kj);
    const T m_new = std::max(m, x);
    const T r = std::exp(m - m_new);  // e^{m_{i-1} - m_i}; 0 at the first key (m_0 = -inf)
    const T e = std::exp(x - m_new);  // e^{x_i - m_i}
    const T dr = dp * r;
    const T d_new = dr + e;  // d'_i
    const T w = e / d_new;   // w_i; 1 - w_i = d'_{i-1} e^{m_{i-1} - m_i} / d'_i
    for (int64_t c = 0; c < d; ++c) o[c] = std::fma(w, vj[c] - o[c], o[c]);  // o'_i
    m = m_new;
    dp = d_new;
  }
  return {m, m + std::log(dp)};  // fully masked: -inf + log 0 = -inf
}

// All rows of all heads: Q [B,H,Nq,d], K, V [B,H,Nk,d] -> O [B,H,Nq,d], L [B,H,Nq], m [B,H,Nq] (may be null).
// Parallel over rows; each row is one sequential pass, so the result does not depend on the thread count.
template <class T>
void flash_forward(const Problem& p, const T* Q, const T* K, const T* V, T* O, T* L, T* m) {
  check_problem(p, "flash");
  check_pointers("flash", Q, K, V, O, L);
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.heads() * Nq; ++row) {
    const int64_t bh = row / Nq;
    const auto [mx, lse] = flash_row(p, row % Nq, Q + row * d, K + bh * Nk * d, V + bh * Nk * d, O + row * d);
    L[row] = lse;
    if (m) m[row] = mx;
  }
}

}  // namespace ladder::attention
