// ladder/01-softmax/softmax_vec.hpp -- stage 01, vectorised: safe and online softmax with SIMD lanes.
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
//              -- the same per-thread partials the CUDA v3 kernel (cuda/src/01-softmax/softmax.cu) reduces
//              across a block (a long row in runs: see online_state). Each lane takes its elements a block of kBlock at a time: the block's
//              maximum first, one rescale of d, then e^{x_j - m} per element, so the pass does the work
//              of safe's max and sum passes together (one exp per element and an eighth of a rescale
//              exp). The element-at-a-time form, with e^{-|x_j - m_{j-1}|} as the one exp, needed two
//              selects and a multiply more per element and measured 0.84x safe_vec with AVX-512.
//
// float64 takes std::exp lane by lane (Eigen's double packet exp is not within the float64 floor), and
// the registry's online_vec float64 is the one-lane online_rows (see ref/src/01-softmax/registry.cpp).
// Same results contract as softmax.hpp (all -inf row -> zeros, -inf -> exactly 0, a NaN or +inf anywhere
// -> the row NaN; the same one check per row on m and d, see online_vec_row and safe_vec_row below);
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
#if defined(__SSE2__)
#include <immintrin.h>  // streaming stores, _mm_sfence
#endif

#include "ladder/01-softmax/softmax.hpp"

