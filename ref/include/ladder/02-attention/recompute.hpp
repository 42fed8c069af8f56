// ladder/02-attention/recompute.hpp -- stage 02, rung 4: the backward pass with recomputation (notes §3.8;
// FlashAttention Alg. 4, FlashAttention-2 Alg. 2).
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward <- this file
//   03 mla ... 06 disagg (see attention/problem.hpp)
//
// The forward kept only O and the row logsumexp L = m + log l, O(N) numbers per head. The backward
// rebuilds each tile of P from Q, K and L instead of reading a stored N x N matrix:
//   D_i  = rowsum(dO_i o O_i)                 (once per row: equals sum_j P_ij dP_ij)
//   for each KV block j (outer), each Q block i (inner):
//     S_ij  = scale Q_i K_j^T,   P_ij = e^{S_ij - L_i}       (the recomputation)
//     dV_j += P_ij^T dO_i
//     dP_ij = dO_i V_j^T
//     dS_ij = P_ij o (dP_ij - D_i)
//     dQ_i += scale dS_ij K_j                  (read-modify-write of dQ_i in the array)
//     dK_j += scale dS_ij^T Q_i
// More FLOPs than the naive backward (S is recomputed: 5 tile GEMMs instead of 4 products plus the
// forward's stored P) but no N x N traffic: the §3.8 trade that wins because attention is bound by
// memory traffic, not arithmetic.
//
// Parallelism: one task per head (b, h). dQ_i receives a contribution from every KV block, so running
// KV blocks of one head in parallel needs atomic adds on dQ (FA2's CUDA choice, whose summation order
// depends on timing) or a second pass for dQ (two more tile GEMMs). One writer per head keeps the
// paper's FLOPs and makes the result independent of the thread count; heads are plentiful in training
// (B H >= threads), and the CUDA rung shows the atomics.
// Masked entries and fully masked rows (L = -inf) get P = 0, hence zero gradients.
#pragma once
#include "ladder/core/eigen.hpp"
#include <cmath>
#include <cstdint>

#include "ladder/02-attention/problem.hpp"
#include "ladder/02-attention/tile_ops.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::attention {

