// ladder/07-precision/attn_bound.hpp -- the fp64 oracle of one attention row and the bound on a low-precision
// candidate's error, derived from the recipe: rungs (e) (MLA decode over a quantised KV cache, kv_quant.hpp) and
// (f) (bf16 tiled attention with float32 accumulation, attn_bf16.hpp) both call attend_row_bound.
//
// One query row q [n] against L keys k_j [n] and values v_j [dv]: the exact (float64) answer is
//   s_j = sigma q.k_j,  a_j = e^{s_j - lse},  lse = log sum_j e^{s_j},  o_r = sum_j a_j v_jr.
// The candidate reads q' = q + dq, k'_j = k_j + dk_j, v'_j = v_j + dv_j (the recipe's rounding of its inputs:
// bf16 RNE, the cache's int8 / E4M3 codes times their scales). Its per-element errors are KNOWN: the recipe's
// rounding is deterministic (RNE, amax scale rule), so eq, ek, ev below are |Q(x) - x| computed exactly from
// the declared format and scale (never above the format's unit roundoff times |x|, plus half its smallest
// quantum times the scale: the callers check that), plus u |Q(x)| where the candidate forms Q(x) in float32.
// u = 2^-24 (float32), gamma_m = m u / (1 - m u) (Higham, Accuracy and Stability, §3.1).
//
// 1. Scores. |s'_j - s_j| <= D_j = sigma sum_d (|q_d| ek_jd + eq_d |k_jd| + eq_d ek_jd)       (the inputs)
//                              + gamma_{n+1} sigma sum_d |q'_d| |k'_jd|                      (float32 dot, scale)
//                              + gamma_{n+1}(2^-53) sigma sum_d |q_d| |k_jd|                 (the oracle's own)
// 2. Weights. The candidate's unnormalised weight is p_j = e^{s'_j - M}(1 + eta_j): its exps (one per term and
//    one per online-softmax rescale, T tiles -> at most T + 1 exps of relative error eps_exp = 2^-22, i.e.
//    2 ulp: CUDA's documented expf bound, glibc's is 1 ulp), T float32 rescale products (u each) and the
//    float32 subtractions s'_j - m inside the exps (the max increments telescope: total argument error
//    <= 2 u R, R = the range of s'), so |eta_j| <= eta = e^{2uR} (1 + eps_exp)^{T+1} (1 + u)^T - 1.
//    With a'_j = p_j / sum_k p_k and a'_j / a_j = e^{d_j} (1 + eta_j) / sum_k a_k e^{d_k} (1 + eta_k),
//    |d_j| <= D_j, D = max_k D_k:     |a'_j - a_j| <= kappa_j a_j,  kappa_j = e^{D_j + D} (1 + eta) / (1 - eta) - 1.
// 3. Output. o'_r = fl(N_r / l): N_r = sum_j p_j (1 + theta_j) v'_jr (1 + phi_jr), theta_j = P's rounding before
//    P V (bf16 RNE: |theta| <= u_p = 2^-8; none: 0), phi = the float32 sum of L products over T tiles (at most
//    L - 1 + T additions and T rescale products per term: |phi| <= gamma_{L+2T+1}; gamma_{L+2T} where the
//    products are exact, bf16 x bf16), l = sum_j p_j (1 + lambda), |lambda| <= gamma_{L+2T}, one division (u).
//    So with beta = (1 + u_p)(1 + gamma_acc)(1 + u) / (1 - gamma_l) - 1:
//      |o'_r - o_r| <= sum_j a_j { [(1 + kappa_j)(1 + beta) - 1] (|v_jr| + ev_jr) + ev_jr }
//                      + 2^-125 sum_j (|v_jr| + ev_jr)        (each p below 2^-126 may flush to 0 or round
//                                                              absolutely: l >= 1 - eta, the max term's own)
//                      + gamma_{2L+16}(2^-53)(1 + |lse|) sum_j a_j |v_jr|  (the oracle's softmax and sum in
//                                                              float64, core/math.hpp's 2-ulp exp and log).
// 4. lse' = fl(m + fl(log l)): log sum_j e^{s'_j}(1 + eta_j) is within D + log(1 + eta) of lse; l's sum adds
//    -log(1 - gamma_l), the log (2 ulp) eps_exp (log L + 1), the final addition u (|lse| + D + 1), the oracle
//    gamma_{L+16}(2^-53)(|lse| + 1).
// Every bound is evaluated in float64 and widened by (1 + 2^-30) for that evaluation. Any order of the sums,
// any tiling (T counts the tiles the recipe declares; a finer one has a larger T in its own recipe, a coarser
// one a smaller bound), any placement of the max gives a result inside it. It is a worst case: the quantisation
// errors are added with their absolute values (the measured error is smaller by the square root of the
// number of terms and more, `ladder reproduce 07-precision` prints the ratio).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"  // gamma_n
#include "ladder/core/math.hpp"          // the oracle's exp and log: the same bits on every CPU

