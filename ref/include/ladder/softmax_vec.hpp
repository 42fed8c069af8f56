// ladder/softmax_vec.hpp -- stage 01, vectorised: safe and online softmax with SIMD lanes.
//
//   01 softmax     naive -> safe -> online  (+ safe_vec, online_vec: the same rungs, vectorised)  <== this file
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// The scalar rungs in softmax.hpp are the ones to read first; they are bound by one exp per element
// on one lane, so online's saved pass over memory does not show (Milakov & Gimelshein 2018, section 5:
// the gain appears once the kernel is memory bound). These two rungs run the same algorithms on every
// lane of the machine's vectors, with Eigen's packet exp (Eigen::internal::pexp, the polynomial Eigen
// uses for Array::exp) instead of a libm call per element:
//
//   safe_vec   notes Alg. 2 as three vectorised passes (max, sum of e^{x-m}, normalise).
//   online_vec notes Alg. 3 with one (m, d) state per lane: lane l runs the recurrence
//                m_j = max(m_{j-1}, x_j),  d_j = d_{j-1} e^{m_{j-1}-m_j} + e^{x_j-m_j}
//              over the elements j = l (mod lanes); at the end of the row the lane states are merged
//              by the notes' merge rule (section 3.5, "parallel online normalizer"):
//                m = max(m_a, m_b),  d = d_a e^{m_a-m} + d_b e^{m_b-m}
//              -- the same per-thread partials the CUDA v3 kernel (cuda/src/01_softmax.cu) reduces
//              across a block. One exp per element: e^{-|x_j - m_{j-1}|} is the rescale factor when
//              x_j is a new maximum and the new term otherwise (the other factor is e^0 = 1).
//
// float64 takes std::exp lane by lane (Eigen's double packet exp is not within the float64 floor), and
// the registry's online_vec float64 is the one-lane online_rows (see ref/src/softmax_registry.cpp).
// Same results contract as softmax.hpp (all -inf row -> zeros, -inf -> exactly 0, NaN propagates);
// same Cost as safe / online (the memory accesses are the algorithm's, not the lane count's). Each row
// is computed by the same code whatever the thread count; the float64 instantiations are judged by the
// tolerance rule like every candidate, never used as the oracle (that is safe_rows<double>).
#pragma once
#include "ladder/core/eigen.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ladder/softmax.hpp"

namespace ladder::softmax {

namespace vec {
namespace ei = Eigen::internal;
template <class T>
using Packet = typename ei::packet_traits<T>::type;
template <class T>
constexpr int64_t kWidth = ei::packet_traits<T>::size;
constexpr int kChains = 2;  // independent (m, d) packets per step, so two exp chains overlap

// The exponential of one packet: Eigen's packet exp for float. For double, std::exp lane by lane:
// Eigen's double packet exp is a few ulp off (5 ulp measured on the mixed_scales golden case), more than
// the float64 tolerance floor allows, and the float64 instantiation is not the one timed.
template <class T>
Packet<T> exp_packet(const Packet<T>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return ei::pexp(v);
  } else {
    alignas(64) T a[kWidth<T>];
    ei::pstoreu(a, v);
    for (int64_t l = 0; l < kWidth<T>; ++l) a[l] = std::exp(a[l]);
    return ei::ploadu<Packet<T>>(a);
  }
}

// e^{x - m} for one packet of x, exactly 0 where x = -inf (a packet exp clamps its argument and
// returns ~1e-39 there; a masked entry must get probability 0).
template <class T>
Packet<T> exp_shifted(const Packet<T>& x, const Packet<T>& m) {
  const Packet<T> ninf = ei::pset1<Packet<T>>(-std::numeric_limits<T>::infinity());
  return ei::pselect(ei::pcmp_eq(x, ninf), ei::pzero(x), exp_packet<T>(ei::psub(x, m)));
}

// Calls f(x packet, offset, count) over x[0, V) in whole packets from the row start, the last one
// padded with -inf: every element goes through the same packet code wherever the row lies in memory
// (an Eigen expression on a Map peels unaligned heads with scalar code, so bits would depend on the
// address of the output buffer).
template <class T, class F>
void for_packets(const T* x, int64_t V, F&& f) {
  constexpr int64_t W = kWidth<T>;
  int64_t j = 0;
  for (; j + W <= V; j += W) f(ei::ploadu<Packet<T>>(x + j), j, W);
  if (j < V) {
    alignas(64) T pad[W];
    std::fill(pad, pad + W, -std::numeric_limits<T>::infinity());
    std::copy(x + j, x + V, pad);
    f(ei::ploadu<Packet<T>>(pad), j, V - j);
  }
}

// y_i = e^{x_i - m} / d over the row (Alg. 2 lines 9-11 / Alg. 3 lines 6-8). y may alias x.
template <class T>
void normalise(const T* x, T* y, int64_t V, T m, T d) {
  const Packet<T> pm = ei::pset1<Packet<T>>(m), pd = ei::pset1<Packet<T>>(d);
  for_packets(x, V, [&](const Packet<T>& xp, int64_t j, int64_t n) {
    const Packet<T> yp = ei::pdiv(exp_shifted<T>(xp, pm), pd);
    if (n == kWidth<T>) {
      ei::pstoreu(y + j, yp);
    } else {
      alignas(64) T out[kWidth<T>];
      ei::pstoreu(out, yp);
      std::copy(out, out + n, y + j);
    }
  });
}

// One lane's state (m_b, d_b) added to d at the final maximum m >= m_b: d += d_b e^{m_b - m}. A lane
// that saw only -inf (m_b = -inf, d_b = 0, or NaN after a NaN) adds d_b itself.
template <class T>
void merge_into(T m, T& d, T m_b, T d_b) {
  d += m_b == -std::numeric_limits<T>::infinity() ? d_b : d_b * std::exp(m_b - m);
}
}  // namespace vec

