// ladder/02-attention/naive.hpp -- stage 02, rung 1: standard attention (notes §3.2, Alg. 0) and its
// backward from the materialised P.
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive <- this file -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla ... 06 disagg (see attention/problem.hpp)
//
// Every step is its own pass over the "HBM" arrays, as the standard implementation launches one
// kernel per step; S, P (and in the backward dP, dS) are [Nq, Nk] arrays per head (the forward reuses
// one head's buffers head after head, the backward too). That is the cost the later
// rungs remove: 2 B H Nq Nk extra elements forward, 3 B H Nq Nk backward. Each pass is parallel
// over (head, block of kRowBlock rows); the GEMMs inside run single-threaded, so every
// element is computed by the same sequence of operations whatever the thread count. For T = double
// (the oracle) the products, exponentials and row sums run in an order fixed by the code
// (ladder/core/gemm.hpp), so the goldens are the same bytes on every CPU; float keeps Eigen's GEMM,
// except as the tolerance rule's baseline (core/fixed_order.hpp: fixed order, pairwise row sums).
// T = double is the stage's oracle (goldens and tests use naive_forward<double>, naive_backward<double>).
#pragma once
#include "ladder/core/eigen.hpp"
#include <cmath>
#include <cstdint>
#include <memory>
#include <new>

#include "ladder/02-attention/problem.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/gemm.hpp"
#include "ladder/core/math.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention {

namespace detail {

inline constexpr int64_t kRowBlock = 64;

struct AlignedDelete {
  template <class T>
  void operator()(T* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
// Scratch every element of which is written first, 64-byte aligned: Eigen's vectorised reductions (the
// float row sum and dot below) peel an unaligned head with scalar code, so with AVX's 32-byte packets
// a row's sum would otherwise depend on where the allocator put the buffer, and change from run to run.
template <class T>
std::unique_ptr<T[], AlignedDelete> uninitialised(int64_t n) {
  return std::unique_ptr<T[], AlignedDelete>(new (std::align_val_t(64)) T[static_cast<size_t>(n)]);
}

// The G = H / H_kv query heads that share one kv head of batch row b, stacked: rows = G Nq rows of Q
// (contiguous in [B, H, Nq, d]), row r being query r % Nq of head r / Nq of the group. With G = 1 it is
// one head. Its visible keys are [first(r), last(r)] (problem.hpp's masks, aligned with n_b keys).
struct Block {
  const Problem& p;
  int64_t b, rows;
  int64_t first(int64_t r) const { return std::min(p.first_key(r % p.Nq, b), p.Nk); }
  int64_t last(int64_t r) const { return std::min(p.last_key(r % p.Nq, b), p.Nk - 1); }
  // Sets row r's invisible entries to `value`: keys before first(r) and after last(r).
  template <class Row, class T>
  void mask(Row&& row, int64_t r, T value) const {
    const int64_t f = std::clamp<int64_t>(first(r), 0, p.Nk), l = std::clamp<int64_t>(last(r) + 1, f, p.Nk);
    row.head(f).setConstant(value);
    row.tail(p.Nk - l).setConstant(value);
  }
};

// Alg. 0 line 1: S = scale Q K^T for one block of rows; masked entries are -inf.
template <class T>
void scores(const Block& k, const T* Q, const T* K, T* S) {
  const int64_t Nk = k.p.Nk, d = k.p.d, blocks = (k.rows + kRowBlock - 1) / kRowBlock;
  const T inf = std::numeric_limits<T>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t r0 = t * kRowBlock, nr = std::min(kRowBlock, k.rows - r0);
    gemm<T>(nr, Nk, d, T(k.p.scale), Q + r0 * d, d, Op::N, K, d, Op::T, S + r0 * Nk, Nk);
    MatMap<T> s(S + r0 * Nk, nr, Nk);
    for (int64_t r = 0; r < nr; ++r) k.mask(s.row(r), r0 + r, -inf);
  }
}

// Alg. 0 line 2: P = softmax(S) row-wise, the safe softmax of notes Alg. 2: m = max_j S_ij (lines 1-4),
// numerators e^{S_ij - m} stored in P, d = their sum (lines 5-8), P /= d (lines 9-11; Alg. 2 takes the
// exp twice, we keep the numerators). Also L = m + log d (what the tiled rung stores) and m.
// A fully masked row (m = -inf) is defined as P = 0, L = m = -inf. L and m may be null.
template <class T>
void softmax_rows(const Block& k, const T* S, T* P, T* L, T* m) {
  const int64_t Nk = k.p.Nk;
  const T inf = std::numeric_limits<T>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < k.rows; ++row) {
    Eigen::Map<const RowVec<T>> s(S + row * Nk, Nk);
    Eigen::Map<RowVec<T>> pr(P + row * Nk, Nk);
    const T mx = s.maxCoeff();
    if (mx == -inf) {
      pr.setZero();
      if (L) L[row] = -inf;
      if (m) m[row] = -inf;
      continue;
    }
    // The oracle (double) and the rule's float32 baseline (core/fixed_order.hpp): ladder::math's exp.
    const bool pinned = std::is_same_v<T, double> || fixed_order();
    if (pinned) {
      for (int64_t j = 0; j < Nk; ++j) pr[j] = math::exp(s[j] - mx);
    } else {
      pr = (s.array() - mx).exp();
    }
    // e^{-inf} must be exactly 0; a vectorised exp clamps its argument and may return ~1e-39.
    k.mask(pr, row, T(0));
    T dsum;
    if constexpr (std::is_same_v<T, double>) {  // the oracle: a sum in index order, a division
      dsum = sum_fixed_order(pr.data(), Nk);
      pr /= dsum;
    } else {  // float: Eigen's vectorised sum (the baseline: pairwise) and one reciprocal
      dsum = pinned ? sum_pairwise(pr.data(), Nk) : pr.sum();
      pr *= T(1) / dsum;
    }
    if (L) L[row] = mx + math::log(dsum);
    if (m) m[row] = mx;
  }
}

// Alg. 0 line 3 (and the backward's products): C [rows, w] = alpha * A B, A [rows, inner], B [inner, w].
template <class T>
void head_products(int64_t rows, const T* A, const T* Bm, int64_t inner, int64_t w, T alpha, T* C) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t r0 = t * kRowBlock, nr = std::min(kRowBlock, rows - r0);
    gemm<T>(nr, w, inner, alpha, A + r0 * inner, inner, Op::N, Bm, w, Op::N, C + r0 * w, w);
  }
}

