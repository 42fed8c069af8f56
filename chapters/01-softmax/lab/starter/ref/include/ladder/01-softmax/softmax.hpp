// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/01-softmax/softmax.hpp -- stage 01 references: naive, safe and online softmax.
//
//   01 softmax     naive -> safe -> online                                  <== this file
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Sources: lecture notes §3.3-3.5 (Alg. 2 "safe softmax", Alg. 3 "safe softmax with online
// normalizer calculation"); Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018.
// T = double is the oracle, T = float is the rung at kernel precision. Each row of x (rows x cols,
// row-major) is normalised independently; OpenMP splits rows, and every row is computed by the same
// sequential loop, so the result does not depend on the thread count.
//
// Defined results, NaN and inf (the contract's semantics, written once: `ladder describe 01-softmax`
// prints them from ref/src/01-softmax/contract.cpp, chapter 01 section 2 says why; every rung is tested
// on each kind of row in tests/01-softmax/ and by the golden case nan_inf). Per row:
//   * -inf entries beside a finite one get probability exactly 0 (e^{-inf} = 0), the rest as usual.
//   * a row that is all -inf (every position masked) is all zeros: no admissible entry, no probability
//     mass, as attention defines a fully masked row to give O = 0 (the FlashAttention convention).
//     ladder's one departure from IEEE evaluation and PyTorch, which give NaN (-inf - (-inf)).
//   * a NaN anywhere makes the whole row NaN, among -inf entries too (a row holding a NaN is not a
//     masked row): IEEE (it reaches d, and every y_i = e^{x_i - m} / d) and PyTorch.
//   * +inf anywhere (once or more, beside finite or -inf entries) makes the whole row NaN: m = +inf and
//     x_j - m = inf - inf = NaN at the +inf entries, so d is NaN (IEEE evaluation of Alg. 2; PyTorch).
//     Not the limit (1/k at each of k +inf entries): no kernel computes it, and an inf logit is an
//     upstream overflow to show, not to hide.
//   * naive keeps its lesson: where e^x overflows d is inf and the row is NaN (so [10000, 10001,
//     10002, 10003] is NaN everywhere), where every e^x underflows d is 0 and the row is 0/0 = NaN
//     (an all -inf row is the extreme case: NaN, not zeros). Otherwise it follows the rules above.
// The special rows cost one check per row, never a branch per element: the row maximum m (safe) or the
// final running maximum (online) is -inf or +inf, or d is NaN or inf (naive). Only a row whose maximum
// is -inf (all -inf, or -inf and NaN: std::max skips a NaN) is scanned once more, for a NaN.
//
// Memory accesses per element (Milakov & Gimelshein Table 1; what Cost reports):
//   naive  3: pass 1 loads x_j (sum of exp); pass 2 loads x_j and stores y_j.
//   safe   4: pass 1 loads x_j (max); pass 2 loads x_j (sum); pass 3 loads x_j and stores y_j.
//   online 3: pass 1 loads x_j once for both m and d; pass 2 loads x_j and stores y_j.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>

#include "ladder/core/cost.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/math.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::softmax {

// ---- one row (V = cols elements), in the notes' notation -------------------------------------

// The sum pass's order (chapter 01, "Long rows"). Summed in index order, the float normaliser of a
// 2^20-entry row is off by 1.9e-3: every addition rounds at the scale of the grown partial sum, and the
// roundings do not cancel. The tolerance rule fails that (its floor admits short sequential runs,
// core/compare_elementwise.hpp), as kernels never sum so: a block's threads or a vector's
// lanes each sum a short run and the runs are combined as a tree. So at float the rungs sum pairwise
// (core/fixed_order.hpp: eight lanes over runs of 64, halves combined; at 2^20 off by about 5e-8). At
// double -- the oracle -- in index order, the order the goldens were written in (its error there is
// 2^-29 of float's).
template <class T, class Term>
T row_sum(int64_t V, const Term& term) {
  if constexpr (std::is_same_v<T, double>) {
    T d = 0;
    for (int64_t j = 0; j < V; ++j) d += term(j);
    return d;
  } else {
    return sum_pairwise_of<T>(V, term);
  }
}

// naive: d_V = sum_j e^{x_j}; y_i = e^{x_i} / d_V.
template <class T>
void naive_row(const T* x, T* y, int64_t V) {
  T d = row_sum<T>(V, [x](int64_t j) { return std::exp(x[j]); });
  if (!(d < std::numeric_limits<T>::infinity())) d = std::numeric_limits<T>::quiet_NaN();  // inf: the row is NaN
  for (int64_t i = 0; i < V; ++i) y[i] = std::exp(x[i]) / d;
}

// safe (notes Alg. 2): m_V = max_k x_k; d_V = sum_j e^{x_j - m_V}; y_i = e^{x_i - m_V} / d_V.
template <class T>
void safe_row(const T* x, T* y, int64_t V) {
  // TODO(lab: safe_row): notes Alg. 2: a max pass, a sum-of-exp pass (in row_sum's order: a long row summed in index order fails), a normalise pass; an all -inf row gives zeros, a NaN or +inf anywhere makes the row NaN (see the header: most of it follows from IEEE arithmetic, not all).
}

// online (notes Alg. 3): one pass computes both
//   m_j = max(m_{j-1}, x_j)
//   d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}
// then y_i = e^{x_i - m_V} / d_V. In every step one of the two exponents is 0: either x_j is the new
// maximum (m_j = x_j, so e^{x_j - m_j} = 1) or it is not (m_j = m_{j-1}, so the rescale factor is 1).
// The loop spells out both branches, so the pass costs one exp per element like safe's sum pass.
// A -inf entry contributes e^{-inf} = 0 and is skipped (e^{-inf - (-inf)} would be NaN); while every
// entry so far is -inf, m stays -inf and d stays 0. A NaN entry fails x_j > m and lands in d as
// e^{NaN - m} = NaN, which no later step undoes (NaN * 0 is NaN): d = NaN marks a row with a NaN. A
// +inf entry becomes m with d = 1, and the finite entries then add e^{x - inf} = 0: the recurrence alone
// would give 0 everywhere and e^{inf - inf} = NaN at the +inf, so the +inf row is made NaN after the pass.
//
// A long row (the sum's order, row_sum above) is cut in runs of kOnlineRun, each run's (m, d) is the
// recurrence's, and the runs' states are combined pairwise by the notes' merge rule (section 3.5,
// "parallel online normalizer"; Milakov & Gimelshein section 3):
//   m = max(m_a, m_b),  d = d_a e^{m_a - m} + d_b e^{m_b - m}
// -- what the threads of a CUDA block do with their partial states. A row of up to kOnlineRun entries
// is the recurrence alone.
inline constexpr int64_t kOnlineRun = 1024;

template <class T>
void online_state(const T* x, int64_t V, T& m_out, T& d_out) {
  // TODO(lab: online_row): notes Alg. 3: the online recurrence over x for (m, d); a row longer than kOnlineRun in runs merged pairwise by section 3.5's rule (a side whose m is -inf adds its d as it is: e^{-inf - (-inf)} is NaN).
}

template <class T>
void online_row(const T* x, T* y, int64_t V) {
  // TODO(lab: online_normalise): the normalise pass after online_state; -inf entries, all -inf rows, NaN and +inf as documented above (a check on m and d after the pass, not a branch per element).
}

// ---- rows ----------------------------------------------------------------------------------

template <class T>
void check_rows(const T* x, const T* y, int64_t rows, int64_t cols) {
  require(rows >= 0, "softmax: rows = {} violates rows >= 0", rows);
  require(cols >= 1, "softmax: cols = {} violates cols >= 1 (a softmax over no entries is undefined)", cols);
  require(rows == 0 || (x != nullptr && y != nullptr), "softmax: null input or output pointer");
}

// Applies a one-row rung to every row of x [rows, cols] (row-major) into y; y may alias x.
template <class T>
void for_each_row(void (*row)(const T*, T*, int64_t), const T* x, T* y, int64_t rows, int64_t cols) {
  check_rows(x, y, rows, cols);
#pragma omp parallel for schedule(static) if (rows * cols > 32768)
  for (int64_t r = 0; r < rows; ++r) row(x + r * cols, y + r * cols, cols);
}
template <class T>
void naive_rows(const T* x, T* y, int64_t rows, int64_t cols) { for_each_row(&naive_row<T>, x, y, rows, cols); }
template <class T>
void safe_rows(const T* x, T* y, int64_t rows, int64_t cols) { for_each_row(&safe_row<T>, x, y, rows, cols); }
template <class T>
void online_rows(const T* x, T* y, int64_t rows, int64_t cols) { for_each_row(&online_row<T>, x, y, rows, cols); }

// Convenience: Array in, Array out (the last dimension is the softmax axis).
template <class T>
Array<T> apply(void (*rows_fn)(const T*, T*, int64_t, int64_t), const Array<T>& x) {
  require(!x.shape.empty(), "softmax: x must have at least one dimension");
  Array<T> y(x.shape);
  rows_fn(x.data.data(), y.data.data(), x.rows(), x.cols());
  return y;
}

// ---- registry types and costs ------------------------------------------------------------------

// What a stage-01 Rung::function holds. f64 is empty for CUDA rungs (kernels run in fp32).
template <class T>
using RowsFn = std::function<void(const T* x, T* y, int64_t rows, int64_t cols)>;
struct RowsFns {
  RowsFn<float> f32;
  RowsFn<double> f64;
};

// Cost shape: {rows, cols}; bytes at fp32 (the kernel precision). Accesses per element = loads + 1
// store. flops per element, an exp counted as one: naive 4 (exp, add | exp, div); safe 7 (max |
// sub, exp, add | sub, exp, div); online 7 (compare, sub, exp, add | sub, exp, div), the rare
// new-maximum branch (one mul instead of an add) counted the same.
inline Cost row_cost(const Shape& s, int loads_per_elem, int flops_per_elem) {
  require(s.size() == 2, "softmax cost: shape {} must be {{rows, cols}}", shape_str(s));
  const double n = static_cast<double>(s[0]) * static_cast<double>(s[1]);
  return Cost{flops_per_elem * n, loads_per_elem * n * 4.0, n * 4.0, 0.0};
}
inline Cost naive_cost(const Shape& s) { return row_cost(s, 2, 4); }
inline Cost safe_cost(const Shape& s) { return row_cost(s, 3, 7); }
inline Cost online_cost(const Shape& s) { return row_cost(s, 2, 7); }

// Memory accesses per element as Cost reports them (3 / 4 / 3 for naive / safe / online).
inline double accesses_per_element(const Cost& c, const Shape& s) {
  return c.bytes() / (4.0 * static_cast<double>(s[0]) * static_cast<double>(s[1]));
}

}  // namespace ladder::softmax
