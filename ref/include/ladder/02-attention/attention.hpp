// ladder/02-attention/attention.hpp -- stage 02: attention references, forward and backward.
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Sources: lecture notes §3.2-3.8 (Alg. 0, Fig. 7/8, tiling, recomputation, the HBM-access table);
// Dao et al., FlashAttention (2022), Alg. 1/4; Dao, FlashAttention-2 (2023), Alg. 1/2.
// The chapter is chapters/02-attention/README.md. Split by concept:
//   attention/problem.hpp    Problem {B, H, Nq, Nk, d, scale, causal; H_kv, d_v, window, seqlens}, the masks,
//                            Tiles, Traffic
//   attention/naive.hpp      naive_forward (Alg. 0: S, P materialised), naive_backward (from P)
//   attention/flash.hpp      flash_row / flash_forward (Fig. 8: one query row, one pass over keys)
//   attention/tiled.hpp      tiled_forward (Br x Bc tiles, Q-outer loop, deferred normalisation)
//   attention/recompute.hpp  recompute_backward (P rebuilt per tile from Q, K and L)
//   attention/cost.hpp       FLOPs and traffic formulas; the tiled rungs also count traffic
//
// Defined results (tested in tests/02-attention/):
//   * causal masks align bottom-right: query i attends key j iff j <= i + Nk - Nq;
//   * a fully masked row (causal with Nq > Nk: rows i < Nq - Nk) has O = 0, L = m = -inf, dQ = 0,
//     contributes nothing to dK, dV, and D = 0;
//   * masked keys get probability exactly 0;
//   * GQA / MQA (H_kv < H), d_v != d, sliding windows and per-sequence key lengths: the naive rung (the
//     oracle) only; every other rung refuses them with an error naming the constraint (check_problem).
// T = double is the oracle (naive_forward<double>, naive_backward<double>); T = float is the rung at
// kernel precision. OpenMP parallelises over heads and row blocks (the backward with recomputation over
// heads, see recompute.hpp); results do not depend on the thread count.
#pragma once
#include <functional>
#include <typeinfo>

#include "ladder/02-attention/cost.hpp"
#include "ladder/02-attention/flash.hpp"
#include "ladder/02-attention/naive.hpp"
#include "ladder/02-attention/problem.hpp"
#include "ladder/02-attention/recompute.hpp"
#include "ladder/02-attention/tiled.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention {

inline constexpr const char* kStage = "02-attention";

// ---- registry types -----------------------------------------------------------------------------

// A forward rung: Q, K, V -> O, L, m (m may be null). The tiled rung runs with default_tiles<T>(d).
template <class T>
using ForwardFn = std::function<void(const Problem&, const T* Q, const T* K, const T* V, T* O, T* L, T* m)>;
struct ForwardFns {
  ForwardFn<float> f32;
  ForwardFn<double> f64;
};

// A backward rung: Q, K, V, O, dO, L -> dQ, dK, dV, D.
template <class T>
using BackwardFn = std::function<void(const Problem&, const T* Q, const T* K, const T* V, const T* O, const T* dO,
                                      const T* L, T* dQ, T* dK, T* dV, T* D)>;
struct BackwardFns {
  BackwardFn<float> f32;
  BackwardFn<double> f64;
};

inline bool is_backward(const Rung& r) { return r.function.type() == typeid(BackwardFns); }

template <class T>
void tiled_forward_default(const Problem& p, const T* Q, const T* K, const T* V, T* O, T* L, T* m) {
  tiled_forward(p, Q, K, V, O, L, m, default_tiles<T>(p.d));
}
template <class T>
void recompute_backward_default(const Problem& p, const T* Q, const T* K, const T* V, const T* O, const T* dO,
                                const T* L, T* dQ, T* dK, T* dV, T* D) {
  recompute_backward(p, Q, K, V, O, dO, L, dQ, dK, dV, D, default_tiles<T>(p.d));
}

// ---- arrays in, arrays out ------------------------------------------------------------------------

template <class T>
struct Forward {
  Array<T> O, L, m;
};
template <class T>
struct Grads {
  Array<T> dQ, dK, dV, D;
};