namespace ladder::softmax {

namespace vec {
namespace ei = Eigen::internal;
template <class T>
using Packet = typename ei::packet_traits<T>::type;
template <class T>
constexpr int64_t kWidth = ei::packet_traits<T>::size;
constexpr int kChains = 2;  // independent (m, d) packets per step, so two exp chains overlap
constexpr int kBlock = 8;   // online_vec: packets per block, one rescale exp per block and chain
constexpr int kSuperRun = 16;  // online_vec: steps per run of the chains' states (see online_state)
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

// How the last pass writes y, the same for both rungs; neither changes a bit of the result.
// * Prefetch: while it computes this row, the pass asks for the next row's lines (where the rows
//   function passes it: rows of at most kPrefetchRowBytes), so the next row's reads from memory overlap
//   this row's exps instead of stalling its first pass.
// * Streaming stores: when the whole output is at least kStreamBytes, full packets of y go out with
//   non-temporal stores (x86: _mm*_stream_ps/pd), which skip the read of each line that an ordinary
//   store of a line not in the cache costs (read for ownership), and do not evict x. Only where y is
//   packet-aligned (the row's first elements up to that point go through one padded packet); a smaller
//   output stays in the cache for whoever reads it next.
// At 64M floats in rows of 4096 (AVX-512 Xeon, 2 threads, make bench) the two together took safe_vec
// from 40.5 to 30.5 ms and online_vec from 42.8 to 32.1 ms; either alone gained 3-7 % (side by side).
constexpr int64_t kStreamBytes = int64_t{32} << 20;
constexpr int64_t kPrefetchRowBytes = int64_t{256} << 10;

// Whether this build has a streaming store for T's packet (x86: 16, 32, 64 bytes with SSE2, AVX, AVX-512;
// told apart by size, since the vector types themselves make poor template arguments).
template <class T>
constexpr bool kCanStream =
#if defined(__SSE2__)
    sizeof(Packet<T>) == 16
#if defined(__AVX__)
    || sizeof(Packet<T>) == 32
#endif
#if defined(__AVX512F__)
    || sizeof(Packet<T>) == 64
#endif
#else
    false
#endif
    ;

// A non-temporal store of one packet to a packet-aligned p (only called where kCanStream<T>).
template <class T>
void stream_packet(T* p, const Packet<T>& v) {
  static_assert(kCanStream<T> && (std::is_same_v<T, float> || std::is_same_v<T, double>),
                "stream_packet: no streaming store for this packet type");
  constexpr bool f = std::is_same_v<T, float>;
  constexpr size_t bytes = sizeof(Packet<T>);
#if defined(__SSE2__)
  if constexpr (bytes == 16 && f) _mm_stream_ps(p, v);
  if constexpr (bytes == 16 && !f) _mm_stream_pd(p, v);
#endif
#if defined(__AVX__)
  if constexpr (bytes == 32 && f) _mm256_stream_ps(p, v);
  if constexpr (bytes == 32 && !f) _mm256_stream_pd(p, v);
#endif
#if defined(__AVX512F__)
  if constexpr (bytes == 64 && f) _mm512_stream_ps(p, v);
  if constexpr (bytes == 64 && !f) _mm512_stream_pd(p, v);
#endif
}

// y_i = e^{x_i - m} / d over the row (Alg. 2 lines 9-11 / Alg. 3 lines 6-8), as e^{x_i - m} * (1 / d):
// a vector division costs about as much as the packet exp with AVX-512 (one more rounding, within the
// tolerance rule; the scalar rungs keep the textbook / d). y may alias x. next: the next row's x to
// prefetch, or null; stream: write y with streaming stores (see above).
template <class T>
void normalise(const T* x, T* y, int64_t V, T m, T d, const T* next = nullptr, bool stream = false) {
  using P = Packet<T>;
  constexpr int64_t W = kWidth<T>, line = 64 / static_cast<int64_t>(sizeof(T));
  const P pm = ei::pset1<P>(m), pinv = ei::pset1<P>(T(1) / d);
  auto value = [&](const P& xp) { return ei::pmul(exp_shifted<T>(xp, pm), pinv); };
  // y[a, b), fewer than W elements, through one packet padded with -inf: the same packet code as the
  // whole packets (each lane's result depends on its own element only, so bits do not depend on where a
  // packet starts).
  auto partial = [&](int64_t a, int64_t b) {
    if (a >= b) return;
    alignas(64) T buf[W];
    std::fill(buf, buf + W, -std::numeric_limits<T>::infinity());
    std::copy(x + a, x + b, buf);
    ei::pstoreu(buf, value(ei::ploadu<P>(buf)));
    std::copy(buf, buf + (b - a), y + a);
  };
  int64_t j = 0;
  bool streamed = false;
  if constexpr (kCanStream<T>) {  // streaming stores need packet-aligned y: whole packets start there
    const auto addr = reinterpret_cast<uintptr_t>(y);
    streamed = stream && addr % sizeof(T) == 0;
    if (streamed) {
      j = std::min<int64_t>(V, (W - static_cast<int64_t>(addr / sizeof(T)) % W) % W);
      partial(0, j);
    }
  }
  for (; j + W <= V; j += W) {
    if (next && j % line < W) __builtin_prefetch(next + (j - j % line));  // about one per 64-byte line
    const P yp = value(ei::ploadu<P>(x + j));
    if constexpr (kCanStream<T>) {
      if (streamed) {
        stream_packet<T>(y + j, yp);
        continue;
      }
    }
    ei::pstoreu(y + j, yp);
  }
  partial(j, V);
#if defined(__SSE2__)
  if (streamed) _mm_sfence();  // streaming stores are weakly ordered: make them visible before returning
#endif
}

// One lane's state (m_b, d_b) added to d at the final maximum m >= m_b: d += d_b e^{m_b - m}. A lane
// that saw only -inf (m_b = -inf, d_b = 0, or NaN after a NaN) adds d_b itself.
template <class T>
void merge_into(T m, T& d, T m_b, T d_b) {
  d += m_b == -std::numeric_limits<T>::infinity() ? d_b : d_b * std::exp(m_b - m);
}

// The passes of the two rungs, each over one row x[0, V); a rung is its passes in order (below), and
// bench/01-softmax/bench.cpp times each pass alone on rows held in the cache.

// online_vec's one pass over x (notes Alg. 3 lines 1-5, per lane, then the lanes merged): returns the
// row's (m, d) in m_out, d_out; m_out = -inf for a row of -inf only.
template <class T>
void online_state(const T* x, int64_t V, T& m_out, T& d_out) {
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
  // Every kSuperRun steps the chains' states are merged into an outer state (mo, dop) and start afresh:
  // a lane's d is then a sum over at most kSuperRun blocks, not over the whole row (softmax.hpp's
  // row_sum: one run per lane over a 2^20 row is off by 3e-5). The merge is the rule of section 3.5,
  // lane-wise; where both maxima are -inf the factor is 1 (e^{-inf + inf} would be NaN), so a lane that
  // saw only -inf keeps d = 0, or NaN if it saw a NaN.
  P mo = p_ninf, dop = p_zero;
  auto fold = [&](P& mc, P& dc) {
    const P mn = ei::pmax(mo, mc);
    const P none = ei::pcmp_eq(mn, p_ninf);
    const P fo = ei::pselect(none, p_one, exp_packet<T>(ei::psub(mo, mn)));
    const P fc = ei::pselect(none, p_one, exp_packet<T>(ei::psub(mc, mn)));
    dop = ei::padd(ei::pmul(dop, fo), ei::pmul(dc, fc));
    mo = mn;
    mc = p_ninf, dc = p_zero;
  };
  int64_t j = 0, steps = 0;
  for (; j + step <= V; j += step) {
    for (int c = 0; c < kChains; ++c) block(m[c], d[c], x + j + c * kBlock * W);
    if (++steps == kSuperRun) {
      for (int c = 0; c < kChains; ++c) fold(m[c], d[c]);
      steps = 0;
    }
  }
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
  // The chains folded into the outer state, then every lane's state merged (notes §3.5) in one step,
  // the merge rule over all lanes at once: m = max_l m_l, d = sum_l d_l e^{m_l - m}.
  for (int c = 0; c < kChains; ++c) fold(m[c], d[c]);
  constexpr int64_t lanes = W;
  alignas(64) T ml[lanes], dl[lanes];
  ei::pstoreu(ml, mo);
  ei::pstoreu(dl, dop);
  T mm = ninf, dd = 0;
  for (int64_t l = 0; l < lanes; ++l) mm = std::max(mm, ml[l]);
  for (int64_t l = 0; l < lanes; ++l) merge_into(mm, dd, ml[l], dl[l]);
  m_out = mm, d_out = dd;
}

// safe_vec's pass 1 (Alg. 2 lines 1-4, lane-wise): max_j x_j.
template <class T>
T max_pass(const T* x, int64_t V) {
  using P = Packet<T>;
  P mp = ei::pset1<P>(-std::numeric_limits<T>::infinity());
  for_packets(x, V, [&](const P& xp, int64_t, int64_t) { mp = ei::pmax(mp, xp); });
  return ei::predux_max(mp);
}

// safe_vec's pass 2 (Alg. 2 lines 5-8, lane-wise): sum_j e^{x_j - m}.
// Each lane sums runs of kSumRun packets and adds each run's total to an outer sum (softmax.hpp's
// row_sum says why: a lane summing 2^16 terms of a 2^20 row in one run is off by 7e-5; in runs of 64,
// under 1e-6). The run's total is one padd per run, nothing per element.
constexpr int64_t kSumRun = 64;
template <class T>
T exp_sum_pass(const T* x, int64_t V, T m) {
  using P = Packet<T>;
  const P pm = ei::pset1<P>(m);
  P dp = ei::pset1<P>(T(0)), total = dp;
  int64_t n = 0;
  for_packets(x, V, [&](const P& xp, int64_t, int64_t) {
    dp = ei::padd(dp, exp_shifted<T>(xp, pm));
    if (++n == kSumRun) total = ei::padd(total, dp), dp = ei::pset1<P>(T(0)), n = 0;
  });
  return ei::predux(ei::padd(total, dp));
}
}  // namespace vec

// next, stream: how the last pass writes y (normalise); the defaults write it like any other store.
template <class T>
void online_vec_row(const T* x, T* y, int64_t V, const T* next = nullptr, bool stream = false) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  T m, d;
  vec::online_state(x, V, m, d);  // pass 1: (m, d)
  // The special rows (softmax.hpp's header), from (m, d) alone: a NaN reaches some lane's d as
  // e^{NaN - m} (or through a NaN maximum), and the lane merge keeps it, so d = NaN marks a row with a
  // NaN; m = -inf, a row of -inf (d = 0) or -inf and NaN; m = +inf, a row with a +inf.
  if (m == -inf) {  // all -inf: zeros, or NaN if a NaN was among them
    std::fill(y, y + V, std::isnan(d) ? std::numeric_limits<T>::quiet_NaN() : T(0));
    return;
  }
  if (m == inf) d = std::numeric_limits<T>::quiet_NaN();  // +inf in the row: the row is NaN
  vec::normalise(x, y, V, m, d, next, stream);  // pass 2
}

