// ladder/02-attention/cost.hpp -- stage 02: FLOPs and slow-memory ("HBM") traffic of every rung as
// formulas of the shape (core/cost.hpp's Cost).
//
// Conventions (documented once, used by every formula below):
//   * a GEMM of m x k by k x n is 2mkn FLOPs; exp, log, max, division count one FLOP each;
//   * bytes = elements x elem_bytes (4 for the fp32 rungs; the A100 model in `ladder reproduce` uses 2);
//   * traffic is what the algorithm as written moves between the [B,H,N,*] arrays and its working set:
//     a row of S read by the softmax pass counts once (one row fits on chip), a tile copied into a
//     tile buffer counts once per copy; the tiled rungs count the same traffic as they run (Traffic),
//     and the tests check count == formula;
//   * causal: the naive rung computes the whole N x N products and masks (as the standard
//     implementation does); flash visits only visible keys; the tiled rungs skip whole invisible tiles
//     and count a partly visible tile whole.
//   * extra_bytes: slow-memory scratch beyond inputs and outputs (S, P, dP); tile buffers are on chip.
#pragma once
#include <cstdint>

#include "ladder/02-attention/problem.hpp"
#include "ladder/02-attention/tiled.hpp"
#include "ladder/core/cost.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention {

// The registry's cost shape: {B, H, Nq, Nk, d} or {B, H, Nq, Nk, d, causal}; scale 1/sqrt(d).
inline Problem problem_from_shape(const Shape& s) {
  require(s.size() == 5 || s.size() == 6, "attention cost: shape {} must be {{B, H, Nq, Nk, d[, causal]}}",
          shape_str(s));
  Problem p = Problem::make(s[0], s[1], s[2], s[3], s[4], s.size() == 6 && s[5] != 0);
  check_problem(p, "cost");
  return p;
}

namespace detail {
inline double dbl(int64_t v) { return static_cast<double>(v); }

// Number of (query, key) pairs the causal rule lets through, per head.
inline double visible_pairs(const Problem& p) {
  double n = 0;
  for (int64_t i = 0; i < p.Nq; ++i) n += dbl(std::clamp<int64_t>(p.last_key(i) + 1, 0, p.Nk));
  return n;
}
}  // namespace detail

// Naive forward (Alg. 0): line 1 reads Q, K and writes S; line 2 reads S, writes P, L; line 3 reads P, V,
// writes O. FLOPs: two GEMMs 4 Nq Nk d, the scale 1, softmax 5 (max, sub, exp, sum, div) per score,
// log + add per row.
inline Cost naive_forward_cost(const Problem& p, double e = 4) {
  using detail::dbl;
  const double h = dbl(p.heads()), Nq = dbl(p.Nq), Nk = dbl(p.Nk), d = dbl(p.d), nn = Nq * Nk;
  return Cost{h * (4 * nn * d + 6 * nn + 2 * Nq), e * h * (Nq * d + 2 * Nk * d + 2 * nn),
              e * h * (2 * nn + Nq * d + Nq), e * h * 2 * nn};
}

// The standard backward's own passes, with P kept by the forward (what a framework runs):
//   dV = P^T dO (reads P, dO; writes dV)      dP = dO V^T (reads dO, V; writes dP)
//   D, dS (reads P, dP; writes dS, D)        dQ = scale dS K (reads dS, K)    dK = scale dS^T Q (reads dS, Q)
// FLOPs: four GEMMs 8 Nq Nk d, D and dS 4 per score, the scales Nq d + Nk d.
inline Cost naive_backward_passes_cost(const Problem& p, double e = 4) {
  using detail::dbl;
  const double h = dbl(p.heads()), Nq = dbl(p.Nq), Nk = dbl(p.Nk), d = dbl(p.d), nn = Nq * Nk;
  return Cost{h * (8 * nn * d + 4 * nn + Nq * d + Nk * d), e * h * (5 * nn + 3 * Nq * d + 2 * Nk * d),
              e * h * (2 * nn + Nq + 2 * Nk * d + Nq * d), e * h * 2 * nn};
}