// Q, O, dO [B,H,Nq,d], K, V [B,H,Nk,d], L [B,H,Nq] (from the forward) -> dQ [B,H,Nq,d], dK, dV [B,H,Nk,d],
// D [B,H,Nq]. tiles: {Br, Bc}; traffic (may be null) receives the elements moved to and from the arrays.
template <class T>
LADDER_LAB_ENTRY void recompute_backward(const Problem& p, const T* Q, const T* K, const T* V, const T* O, const T* dO,
                                         const T* L, T* dQ, T* dK, T* dV, T* D, Tiles tiles,
                                         Traffic* traffic = nullptr) {
  check_problem(p, "recompute backward");
  check_pointers("recompute backward", Q, K, V, O, dO, L, dQ, dK, dV, D);
  check_tiles(tiles);
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, dp = tile::width<T>(d);
  const int64_t Br = std::min(tiles.Br, Nq), Bc = std::min(tiles.Bc, Nk);
  const T inf = std::numeric_limits<T>::infinity();

#pragma omp parallel
  {
    // The tile buffers, dp wide as in tiled.hpp (tile_ops.hpp): the loads write the first d columns and
    // the rest stay 0, so the gradients' extra columns accumulate exactly 0; only the first d are stored.
    Mat<T> Qi = Mat<T>::Zero(Br, dp), dOi = Mat<T>::Zero(Br, dp), Kj = Mat<T>::Zero(Bc, dp), Vj = Mat<T>::Zero(Bc, dp);
    Mat<T> dQi = Mat<T>::Zero(Br, dp), dKj(Bc, dp), dVj(Bc, dp), P(Br, Bc), dS(Br, Bc);
    Vec<T> Li(Br), Di(Br);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < p.heads(); ++bh) {
      int64_t rd = 0, wr = 0;
      const int64_t qoff = bh * Nq, koff = bh * Nk;
      for (int64_t row = qoff; row < qoff + Nq; ++row)  // D = rowsum(dO o O)
        D[row] = Eigen::Map<const RowVec<T>>(dO + row * d, d).dot(Eigen::Map<const RowVec<T>>(O + row * d, d));
      MatMap<T>(dQ + qoff * d, Nq, d).setZero();
      rd += 2 * Nq * d;
      wr += Nq + Nq * d;

      for (int64_t c0 = 0; c0 < Nk; c0 += Bc) {  // outer loop: KV block j
        const int64_t bc = std::min(Bc, Nk - c0);
        auto k = Kj.topRows(bc);
        auto v = Vj.topRows(bc);
        auto dk = dKj.topRows(bc);
        auto dv = dVj.topRows(bc);
        k.leftCols(d) = ConstMatMap<T>(K + (koff + c0) * d, bc, d);
        v.leftCols(d) = ConstMatMap<T>(V + (koff + c0) * d, bc, d);
        rd += 2 * bc * d;
        dk.setZero();
        dv.setZero();

        for (int64_t r0 = p.first_row(c0) / Br * Br; r0 < Nq; r0 += Br) {  // inner loop: Q blocks that see j
          const int64_t br = std::min(Br, Nq - r0);
          auto q = Qi.topRows(br);
          auto g = dOi.topRows(br);
          auto dq = dQi.topRows(br);
          q.leftCols(d) = T(p.scale) * ConstMatMap<T>(Q + (qoff + r0) * d, br, d);
          g.leftCols(d) = ConstMatMap<T>(dO + (qoff + r0) * d, br, d);
          dq.leftCols(d) = ConstMatMap<T>(dQ + (qoff + r0) * d, br, d);  // dQ_i: read here, written back below
          Li.head(br) = Eigen::Map<const Vec<T>>(L + qoff + r0, br);
          Di.head(br) = Eigen::Map<const Vec<T>>(D + qoff + r0, br);
          rd += 3 * br * d + 2 * br;
          wr += br * d;

          auto pt = P.topLeftCorner(br, bc);
          auto ds = dS.topLeftCorner(br, bc);
          // lab:todo(recompute_tile) notes §3.8: P_ij = e^{S_ij - L_i} recomputed into pt (tile::nt(q.leftCols(d), k.leftCols(d), pt); hidden entries and L = -inf rows 0); dV_j += P^T dO_i (tile::tn_add(pt, g, dv)); dP = dO_i V_j^T into ds (tile::nt on g.leftCols(d), v.leftCols(d)); dS = P o (dP - D_i) in ds; dQ_i += scale dS K_j (tile::nn_add(T(p.scale), ds, k, dq)); dK_j += scale dS^T Q_i (tile::tn_add).
          tile::nt<T>(q.leftCols(d), k.leftCols(d), pt);  // S_ij (Q_i carries the scale)
          for (int64_t r = 0; r < br; ++r) {  // P_ij = e^{S_ij - L_i}, hidden entries 0
            const int64_t visible = std::clamp<int64_t>(p.last_key(r0 + r) - c0 + 1, 0, bc);
            auto prow = pt.row(r);
            if (visible == 0 || Li(r) == -inf) {
              prow.setZero();
              continue;
            }
            prow.head(visible) = (prow.head(visible).array() - Li(r)).exp();
            prow.tail(bc - visible).setZero();
          }
          tile::tn_add<T>(pt, g, dv);          // dV_j += P^T dO_i
          tile::nt<T>(g.leftCols(d), v.leftCols(d), ds);  // dP_ij
          for (int64_t r = 0; r < br; ++r)     // dS_ij = P o (dP - D_i)
            ds.row(r) = pt.row(r).cwiseProduct((ds.row(r).array() - Di(r)).matrix());
          tile::nn_add<T>(T(p.scale), ds, k, dq);  // dQ_i += scale dS K_j
          tile::tn_add<T>(ds, q, dk);             // dK_j += scale dS^T Q_i (scale is in Q_i)
          // lab:end
          MatMap<T>(dQ + (qoff + r0) * d, br, d) = dq.leftCols(d);
        }
        MatMap<T>(dK + (koff + c0) * d, bc, d) = dk.leftCols(d);
        MatMap<T>(dV + (koff + c0) * d, bc, d) = dv.leftCols(d);
        wr += 2 * bc * d;
      }
      if (traffic) traffic->add(rd, wr);
    }
  }
}

}  // namespace ladder::attention