template <class T>
void safe_vec_row(const T* x, T* y, int64_t V, const T* next = nullptr, bool stream = false) {
  // A NaN in x makes the row NaN through d below (e^{NaN - m}), as in safe_row, whether or not the max
  // keeps it; so does a +inf (m = +inf, e^{inf - inf} = NaN).
  const T m = vec::max_pass(x, V);  // pass 1
  if (m == -std::numeric_limits<T>::infinity()) {  // all -inf: zeros, or NaN if a NaN is there (pmax may skip it)
    const bool nan = std::any_of(x, x + V, [](T v) { return std::isnan(v); });
    std::fill(y, y + V, nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
    return;
  }
  vec::normalise(x, y, V, m, vec::exp_sum_pass(x, V, m), next, stream);  // passes 2 and 3 (Alg. 2 lines 9-11)
}

namespace vec {
// for_each_row (softmax.hpp) for the vectorised rungs: the same rows on the same threads, and each row
// is told the next one (to prefetch, where rows are short) and whether the output is large enough to
// stream.
template <class T>
void rows_vec(void (*row)(const T*, T*, int64_t, const T*, bool), const T* x, T* y, int64_t rows, int64_t cols) {
  check_rows(x, y, rows, cols);
  const bool prefetch = cols * static_cast<int64_t>(sizeof(T)) <= kPrefetchRowBytes;
  const bool stream = rows * cols * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
#pragma omp parallel for schedule(static) if (rows * cols > 32768)
  for (int64_t r = 0; r < rows; ++r)
    row(x + r * cols, y + r * cols, cols, prefetch && r + 1 < rows ? x + (r + 1) * cols : nullptr, stream);
}
}  // namespace vec

template <class T>
void online_vec_rows(const T* x, T* y, int64_t rows, int64_t cols) { vec::rows_vec(&online_vec_row<T>, x, y, rows, cols); }
template <class T>
void safe_vec_rows(const T* x, T* y, int64_t rows, int64_t cols) { vec::rows_vec(&safe_vec_row<T>, x, y, rows, cols); }

}  // namespace ladder::softmax
