// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/02-attention/tiled.hpp -- stage 02, rung 3: tiled FlashAttention forward, FlashAttention-2 loop
// order (notes §3.7; Dao 2023, Alg. 1).
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) <- this file -> backward
//   03 mla ... 06 disagg (see attention/problem.hpp)
//
// Fig. 8 visits one key at a time; here a block of Br query rows meets a block of Bc keys at once.
// Q is cut into Tr = ceil(Nq/Br) blocks (the outer loop, FA2's order: each Q block is one independent
// task, O_i stays in the tile buffer until the end), K and V into Tc = ceil(Nk/Bc) blocks (inner loop).
// Per row r of the tile, the §3.7 merge of the running state (m, l, O) with the tile's (rowmax, P):
//   m_new = max(m, rowmax(S_ij[r,:]))
//   P[r,:] = e^{S_ij[r,:] - m_new}
//   l      = e^{m - m_new} l + rowsum(P[r,:])
//   O[r,:] = e^{m - m_new} O[r,:]            (then O_i += P V_j for the whole tile)
// Normalisation is deferred to the end (FA2): O_i /= l, and L_i = m + log l is stored for the
// backward. Unlike Fig. 8, l is not divided into O at every step, which saves Br x d divisions per tile.
//
// Causal: a KV block no row of the Q block can see is skipped (and not loaded); in a partly visible
// tile the hidden entries are left out of the max and get P = 0. A fully masked row ends with l = 0:
// O = 0, L = m = -inf by definition.
//
// The tile products are GEMMs on the tile buffers (single-threaded; the tasks are parallel), which is
// what makes the rung fast on a CPU: the tile:: functions of tile_ops.hpp, compiled once in the library;
// in float they and the row exp are tile_simd.hpp's register-blocked kernels, whose summation order is
// fixed by the code (the same bits with AVX-512, AVX2 or none), in double Eigen's GEMM. The buffers stand for on-chip memory: loading Q_i
// (scaled by `scale` on the way, so S = Q_i K_j^T needs no extra pass), K_j and V_j, and storing O_i
// and L_i are the only accesses to the [B,H,N,d] arrays, and are what Traffic counts.
// The buffers are dp = tile::width(d) wide, d rounded up to a 64-byte line with zero columns past d
// (tile_ops.hpp: Eigen's kernels are ~20 % slower on a ragged output width; the zeros stay 0 in O).
// S = Q_i K_j^T sums over d, so it takes the first d columns only (leftCols(d)): no work on zeros.
#pragma once
#include "ladder/core/eigen.hpp"
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/02-attention/problem.hpp"
#include "ladder/02-attention/tile_ops.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::attention {

namespace detail {
// Number of keys of the KV blocks a Q block with rows [r0, r0 + br) must visit (whole blocks).
inline int64_t keys_visited(const Problem& p, int64_t r0, int64_t br, int64_t Bc) {
  const int64_t kmax = p.last_key(r0 + br - 1);
  return kmax < 0 ? 0 : std::min(p.Nk, (kmax / Bc + 1) * Bc);
}
}  // namespace detail

// Q [B,H,Nq,d], K, V [B,H,Nk,d] -> O [B,H,Nq,d], L [B,H,Nq], m [B,H,Nq] (may be null; not counted).
// tiles: {Br, Bc}; traffic (may be null) receives the elements moved to and from the arrays.
template <class T>
LADDER_LAB_ENTRY void tiled_forward(const Problem& p, const T* Q, const T* K, const T* V, T* O, T* L, T* m, Tiles tiles,
                   Traffic* traffic = nullptr) {
  check_problem(p, "tiled");
  check_pointers("tiled", Q, K, V, O, L);
  check_tiles(tiles);
  const int64_t Nq = p.Nq, Nk = p.Nk, d = p.d, dp = tile::width<T>(d);
  const int64_t Br = std::min(tiles.Br, Nq), Bc = std::min(tiles.Bc, Nk);
  const int64_t Tr = (Nq + Br - 1) / Br;
  const T inf = std::numeric_limits<T>::infinity();

#pragma omp parallel
  {
    // The on-chip tile buffers, dp wide; the loads below write the first d columns, the rest stay 0.
    Mat<T> Qi = Mat<T>::Zero(Br, dp), Kj = Mat<T>::Zero(Bc, dp), Vj = Mat<T>::Zero(Bc, dp), S(Br, Bc), Oi(Br, dp);
    Vec<T> mi(Br), li(Br);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < p.heads() * Tr; ++t) {
      const int64_t bh = t / Tr, r0 = (t % Tr) * Br, br = std::min(Br, Nq - r0);
      int64_t rd = 0, wr = 0;
      auto q = Qi.topRows(br);
      auto o = Oi.topRows(br);
      q.leftCols(d) = T(p.scale) * ConstMatMap<T>(Q + (bh * Nq + r0) * d, br, d);  // load Q_i
      rd += br * d;
      o.setZero();
      mi.head(br).setConstant(-inf);
      li.head(br).setZero();

      const int64_t keys = detail::keys_visited(p, r0, br, Bc);
      for (int64_t c0 = 0; c0 < keys; c0 += Bc) {  // the inner loop over KV blocks j
        const int64_t bc = std::min(Bc, Nk - c0);
        auto k = Kj.topRows(bc);
        auto v = Vj.topRows(bc);
        k.leftCols(d) = ConstMatMap<T>(K + (bh * Nk + c0) * d, bc, d);  // load K_j, V_j
        v.leftCols(d) = ConstMatMap<T>(V + (bh * Nk + c0) * d, bc, d);
        rd += 2 * bc * d;
        auto s = S.topLeftCorner(br, bc);
        // TODO(lab: tiled_tile): notes §3.7: S_ij = q k^T into s (tile::nt(q.leftCols(d), k.leftCols(d), s): the sum runs over the d real columns); per row r (causal: the first `visible` keys) m_new, alpha = e^{m - m_new}, P = e^{S - m_new} in s (hidden entries 0), l and O rescaled; then O_i += P V_j (tile::nn_add(s, v, o)).
      }

      {  // Here `o` is O_i's first d columns (the buffer is dp wide; the rest is padding, see above).
        auto o = Oi.topLeftCorner(br, d);
        // TODO(lab: tiled_finish): FA2's deferred normalisation: O[row] = O_i[r] / l, L[row] = m + log l, m[row] if m is not null; a fully masked row (l = 0) gets O = 0, L = -inf.
      }
      wr += br * d + br;
      if (traffic) traffic->add(rd, wr);
    }
  }
}

}  // namespace ladder::attention
