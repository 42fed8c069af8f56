// ladder/core/device_math.hpp -- the tolerance rule's allowance for a device's math library.
//
// The rule (compare.hpp) measures its baseline on the CPU, where glibc's expf is correctly rounded
// in practice. CUDA's expf is not: the CUDA C Programming Guide ("Mathematical Functions", single
// precision table) bounds it at 2 ulp over the full range. On an H100, the naive CUDA softmax kernel on
// a golden case of 4 x 1025 differed from the correctly rounded exp on 1268 of 4100 inputs and failed
// the rule by 6%; replaying its arithmetic with correctly rounded exp passed. So for a CUDA candidate
// the floor adds the effect of that documented bound -- derived here from the bound, never tuned to a
// measurement.
//
// Derivation. One device call: |expf_dev(x) - e^x| <= n ulp(e^x) <= n eps e^x, since a float's ulp
// is at most eps = 2^-23 times its magnitude (normal range; outputs below 2^-126 carry at most
// n * 2^-149 absolute, negligible beside any floor). Write expf_dev = e^x (1 + d), |d| <= u = n eps.
// Softmax and attention's P V end in a normalised exp-weighted average of values v_j:
//   out = sum_j e_j v_j / sum_j e_j = sum_j w_j v_j,   w_j = e_j / sum_k e_k.
// With every e_j -> e_j (1 + d_j), and s = sum_j w_j d_j (|s| <= u):
//   out' - out = sum_j w_j (d_j - s) v_j / (1 + s),   so   |out' - out| <= 2u / (1 - u) * sum_j w_j |v_j|.
// Softmax (v_j = [j == i]): |y_i' - y_i| <= 2u/(1-u) y_i -- a relative allowance per element
// (Tolerance::device_rel, 4 eps for CUDA's expf); the max-abs rule applies it at max|y|.
// Attention: <= 2u/(1-u) max|V|.
// The candidate's own rounding (sums, divisions) is what k * baseline already allows for; this term
// adds only the device library's excess, conservatively its whole bound.
// Scope: the bound counts one device exp per term. The online rungs rescale partial sums by further
// exps (e^{m_old - m_new}); those factors compound in the denominator only, and the rule does not
// claim to bound that compounding -- on the H100 every online rung passed without any device floor.
#pragma once
#include <limits>

#include "ladder/core/compare.hpp"

namespace ladder::device_math {

// CUDA C Programming Guide, single-precision mathematical functions: maximum ulp error, full range.
inline constexpr double cuda_expf_ulps = 2;
inline constexpr double float_eps = std::numeric_limits<float>::epsilon();  // 2^-23

// u: the relative error of one call whose documented bound is `ulps` ulp.
constexpr double relative_bound(double ulps) { return ulps * float_eps; }

// Relative change of a softmax output y_i when every exponential carries a relative error of at most
// u = relative_bound(ulps): 2u / (1 - u) (derivation above). Tolerance::device_rel for softmax.
constexpr double softmax_rel(double ulps = cuda_expf_ulps) {
  const double u = relative_bound(ulps);
  return 2 * u / (1 - u);
}

// Largest change of a normalised exp-weighted average sum_j w_j v_j (attention's P V): 2u/(1-u) max|v|.
constexpr double weighted_average_abs(double max_abs_value, double ulps = cuda_expf_ulps) {
  return softmax_rel(ulps) * max_abs_value;
}

// The tolerance for a CUDA softmax candidate: `base` plus the device's exp allowance.
inline Tolerance cuda_softmax_tolerance(Tolerance base = {}, double exp_ulps = cuda_expf_ulps) {
  base.device_rel = softmax_rel(exp_ulps);
  return base;
}

}  // namespace ladder::device_math
