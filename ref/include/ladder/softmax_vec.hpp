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
//              across a block. Each lane takes its elements a block of kBlock at a time: the block's
//              maximum first, one rescale of d, then e^{x_j - m} per element, so the pass does the work
//              of safe's max and sum passes together (one exp per element and an eighth of a rescale
//              exp). The element-at-a-time form, with e^{-|x_j - m_{j-1}|} as the one exp, needed two
//              selects and a multiply more per element and measured 0.84x safe_vec with AVX-512.
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
constexpr int kBlock = 8;   // online_vec: packets per block, one rescale exp per block and chain
// online_vec's main loop step: kChains blocks of kBlock packets (a row shorter than this is all tail).
template <class T>
constexpr int64_t kOnlineStep = kWidth<T> * kChains * kBlock;

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

// y_i = e^{x_i - m} / d over the row (Alg. 2 lines 9-11 / Alg. 3 lines 6-8), as e^{x_i - m} * (1 / d):
// a vector division costs about as much as the packet exp with AVX-512 (one more rounding, within the
// tolerance rule; the scalar rungs keep the textbook / d). y may alias x.
template <class T>
void normalise(const T* x, T* y, int64_t V, T m, T d) {
  const Packet<T> pm = ei::pset1<Packet<T>>(m), pinv = ei::pset1<Packet<T>>(T(1) / d);
  for_packets(x, V, [&](const Packet<T>& xp, int64_t j, int64_t n) {
    const Packet<T> yp = ei::pmul(exp_shifted<T>(xp, pm), pinv);
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
  constexpr int64_t W = kWidth<T>, step = kOnlineStep<T>;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const P p_ninf = ei::pset1<P>(ninf), p_one = ei::pset1<P>(T(1)), p_zero = ei::pset1<P>(T(0));
  P m[kChains], d[kChains];
  for (int c = 0; c < kChains; ++c) m[c] = p_ninf, d[c] = p_zero;
  // One block of kBlock packets into one chain's lanes: the recurrence with the block's lane maximum
  // (notes Alg. 3 applied to the block as one step, the merge rule of §3.5 with the block's own state):
  //   m_new = max(m, max_u x_u),  d = d e^{m - m_new} + sum_u e^{x_u - m_new}.
  // One rescale exp per block, then one exp per element, as in safe's sum pass: per element the work
  // of safe's passes 1 and 2 together, in one pass over x. A lane that has seen only -inf keeps d = 0
  // (where m_new = -inf the factor would be e^{-inf + inf} = NaN, hence the select). Skipping the
  // rescale where no lane's maximum moved (a branch per block) measured slower, not faster.
  auto block = [&](P& mc, P& dc, const T* xb) {
    P xs[kBlock];
    P bm = xs[0] = ei::ploadu<P>(xb);
    for (int u = 1; u < kBlock; ++u) bm = ei::pmax(bm, xs[u] = ei::ploadu<P>(xb + u * W));
    const P m_new = ei::pmax(mc, bm);
    dc = ei::pmul(dc, ei::pselect(ei::pcmp_eq(m_new, p_ninf), p_one, exp_packet<T>(ei::psub(mc, m_new))));
    mc = m_new;
    for (int u = 0; u < kBlock; ++u) dc = ei::padd(dc, exp_shifted<T>(xs[u], mc));
  };
  int64_t j = 0;
  for (; j + step <= V; j += step)
    for (int c = 0; c < kChains; ++c) block(m[c], d[c], x + j + c * kBlock * W);
  // The tail (fewer than one step): whole blocks padded with -inf into chain 0, so every element still
  // goes through the packet code (a -inf adds exactly 0).
  if (j < V) {
    alignas(64) T pad[kBlock * W];
    for (; j < V; j += kBlock * W) {
      const int64_t n = std::min<int64_t>(kBlock * W, V - j);
      std::fill(pad, pad + kBlock * W, ninf);
      std::copy(x + j, x + j + n, pad);
      block(m[0], d[0], pad);
    }
  }
  // Merge every lane's state (notes §3.5) in one step, the merge rule over all lanes at once:
  // m = max_l m_l, d = sum_l d_l e^{m_l - m} (each lane's d rescaled once, so its rounding is not
  // compounded as it would be by a chain of pairwise merges).
  constexpr int64_t lanes = W * kChains;
  alignas(64) T ml[lanes], dl[lanes];
  for (int c = 0; c < kChains; ++c) {
    ei::pstoreu(ml + c * W, m[c]);
    ei::pstoreu(dl + c * W, d[c]);
  }
  T mm = ninf, dd = 0;
  for (int64_t l = 0; l < lanes; ++l) mm = std::max(mm, ml[l]);
  for (int64_t l = 0; l < lanes; ++l) merge_into(mm, dd, ml[l], dl[l]);
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
