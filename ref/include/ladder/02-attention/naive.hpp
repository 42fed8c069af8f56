// ladder/02-attention/naive.hpp -- stage 02, rung 1: standard attention (notes §3.2, Alg. 0) and its
// backward from the materialised P.
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive <- this file -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla ... 06 disagg (see attention/problem.hpp)
//
// Every step is its own pass over the "HBM" arrays, as the standard implementation launches one
// kernel per step; S, P (and in the backward dP, dS) are [Nq, Nk] arrays per head (the forward reuses
// one head's buffers head after head; the backward holds [B, H, Nq, Nk]). That is the cost the later
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

// Alg. 0 line 1: S = scale Q K^T for every head; masked entries (causal) are -inf.
template <class T>
void scores(const Problem& p, const T* Q, const T* K, T* S) {
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, blocks = (Nq + kRowBlock - 1) / kRowBlock;
  const T inf = std::numeric_limits<T>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < p.heads() * blocks; ++t) {
    const int64_t bh = t / blocks, r0 = (t % blocks) * kRowBlock, nr = std::min(kRowBlock, Nq - r0);
    gemm<T>(nr, Nk, d, T(p.scale), Q + (bh * Nq + r0) * d, d, Op::N, K + bh * Nk * d, d, Op::T,
            S + (bh * Nq + r0) * Nk, Nk);
    MatMap<T> s(S + (bh * Nq + r0) * Nk, nr, Nk);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t visible = std::clamp<int64_t>(p.last_key(r0 + r) + 1, 0, Nk);
      s.row(r).tail(Nk - visible).setConstant(-inf);
    }
  }
}

// Alg. 0 line 2: P = softmax(S) row-wise, the safe softmax of notes Alg. 2: m = max_j S_ij (lines 1-4),
// numerators e^{S_ij - m} stored in P, d = their sum (lines 5-8), P /= d (lines 9-11; Alg. 2 takes the
// exp twice, we keep the numerators). Also L = m + log d (what the tiled rung stores) and m.
// A fully masked row (m = -inf) is defined as P = 0, L = m = -inf. L and m may be null.
template <class T>
void softmax_rows(const Problem& p, const T* S, T* P, T* L, T* m) {
  const int64_t Nq = p.Nq, Nk = p.Nk;
  const T inf = std::numeric_limits<T>::infinity();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.heads() * Nq; ++row) {
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
    const int64_t visible = std::clamp<int64_t>(p.last_key(row % Nq) + 1, 0, Nk);
    pr.tail(Nk - visible).setZero();
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

// Alg. 0 line 3 (and the backward's products): C = alpha * A B per head, A [Nq, Nk] (row-major).
template <class T>
void head_products(const Problem& p, const T* A, const T* Bm, int64_t b_rows, T alpha, T* C) {
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, blocks = (Nq + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < p.heads() * blocks; ++t) {
    const int64_t bh = t / blocks, r0 = (t % blocks) * kRowBlock, nr = std::min(kRowBlock, Nq - r0);
    gemm<T>(nr, d, b_rows, alpha, A + (bh * Nq + r0) * Nk, Nk, Op::N, Bm + bh * b_rows * d, d, Op::N,
            C + (bh * Nq + r0) * d, d);
  }
}

// C [Nk, d] = alpha * A^T X per head, A [Nq, Nk], X [Nq, d]: parallel over blocks of key rows.
template <class T>
void head_products_transposed(const Problem& p, const T* A, const T* X, T alpha, T* C) {
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, blocks = (Nk + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < p.heads() * blocks; ++t) {
    const int64_t bh = t / blocks, c0 = (t % blocks) * kRowBlock, nc = std::min(kRowBlock, Nk - c0);
    gemm<T>(nc, d, Nq, alpha, A + bh * Nq * Nk + c0, Nk, Op::T, X + bh * Nq * d, d, Op::N, C + (bh * Nk + c0) * d, d);
  }
}

}  // namespace detail

