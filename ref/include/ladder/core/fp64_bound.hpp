// ladder/core/fp64_bound.hpp -- the allowance a float64 candidate is judged by: derived, not scaled.
//
// A float64 candidate c and the float64 oracle o both approximate the exact result x of the same
// float32 inputs, so
//     |c - o| <= |c - x| + |o - x| <= E_cand + E_oracle,
// each E a forward error bound of float64 arithmetic in the standard model (Higham, "Accuracy and
// Stability of Numerical Algorithms", 2nd ed., SIAM 2002, section 2.2): every +, -, *, /, sqrt rounds
// with relative error at most u = 2^-53, and
//   * a sum of n terms in ANY order (sequential, pairwise, blocked, split over threads) is within
//     gamma_{n-1} sum_i |t_i| of the exact sum, gamma_n = n u / (1 - n u)  (Higham (4.4), section 4.2);
//     a dot product of n terms within gamma_n sum_i |a_i b_i| (Higham (3.5));
//   * exp, log, sin, cos and pow are within 2 ulp, a relative 2 * 2^-52 = 4u: the oracle's ladder::math
//     (core/math.hpp, tested within 2 ulp by tests/test_math.cpp); glibc's double exp / log and CUDA's
//     double exp / log / sin / cos are documented within 1 ulp, so 2 ulp bounds a candidate's too;
//   * an error already in an operand propagates (the rules of Ev below): for exp and log exactly as
//     e^{t + dt} - e^t <= e^t (e^{|dt|} - 1) and |log(a + da) - log a| <= -log(1 - |da| / a); for *, /
//     and sums to every order, with the products of two errors kept.
// The bound is computed per element from the magnitudes of that element's terms: Ev carries a value
// and its error bound through the stage's computation, the sums taking sum|t_i| of the terms as they
// are (computed in float64 with the absolute values). That "any order" is what lets one bound cover
// every rung of a stage: the rungs differ in the order of their sums. What they do differently beyond
// order is counted where a stage derives its bound: the online / flash rescales (rescale_rel below),
// reassociated products (03's absorbed rungs: W_UK^T q^C before the dot with c^KV), D = rowsum(dO o O)
// against P . dP (02's backward).
// The oracle is plain float64 everywhere in stages 01-04 (no extended precision, no compensated sums):
// its own term E_oracle is the same kind of bound for the oracle's own algorithm (its sums sequential,
// no rescales, one division), which is smaller than a candidate's only by what a candidate may do that
// the oracle does not. Bounds are first order in the data's magnitudes but keep products of errors; a
// float64 bound ~ (number of terms) x 1e-16 x the terms' magnitudes, far below float32's unit roundoff 6e-8.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ladder/core/error.hpp"
#include "ladder/core/math.hpp"

namespace ladder::fp64 {

inline constexpr double u = 0x1p-53;             // unit roundoff of float64
inline constexpr double kFuncRel = 4 * u;         // exp, log, sin, cos, pow: within 2 ulp
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// gamma_n = n u / (1 - n u) (Higham (3.8)); infinite where n u >= 1 (no bound).
inline double gamma(double n) { return n * u < 1 ? n * u / (1 - n * u) : kInf; }

// A float64 value and a bound on its error against the exact value of the same expression.
struct Ev {
  double v = 0, e = 0;
};

// One rounding of a result v: u |v|, plus eta = 2^-1074 for underflow (Higham (2.8): 2^-1075, rounded up to a representable number).
inline constexpr double kEta = 0x1p-1074;
inline Ev rounded(double v, double e) { return {v, e + u * std::abs(v) + kEta}; }
inline Ev add(Ev a, Ev b) { return rounded(a.v + b.v, a.e + b.e); }
inline Ev sub(Ev a, Ev b) { return rounded(a.v - b.v, a.e + b.e); }
inline Ev mul(Ev a, Ev b) {
  return rounded(a.v * b.v, std::abs(a.v) * b.e + a.e * std::abs(b.v) + a.e * b.e);
}
// a / b with `rel` the rounding of the quotient: u for one division, 2u for a reciprocal then a product
// (what kernels do: one reciprocal per row). No bound (inf) where b's error reaches |b|.
inline Ev div(Ev a, Ev b, double rel = u) {
  const double q = a.v / b.v, den = std::abs(b.v) - b.e;
  if (!(den > 0)) return {q, kInf};
  return {q, (a.e + std::abs(q) * b.e) / den + rel * std::abs(q) + 2 * kEta};
}
inline Ev exp(Ev a) {
  const double v = math::exp(a.v);
  return {v, v * std::expm1(a.e) + kFuncRel * v * std::exp(a.e) + kEta};
}
inline Ev log(Ev a) {
  const double v = math::log(a.v);
  if (!(a.e < a.v)) return {v, kInf};
  return {v, -std::log1p(-a.e / a.v) + kFuncRel * std::abs(v)};
}

// sqrt a (correctly rounded): |sqrt(a + da) - sqrt a| <= |da| / (sqrt(a - |da|) + sqrt a).
inline Ev sqrt(Ev a) {
  const double v = std::sqrt(a.v);
  if (!(a.e < a.v)) return {v, kInf};
  return rounded(v, a.e / (std::sqrt(a.v - a.e) + v));
}

// A sum of terms in any order: Higham (4.4), sum_i e_i + gamma_{n-1} sum_i |t_i|.
struct Sum {
  double v = 0, e = 0, mag = 0;
  int64_t n = 0;
  void add(Ev t) { v += t.v, e += t.e, mag += std::abs(t.v), ++n; }
  Ev done() const { return {v, e + gamma(static_cast<double>(std::max<int64_t>(n - 1, 0))) * mag}; }
};

// The allowance of a float64 dot product sum_k a_k b_k of float32 values (plus a float32 addend c, when given):
// a product of two float32 values is exact in float64 (24 + 24 significand bits), so the only errors are the
// sum's roundings, gamma_{n-1} sum |terms| for the oracle's order and as much for a candidate's (any order, FMA
// or not): twice that, plus underflow's eta. Terms sa apart in a and sb apart in b (1: a row; the row length: a column).
inline double dot_f32_allowance(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n,
                                const float* c = nullptr) {
  Sum s;
  if (c) s.add({static_cast<double>(*c), 0});
  for (int64_t k = 0; k < n; ++k) s.add({static_cast<double>(a[k * sa]) * static_cast<double>(b[k * sb]), 0});
  return 2 * s.done().e + 2 * kEta;
}

// The relative error a term picks up from r rescales by e^{m_old - m_new} (online softmax, FlashAttention):
// each a product (u) by an exp within 2 ulp, whose arguments round by at most u |m_old - m_new| each and
// add up to u * span, span = how far the running maximum climbed (max - min of the row's finite entries).
// r = n - 1 is the worst order (an increasing row rescales at every step); the oracle's safe softmax: 0.
inline double rescale_rel(double r, double span) { return r * (u + kFuncRel) + u * span; }

}  // namespace ladder::fp64