// The naive backward rung as implemented: it re-materialises S and P (Alg. 0 lines 1-2, without L),
// then runs the passes above; scratch S/dS, P, dP.
inline Cost naive_backward_cost(const Problem& p, double e = 4) {
  using detail::dbl;
  const double h = dbl(p.heads()), Nq = dbl(p.Nq), Nk = dbl(p.Nk), d = dbl(p.d), nn = Nq * Nk;
  const Cost lines12{h * (2 * nn * d + 6 * nn), e * h * (Nq * d + Nk * d + nn), e * h * 2 * nn, 0};
  Cost c = lines12 + naive_backward_passes_cost(p, e);
  c.extra_bytes = e * h * 3 * nn;
  return c;
}

// Flash (Fig. 8): per visible pair a dot (2d) and scale, max, two exps with their subtractions, d'
// (mul, add), the two coefficients (2 div) and the o' update (3d); per row log + add. Reads q once
// and K_j, V_j once per visible pair (no reuse across rows); writes O, L.
inline Cost flash_forward_cost(const Problem& p, double e = 4) {
  using detail::dbl;
  const double h = dbl(p.heads()), Nq = dbl(p.Nq), d = dbl(p.d), pairs = detail::visible_pairs(p);
  return Cost{h * (pairs * (5 * d + 10) + 2 * Nq), e * h * (Nq * d + 2 * d * pairs), e * h * (Nq * d + Nq), 0};
}

// Tiled forward with tiles {Br, Bc} (clipped to Nq, Nk as the rung clips them). Per Q block i (br rows)
// visiting keys_i keys in n_i tiles: reads Q_i once, K_j and V_j once per visited tile; writes O_i, L_i.
// FLOPs: scaling Q_i (br d), per tile the two GEMMs (4 br bc d), the softmax of the tile (max, sub, exp,
// sum: 4 br bc), per row per tile the merge (max, sub, exp, 2 for l, d for O: d + 5); at the end
// O_i / l (br d) and L (2 br).
inline Cost tiled_forward_cost(const Problem& p, Tiles t, double e = 4) {
  using detail::dbl;
  check_tiles(t);
  const int64_t Br = std::min(t.Br, p.Nq), Bc = std::min(t.Bc, p.Nk);
  const double d = dbl(p.d);
  double flops = 0, rd = 0;
  for (int64_t r0 = 0; r0 < p.Nq; r0 += Br) {
    const double br = dbl(std::min(Br, p.Nq - r0));
    const int64_t keys = detail::keys_visited(p, r0, std::min(Br, p.Nq - r0), Bc);
    const double n_tiles = dbl((keys + Bc - 1) / Bc);
    flops += br * d + 4 * br * dbl(keys) * d + 4 * br * dbl(keys) + n_tiles * br * (d + 5) + br * (d + 2);
    rd += br * d + 2 * dbl(keys) * d;
  }
  const double h = dbl(p.heads()), Nq = dbl(p.Nq);
  return Cost{h * flops, e * h * rd, e * h * (Nq * d + Nq), 0};
}

// Recompute backward with tiles {Br, Bc}: D pass (reads O, dO; writes D: 2d FLOPs per row), dQ = 0
// (writes Nq d), then per KV block j: reads K_j, V_j, writes dK_j, dV_j; per visited tile (i, j) reads
// Q_i, dO_i, dQ_i, L_i, D_i and writes dQ_i. FLOPs per tile: scaling Q_i (br d), five GEMMs
// (10 br bc d), P = e^{S - L} (2 br bc), dS (2 br bc), dQ's scale and accumulation (2 br d).
inline Cost recompute_backward_cost(const Problem& p, Tiles t, double e = 4) {
  using detail::dbl;
  check_tiles(t);
  const int64_t Br = std::min(t.Br, p.Nq), Bc = std::min(t.Bc, p.Nk);
  const double Nq = dbl(p.Nq), Nk = dbl(p.Nk), d = dbl(p.d);
  double flops = 2 * Nq * d, rd = 2 * Nq * d + 2 * Nk * d, wr = Nq + Nq * d + 2 * Nk * d;
  for (int64_t c0 = 0; c0 < p.Nk; c0 += Bc) {
    const double bc = dbl(std::min(Bc, p.Nk - c0));
    const double rows = Nq - dbl(p.first_row(c0) / Br * Br);  // rows of the visited Q blocks
    flops += rows * d + 10 * rows * bc * d + 4 * rows * bc + 2 * rows * d;
    rd += 3 * rows * d + 2 * rows;
    wr += rows * d;
  }
  const double h = dbl(p.heads());
  return Cost{h * flops, e * h * rd, e * h * wr, 0};
}

}  // namespace ladder::attention
