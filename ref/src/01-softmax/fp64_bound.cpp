// ref/src/01-softmax/fp64_bound.cpp -- the allowance of a float64 softmax (Contract::fp64_bound), derived.
//
// Per row with a finite maximum m (core/fp64_bound.hpp: the model, Ev, Sum), for the float32 inputs x_j
// (exact in float64):
//   t_j = x_j - m         one rounding: u |t_j|
//   e_j = e^{t_j}         the exp's 2 ulp and t_j's error: e_j (e^{u |t_j|} - 1 + 4u ...)
//   d   = sum_j e_j       any order: sum_j err(e_j) + gamma_{V-1} sum_j e_j  (all terms >= 0: = gamma d)
//   y_i = e_i / d         err(e_i) / d + y_i err(d) / d, then the quotient's rounding
// The oracle (safe softmax, softmax.hpp) divides once (u). A candidate may take a reciprocal and multiply
// (2u), and sum online (Alg. 3): each term of d then passes up to V - 1 rescales by e^{m_old - m_new}
// (fp64::rescale_rel; naive's e^{x_j} without m rounds less). The allowance is the oracle's bound plus the
// candidate's. -inf entries give exactly 0 (bound 0); rows the contract makes all zeros or NaN: bound 0.
// The sum of V terms dominates: y's relative bound grows as ~ 8 V u (3e-16 at V = 1, 1e-12 near V = 1000).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/core/contract.hpp"
#include "ladder/core/fp64_bound.hpp"

namespace ladder::softmax {

Array<double> fp64_allowance(const Array<double>& x) {
  using namespace fp64;
  Array<double> b(x.shape);
  const int64_t rows = x.rows(), V = x.cols();
  std::vector<Ev> e(static_cast<size_t>(V));
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data.data() + r * V;
    double m = -kInf, lo = kInf;
    bool special = false;
    for (int64_t j = 0; j < V; ++j) {
      special |= std::isnan(xr[j]) || xr[j] == kInf;
      if (std::isfinite(xr[j])) m = std::max(m, xr[j]), lo = std::min(lo, xr[j]);
    }
    if (special || m == -kInf) continue;  // NaN rows and all-zero rows: no rounding to allow (bound 0)
    Sum d;
    for (int64_t j = 0; j < V; ++j) {
      e[static_cast<size_t>(j)] = std::isfinite(xr[j]) ? fp64::exp(sub({xr[j], 0}, {m, 0})) : Ev{0, 0};
      d.add(e[static_cast<size_t>(j)]);
    }
    const Ev d_oracle = d.done();
    Ev d_cand = d_oracle;
    d_cand.e += rescale_rel(static_cast<double>(V - 1), m - lo) * d_oracle.v;
    for (int64_t j = 0; j < V; ++j) {
      const Ev ej = e[static_cast<size_t>(j)];
      if (ej.v == 0 && ej.e == 0) continue;
      b.data[r * V + j] = div(ej, d_oracle, u).e + div(ej, d_cand, 2 * u).e;
    }
  }
  return b;
}

}  // namespace ladder::softmax