// C [Nk, w] = alpha * A^T X, A [rows, Nk], X [rows, w]: parallel over blocks of key rows; the sum over
// the rows (for a GQA group: its query heads one after the other) runs in row order.
template <class T>
void head_products_transposed(int64_t rows, int64_t Nk, const T* A, const T* X, int64_t w, T alpha, T* C) {
  const int64_t blocks = (Nk + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < blocks; ++t) {
    const int64_t c0 = t * kRowBlock, nc = std::min(kRowBlock, Nk - c0);
    gemm<T>(nc, w, rows, alpha, A + c0, Nk, Op::T, X, w, Op::N, C + c0 * w, w);
  }
}

}  // namespace detail

// Forward, notes Alg. 0: S = scale Q K^T, P = softmax(S), O = P V.
// Q [B,H,Nq,d], K [B,H_kv,Nk,d], V [B,H_kv,Nk,d_v] -> O [B,H,Nq,d_v], L [B,H,Nq] (row logsumexp),
// m [B,H,Nq] (row max; may be null). Any Problem check_problem accepts (GQA, d_v, windows, seqlens).
template <class T>
void naive_forward(const Problem& p, const T* Q, const T* K, const T* V, T* O, T* L, T* m) {
  check_problem(p, "naive", true);
  check_pointers("naive", Q, K, V, O, L);
  // One (batch, kv head) at a time: S and P of its G query heads [G Nq, Nk] are written and read back in
  // full, as the standard implementation does, but the buffers are reused from block to block instead
  // of holding all B H of them at once (1 GiB at N = 4096, B H = 8 in fp32: fresh pages for every call).
  // Every element is computed by the same operations either way, so the fp64 goldens do not change.
  const int64_t G = p.group(), rows = G * p.Nq, Nk = p.Nk, d = p.d, dv = p.dim_v();
  auto S = detail::uninitialised<T>(rows * Nk), P = detail::uninitialised<T>(rows * Nk);
  for (int64_t kv = 0; kv < p.B * p.kv_heads(); ++kv) {
    const detail::Block k{p, kv / p.kv_heads(), rows};
    const int64_t q0 = kv * rows;  // first stacked query row: (b H + kv_h G) Nq
    detail::scores(k, Q + q0 * d, K + kv * Nk * d, S.get());                                  // line 1
    detail::softmax_rows(k, S.get(), P.get(), L + q0, m ? m + q0 : m);                        // line 2
    detail::head_products(rows, P.get(), V + kv * Nk * dv, Nk, dv, T(1), O + q0 * dv);        // line 3
  }
}