// Forward, notes Alg. 0: S = scale Q K^T, P = softmax(S), O = P V.
// Q [B,H,Nq,d], K, V [B,H,Nk,d] -> O [B,H,Nq,d], L [B,H,Nq] (row logsumexp), m [B,H,Nq] (row max; may be null).
template <class T>
void naive_forward(const Problem& p, const T* Q, const T* K, const T* V, T* O, T* L, T* m) {
  check_problem(p, "naive");
  check_pointers("naive", Q, K, V, O, L);
  // One (batch, head) at a time: S and P of one head [Nq, Nk] are written and read back in full, as
  // the standard implementation does, but the buffers are reused from head to head instead of holding
  // all B H of them at once (1 GiB at N = 4096, B H = 8 in fp32: fresh pages for every call). Every
  // element is computed by the same operations either way, so the fp64 goldens do not change.
  Problem one = p;
  one.B = one.H = 1;
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, n = Nq * Nk;
  auto S = detail::uninitialised<T>(n), P = detail::uninitialised<T>(n);
  for (int64_t bh = 0; bh < p.heads(); ++bh) {
    detail::scores(one, Q + bh * Nq * d, K + bh * Nk * d, S.get());                    // line 1
    detail::softmax_rows(one, S.get(), P.get(), L + bh * Nq, m ? m + bh * Nq : m);  // line 2
    detail::head_products(one, P.get(), V + bh * Nk * d, Nk, T(1), O + bh * Nq * d);  // line 3
  }
}

// Backward of the standard implementation, from the materialised P (it re-runs Alg. 0 lines 1-2, as a
// framework would have kept P from the forward; O and L are therefore not read):
//   dV = P^T dO,  dP = dO V^T,  D_i = sum_j P_ij dP_ij,  dS = P o (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
// dS = P o (dP - D) is the softmax Jacobian applied row by row (dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik)).
// A fully masked row has P = 0, so D = 0 and its dQ row is 0. D [B,H,Nq] equals rowsum(dO o O).
template <class T>
void naive_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* O, const T* dO, const T* L, T* dQ,
                    T* dK, T* dV, T* D) {
  (void)O, (void)L;
  check_problem(p, "naive backward");
  check_pointers("naive backward", Q, K, V, dO, dQ, dK, dV, D);
  const int64_t Nq = p.Nq, Nk = p.Nk, n = p.heads() * Nq * Nk;
  auto S = detail::uninitialised<T>(n), P = detail::uninitialised<T>(n), dP = detail::uninitialised<T>(n);
  detail::scores(p, Q, K, S.get());
  detail::softmax_rows<T>(p, S.get(), P.get(), nullptr, nullptr);
  detail::head_products_transposed(p, P.get(), dO, T(1), dV);  // dV = P^T dO
  {  // dP = dO V^T: the same row-block GEMM with V^T; written out to keep the shapes readable
    const int64_t d = p.d, blocks = (Nq + detail::kRowBlock - 1) / detail::kRowBlock;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < p.heads() * blocks; ++t) {
      const int64_t bh = t / blocks, r0 = (t % blocks) * detail::kRowBlock;
      const int64_t nr = std::min(detail::kRowBlock, Nq - r0);
      gemm<T>(nr, Nk, d, T(1), dO + (bh * Nq + r0) * d, d, Op::N, V + bh * Nk * d, d, Op::T,
              dP.get() + (bh * Nq + r0) * Nk, Nk);
    }
  }
  T* dS = S.get();  // S is no longer needed: its buffer holds dS
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.heads() * Nq; ++row) {
    Eigen::Map<const RowVec<T>> pr(P.get() + row * Nk, Nk), dp(dP.get() + row * Nk, Nk);
    Eigen::Map<RowVec<T>> ds(dS + row * Nk, Nk);
    if constexpr (std::is_same_v<T, double>)
      D[row] = dot_fixed_order(pr.data(), dp.data(), Nk);  // the oracle: index order
    else if (fixed_order())
      D[row] = dot_pairwise(pr.data(), dp.data(), Nk);  // the rule's float32 baseline (core/fixed_order.hpp)
    else
      D[row] = pr.dot(dp);  // float: Eigen's vectorised dot
    ds = pr.cwiseProduct((dp.array() - D[row]).matrix());
  }
  detail::head_products(p, dS, K, Nk, T(p.scale), dQ);         // dQ = scale dS K
  detail::head_products_transposed(p, dS, Q, T(p.scale), dK);  // dK = scale dS^T Q
}

}  // namespace ladder::attention