namespace ladder::precision {

inline constexpr double kEpsExp = 0x1p-22;  // the candidate's expf / logf: 2 ulp relative (CUDA's documented bound)

// How the candidate computes the row (the recipe's part that is not its input rounding).
struct RowRecipe {
  int64_t tiles = 1;           // T: online-softmax tiles (1: a two-pass safe softmax)
  double u_p = 0;              // P rounded before P V: 2^-8 (bf16 RNE), 0: kept in float32
  bool exact_products = false; // the P V products are exact in float32 (bf16 x bf16)
};

// One row: q [n] (eq), K rows k_j = K + j ldk [n] (eK alike), V rows v_j = V + j ldv [dv] (eV alike), L keys.
struct RowOracle {
  std::vector<double> o, bound;  // [dv]
  double lse = 0, lse_bound = 0;
};

inline RowOracle attend_row_bound(const double* q, const double* eq, int64_t n, const double* K, const double* eK,
                                  int64_t ldk, const double* V, const double* eV, int64_t ldv, int64_t dv, int64_t L,
                                  double sigma, const RowRecipe& rr) {
  require(L >= 1 && n >= 1 && dv >= 1 && rr.tiles >= 1, "attend_row_bound: L = {}, n = {}, dv = {}, tiles = {} "
          "violate >= 1", L, n, dv, rr.tiles);
  const double u = 0x1p-24, u64 = 0x1p-53;
  std::vector<double> s(static_cast<size_t>(L)), D(s.size()), a(s.size());
  const double gn = gamma_n(static_cast<double>(n + 1), u), gn64 = gamma_n(static_cast<double>(n + 1), u64);
  for (int64_t j = 0; j < L; ++j) {
    const double *k = K + j * ldk, *ek = eK + j * ldk;
    double dot = 0, in = 0, abs32 = 0, abs64 = 0;
    for (int64_t d = 0; d < n; ++d) {
      dot += q[d] * k[d];
      in += std::fabs(q[d]) * ek[d] + eq[d] * std::fabs(k[d]) + eq[d] * ek[d];
      abs32 += (std::fabs(q[d]) + eq[d]) * (std::fabs(k[d]) + ek[d]);
      abs64 += std::fabs(q[d] * k[d]);
    }
    s[static_cast<size_t>(j)] = sigma * dot;
    D[static_cast<size_t>(j)] = sigma * (in + gn * abs32 + gn64 * abs64);
  }
  const double smax = *std::max_element(s.begin(), s.end()), smin = *std::min_element(s.begin(), s.end());
  const double Dmax = *std::max_element(D.begin(), D.end());
  double l = 0;
  for (int64_t j = 0; j < L; ++j) l += math::exp(s[static_cast<size_t>(j)] - smax);
  RowOracle r;
  r.lse = smax + math::log(l);
  for (int64_t j = 0; j < L; ++j) a[static_cast<size_t>(j)] = math::exp(s[static_cast<size_t>(j)] - r.lse);
  const double T = static_cast<double>(rr.tiles), Ld = static_cast<double>(L);
  const double range = smax - smin + 2 * Dmax;
  const double eta = std::exp(2 * u * range) * std::pow(1 + kEpsExp, T + 1) * std::pow(1 + u, T) - 1;
  require(eta < 0.5, "attend_row_bound: eta = {} violates eta < 1/2 (a score range of {} beyond float32)", eta, range);
  const double gl = gamma_n(Ld + 2 * T, u), gacc = gamma_n(Ld + 2 * T + (rr.exact_products ? 0 : 1), u);
  const double beta = (1 + rr.u_p) * (1 + gacc) * (1 + u) / (1 - gl) - 1;
  const double g64 = gamma_n(2 * Ld + 16, u64) * (1 + std::fabs(r.lse));  // exp, log: 2 ulp (core/math.hpp)
  r.o.assign(static_cast<size_t>(dv), 0.0);
  r.bound.assign(static_cast<size_t>(dv), 0.0);
  for (int64_t j = 0; j < L; ++j) {
    const double aj = a[static_cast<size_t>(j)];
    const double kappa = std::exp(D[static_cast<size_t>(j)] + Dmax) * (1 + eta) / (1 - eta) - 1;
    const double w = (1 + kappa) * (1 + beta) - 1;
    const double *v = V + j * ldv, *ev = eV + j * ldv;
    for (int64_t c = 0; c < dv; ++c) {
      const double av = std::fabs(v[c]) + ev[c];
      r.o[static_cast<size_t>(c)] += aj * v[c];
      r.bound[static_cast<size_t>(c)] += aj * (w * av + ev[c]) + 0x1p-125 * av + g64 * aj * std::fabs(v[c]);
    }
  }
  for (double& b : r.bound) b *= 1 + 0x1p-30;
  r.lse_bound = (Dmax + std::log1p(eta) - std::log1p(-gl) + kEpsExp * (std::log(Ld) + 1) +
                 u * (std::fabs(r.lse) + Dmax + 1) + gamma_n(Ld + 16, u64) * (std::fabs(r.lse) + 1)) *
                (1 + 0x1p-30);
  return r;
}

// u = W o (W [rows x cols] row-major, o [cols]) given the bound b on each |o'_k - o_k|: the candidate's float32
// product adds gamma_{cols} sum_k |W_ik| (|o_k| + b_k); the oracle's float64 one gamma_{cols}(2^-53) sum |W_ik o_k|.
//   |u'_i - u_i| <= sum_k |W_ik| b_k + gamma_cols(2^-24) sum_k |W_ik| (|o_k| + b_k) + gamma_cols(2^-53) sum_k |W_ik o_k|.
inline void project_bound(const double* W, int64_t rows, int64_t cols, const double* o, const double* b, double* u,
                          double* ub) {
  const double g = gamma_n(static_cast<double>(cols), 0x1p-24), g64 = gamma_n(static_cast<double>(cols), 0x1p-53);
  for (int64_t i = 0; i < rows; ++i) {
    double y = 0, e = 0;
    for (int64_t k = 0; k < cols; ++k) {
      const double w = W[i * cols + k];
      y += w * o[k];
      e += std::fabs(w) * b[k] * (1 + g) + g * std::fabs(w) * std::fabs(o[k]) + g64 * std::fabs(w * o[k]);
    }
    u[i] = y;
    ub[i] = e * (1 + 0x1p-30);
  }
}

}  // namespace ladder::precision