// Backward of the standard implementation, from the materialised P (it re-runs Alg. 0 lines 1-2, as a
// framework would have kept P from the forward; O and L are therefore not read, except O by the rule's
// float32 baseline's D, below):
//   dV = P^T dO,  dP = dO V^T,  D_i = sum_j P_ij dP_ij,  dS = P o (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
// dS = P o (dP - D) is the softmax Jacobian applied row by row (dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik)).
// A fully masked row has P = 0, so D = 0 and its dQ row is 0. D [B,H,Nq] equals rowsum(dO o O).
// Shapes as naive_forward; dO [B,H,Nq,d_v] -> dQ [B,H,Nq,d], dK [B,H_kv,Nk,d], dV [B,H_kv,Nk,d_v], D [B,H,Nq].
// GQA: dK and dV of a kv head are the products over its G query heads stacked (one sum, in row order).
template <class T>
void naive_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* O, const T* dO, const T* L, T* dQ,
                    T* dK, T* dV, T* D) {
  (void)L;  // O is read only by the rule's float32 baseline (D, below)
  check_problem(p, "naive backward", true);
  check_pointers("naive backward", Q, K, V, dO, dQ, dK, dV, D);
  const int64_t G = p.group(), rows = G * p.Nq, Nk = p.Nk, d = p.d, dv = p.dim_v(), n = rows * Nk;
  // Per (batch, kv head): S, P, dP of its G heads [G Nq, Nk]; each element by the same operations as
  // when all B H heads were held at once (the goldens' bytes do not depend on it).
  auto S = detail::uninitialised<T>(n), P = detail::uninitialised<T>(n), dP = detail::uninitialised<T>(n);
  for (int64_t kv = 0; kv < p.B * p.kv_heads(); ++kv) {
    const detail::Block k{p, kv / p.kv_heads(), rows};
    const int64_t q0 = kv * rows;
    const T *Qh = Q + q0 * d, *dOh = dO + q0 * dv, *Kh = K + kv * Nk * d, *Vh = V + kv * Nk * dv;
    detail::scores(k, Qh, Kh, S.get());
    detail::softmax_rows<T>(k, S.get(), P.get(), nullptr, nullptr);
    detail::head_products_transposed(rows, Nk, P.get(), dOh, dv, T(1), dV + kv * Nk * dv);  // dV = P^T dO
    {  // dP = dO V^T: the same row-block GEMM with V^T; written out to keep the shapes readable
      const int64_t blocks = (rows + detail::kRowBlock - 1) / detail::kRowBlock;
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < blocks; ++t) {
        const int64_t r0 = t * detail::kRowBlock, nr = std::min(detail::kRowBlock, rows - r0);
        gemm<T>(nr, Nk, dv, T(1), dOh + r0 * dv, dv, Op::N, Vh, dv, Op::T, dP.get() + r0 * Nk, Nk);
      }
    }
    T* dS = S.get();  // S is no longer needed: its buffer holds dS
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      Eigen::Map<const RowVec<T>> pr(P.get() + row * Nk, Nk), dp(dP.get() + row * Nk, Nk);
      Eigen::Map<RowVec<T>> ds(dS + row * Nk, Nk);
      T& Di = D[q0 + row];
      if constexpr (std::is_same_v<T, double>)
        Di = dot_fixed_order(pr.data(), dp.data(), Nk);  // the oracle: index order
      else if (fixed_order())  // the rule's float32 baseline (core/fixed_order.hpp): D as FA2 and the
        // contract define it, rowsum(dO o O) of the float32 forward's O, summed pairwise. A kernel's D
        // carries O's rounding, which P . dP does not: on a one-query case the recompute rung's D was 7x
        // the P . dP baseline's error, and a one-element slice has no other error to lean on.
        Di = O ? dot_pairwise(dOh + row * dv, O + (q0 + row) * dv, dv) : dot_pairwise(pr.data(), dp.data(), Nk);
      else
        Di = pr.dot(dp);  // float: Eigen's vectorised dot
      ds = pr.cwiseProduct((dp.array() - Di).matrix());
    }
    detail::head_products(rows, dS, Kh, Nk, d, T(p.scale), dQ + q0 * d);                      // dQ = scale dS K
    detail::head_products_transposed(rows, Nk, dS, Qh, d, T(p.scale), dK + kv * Nk * d);  // dK = scale dS^T Q
  }
}

}  // namespace ladder::attention