template <class T>
void online_vec_row(const T* x, T* y, int64_t V) {
  using namespace vec;
  using P = Packet<T>;
  constexpr int64_t W = kWidth<T>, step = W * kChains;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const P p_ninf = ei::pset1<P>(ninf), p_one = ei::pset1<P>(T(1)), p_zero = ei::pset1<P>(T(0));
  P m[kChains], d[kChains];
  for (int c = 0; c < kChains; ++c) m[c] = p_ninf, d[c] = p_zero;
  int64_t j = 0;
  for (; j + step <= V; j += step) {
    for (int c = 0; c < kChains; ++c) {
      const P xj = ei::ploadu<P>(x + j + c * W);
      // t = e^{-|x_j - m_{j-1}|}: the one exp of the step. A -inf entry adds 0 (where m is also -inf,
      // x_j - m would be NaN, hence the select).
      P t = exp_packet<T>(ei::pnegate(ei::pabs(ei::psub(xj, m[c]))));
      t = ei::pselect(ei::pcmp_eq(xj, p_ninf), p_zero, t);
      const P is_new_max = ei::pcmp_lt(m[c], xj);
      // new maximum: d_j = d_{j-1} e^{m_{j-1} - x_j} + 1;  otherwise: d_j = d_{j-1} + e^{x_j - m_{j-1}}
      d[c] = ei::pselect(is_new_max, ei::padd(ei::pmul(d[c], t), p_one), ei::padd(d[c], t));
      m[c] = ei::pselect(is_new_max, xj, m[c]);
    }
  }
  // Merge every lane's state (notes §3.5) in one step, the merge rule over all lanes at once:
  // m = max_l m_l, d = sum_l d_l e^{m_l - m} (each lane's d rescaled once, so its rounding is not
  // compounded as it would be by a chain of pairwise merges), then the tail one by one (Alg. 3).
  alignas(64) T ml[step], dl[step];
  for (int c = 0; c < kChains; ++c) {
    ei::pstoreu(ml + c * W, m[c]);
    ei::pstoreu(dl + c * W, d[c]);
  }
  T mm = ninf, dd = 0;
  for (int64_t l = 0; l < step; ++l) mm = std::max(mm, ml[l]);
  for (int64_t l = 0; l < step; ++l) merge_into(mm, dd, ml[l], dl[l]);
  for (; j < V; ++j) {
    if (x[j] > mm) {
      dd = dd * std::exp(mm - x[j]) + T(1);
      mm = x[j];
    } else if (x[j] != ninf) {
      dd += std::exp(x[j] - mm);
    }
  }
  if (mm == ninf) {  // all -inf: defined as zeros (softmax.hpp)
    std::fill(y, y + V, T(0));
    return;
  }
  normalise(x, y, V, mm, dd);
}

template <class T>
void safe_vec_row(const T* x, T* y, int64_t V) {
  using namespace vec;
  using P = Packet<T>;
  P mp = ei::pset1<P>(-std::numeric_limits<T>::infinity()), dp = ei::pset1<P>(T(0));
  // Alg. 2 lines 1-4, lane-wise. A NaN in x makes the row NaN through d below (e^{NaN - m}), as in
  // safe_row, whether or not the max keeps it.
  for_packets(x, V, [&](const P& xp, int64_t, int64_t) { mp = ei::pmax(mp, xp); });
  const T m = ei::predux_max(mp);
  if (m == -std::numeric_limits<T>::infinity()) {
    std::fill(y, y + V, T(0));
    return;
  }
  const P pm = ei::pset1<P>(m);
  for_packets(x, V, [&](const P& xp, int64_t, int64_t) { dp = ei::padd(dp, exp_shifted<T>(xp, pm)); });  // lines 5-8
  normalise(x, y, V, m, ei::predux(dp));  // Alg. 2 lines 9-11
}

template <class T>
void online_vec_rows(const T* x, T* y, int64_t rows, int64_t cols) { for_each_row(&online_vec_row<T>, x, y, rows, cols); }
template <class T>
void safe_vec_rows(const T* x, T* y, int64_t rows, int64_t cols) { for_each_row(&safe_vec_row<T>, x, y, rows, cols); }

}  // namespace ladder::softmax