// The Problem that Q [B,H,Nq,d], K [B,H_kv,Nk,d] and V [B,H_kv,Nk,d_v] describe (scale 0 selects
// 1/sqrt(d)); names the offending array on a mismatch. H_kv < H is GQA / MQA, d_v != d a value dim of its own
// (problem.hpp); only the naive rung computes those.
template <class T>
Problem problem_of(const Array<T>& Q, const Array<T>& K, const Array<T>& V, bool causal, double scale = 0) {
  require(Q.shape.size() == 4, "attention: Q.shape = {} violates rank 4 [B, H, Nq, d]", shape_str(Q.shape));
  require(K.shape.size() == 4, "attention: K.shape = {} violates rank 4 [B, H_kv, Nk, d]", shape_str(K.shape));
  require(V.shape.size() == 4, "attention: V.shape = {} violates rank 4 [B, H_kv, Nk, d_v]", shape_str(V.shape));
  require(K.shape[0] == Q.shape[0] && K.shape[3] == Q.shape[3],
          "attention: K.shape = {} violates K.shape == [B, H_kv, Nk, d] with B = {}, d = {} from Q", shape_str(K.shape),
          Q.shape[0], Q.shape[3]);
  require(K.shape[1] >= 1 && Q.shape[1] % K.shape[1] == 0,
          "attention: K.shape = {} violates H_q % H_kv == 0 (H_q = {} from Q, H_kv = {}: GQA / MQA groups)",
          shape_str(K.shape), Q.shape[1], K.shape[1]);
  require(V.shape[0] == K.shape[0] && V.shape[1] == K.shape[1] && V.shape[2] == K.shape[2],
          "attention: V.shape = {} violates V.shape == [B, H_kv, Nk, d_v] with B, H_kv, Nk = {}, {}, {} from K",
          shape_str(V.shape), K.shape[0], K.shape[1], K.shape[2]);
  Problem p = Problem::make(Q.shape[0], Q.shape[1], Q.shape[2], K.shape[2], Q.shape[3], causal);
  p.H_kv = K.shape[1];
  p.dv = V.shape[3];
  if (scale != 0) p.scale = scale;
  check_problem(p, "arrays", true);
  return p;
}

template <class T>
void require_shape(const Array<T>& a, const Shape& s, const char* name) {
  require(a.shape == s, "attention: {}.shape = {} violates {}.shape == {}", name, shape_str(a.shape), name,
          shape_str(s));
}

template <class T>
Forward<T> run_forward(const ForwardFn<T>& f, const Problem& p, const Array<T>& Q, const Array<T>& K,
                       const Array<T>& V) {
  require_shape(Q, {p.B, p.H, p.Nq, p.d}, "Q");
  require_shape(K, {p.B, p.kv_heads(), p.Nk, p.d}, "K");
  require_shape(V, {p.B, p.kv_heads(), p.Nk, p.dim_v()}, "V");
  Forward<T> r{Array<T>({p.B, p.H, p.Nq, p.dim_v()}), Array<T>({p.B, p.H, p.Nq}), Array<T>({p.B, p.H, p.Nq})};
  f(p, Q.data.data(), K.data.data(), V.data.data(), r.O.data.data(), r.L.data.data(), r.m.data.data());
  return r;
}

template <class T>
Grads<T> run_backward(const BackwardFn<T>& f, const Problem& p, const Array<T>& Q, const Array<T>& K, const Array<T>& V,
                      const Array<T>& O, const Array<T>& dO, const Array<T>& L) {
  require_shape(Q, {p.B, p.H, p.Nq, p.d}, "Q");
  require_shape(K, {p.B, p.kv_heads(), p.Nk, p.d}, "K");
  require_shape(V, {p.B, p.kv_heads(), p.Nk, p.dim_v()}, "V");
  require_shape(O, {p.B, p.H, p.Nq, p.dim_v()}, "O");
  require_shape(dO, O.shape, "dO");
  require_shape(L, {p.B, p.H, p.Nq}, "L");
  Grads<T> g{Array<T>(Q.shape), Array<T>(K.shape), Array<T>(V.shape), Array<T>({p.B, p.H, p.Nq})};
  f(p, Q.data.data(), K.data.data(), V.data.data(), O.data.data(), dO.data.data(), L.data.data(), g.dQ.data.data(),
    g.dK.data.data(), g.dV.data.data(), g.D.data.data());
  return g;
}

}  // namespace ladder::attention
