// ref/src/03-mla/flashmla_bound.cpp -- the allowance of a float64 candidate in FlashMLA's layouts (Contract::fp64_bound
// of 03-mla/flashmla and 03-mla/flashmla_sparse_prefill), derived per element in the model of core/fp64_bound.hpp
// (Ev: a value and its error bound; Sum: any order, gamma_{n-1} sum |terms|), as 02-attention's forward bound:
//   S_j = scale q . row_j     a dot of D terms (a float32 query times a cache row as the oracle reads it: float32, or
//                             an FP8 record's code x scale, exact in float64, so each product rounds once), then the
//                             scale: u |S_j| for the oracle, 3u for a candidate that forms the scale itself (and 5u
//                             where it scales by sm_scale x log2 e, computing in base 2 as sparse prefill does)
//   m = max_j S_j             max_j err(S_j): the max_logits output
//   lse = m + log sum_j e^{S_j - m}   the sum's terms carry S's errors through exp; a candidate may rescale its sum
//                             online (split-KV, merged by lse: up to L - 1 rescales, one more for a sink's split)
//   o_r = f sum_j P_j row_j[r]        P_j = e^{S_j - lse} (the oracle) or e^{S_j - m} / d (a reciprocal: 2u); the larger
//                             bound of the two for either side; f = 1 / (1 + e^{sink - lse}) with an attention sink
// A token with no listed row (o = 0, lse = +inf, max_logits = -inf in every correct port) and a +inf sink (o = 0) are
// exact: bound 0. Sparse prefill's base-2 statistics are the natural ones x log2 e: the bound x log2 e plus 2u |value|
// per side (the product and log2 e's own rounding). The allowance is the oracle's bound plus the candidate's.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "flashmla_rows.hpp"
#include "ladder/core/fp64_bound.hpp"

namespace ladder::mla::flashmla_detail {

namespace {

void rows_side(const Query& qy, const Pool& pool, bool cand, bool base2, Attn<double>& out) {
  using namespace fp64;
  const int64_t H = qy.H, D = qy.D, R = qy.R;
  const double sc = std::abs(qy.scale), scale_rel = cand ? (base2 ? 4 * u : 2 * u) : 0;
  for (int64_t n = 0; n < qy.N; ++n) {
    const std::vector<int64_t>& rows = qy.rows[static_cast<size_t>(n)];
    const int64_t L = static_cast<int64_t>(rows.size());
    if (L == 0) continue;  // a lonely token: exact
    std::vector<Ev> S(static_cast<size_t>(L)), P(S.size());
    for (int64_t h = 0; h < H; ++h) {
      const float* q = &qy.q[(n * H + h) * D];
      const double sink = qy.sink.empty() ? -kInf : qy.sink[static_cast<size_t>(h)];
      if (sink == kInf) continue;  // o = 0 exactly; lse and max_logits below are not affected by the sink
      double m = -kInf, lo = kInf, em = 0;
      for (int64_t j = 0; j < L; ++j) {
        const double* row = pool.row<double>(rows[static_cast<size_t>(j)]);
        Sum s;
        for (int64_t k = 0; k < D; ++k) s.add(mul({q[k], 0}, {row[k], 0}));
        const Ev t = s.done();
        S[j] = {qy.scale * t.v, sc * t.e + (u + scale_rel) * std::abs(qy.scale * t.v)};
        m = std::max(m, S[j].v), lo = std::min(lo, S[j].v), em = std::max(em, S[j].e);
      }
      Sum ds;
      for (int64_t j = 0; j < L; ++j) ds.add(fp64::exp(sub(S[j], {m, 0})));
      Ev d = ds.done();
      const double rescale = cand ? rescale_rel(static_cast<double>(L - 1 + (sink > -kInf ? 1 : 0)), m - lo) : 0;
      d.e += rescale * d.v;
      const Ev lse = add({m, 0}, fp64::log(d));
      out.lse.data[n * H + h] += lse.e, out.mx.data[n * H + h] += em;
      for (int64_t j = 0; j < L; ++j) {
        P[j] = div(fp64::exp(sub(S[j], {m, 0})), d, 2 * u);
        P[j].e = std::max(P[j].e, fp64::exp(sub(S[j], lse)).e);
      }
      Ev f{1, 0};
      if (sink > -kInf) f = div({1, 0}, add({1, 0}, fp64::exp(sub({sink, 0}, lse))), cand ? 2 * u : u);
      for (int64_t r = 0; r < R; ++r) {
        Sum o;
        for (int64_t j = 0; j < L; ++j) o.add(mul(P[j], {pool.row<double>(rows[static_cast<size_t>(j)])[r], 0}));
        Ev O = o.done();
        O.e += rescale * o.mag;  // the flash accumulator's rescales
        if (sink > -kInf) O = mul(O, f);
        out.o.data[(n * H + h) * R + r] += O.e;
      }
    }
  }
}

}  // namespace

Attn<double> rows_allowance(const Query& qy, const Pool& pool, bool base2) {
  Attn<double> a{Array<double>({qy.N, qy.H, qy.R}), Array<double>({qy.N, qy.H}), Array<double>({qy.N, qy.H})};
  rows_side(qy, pool, false, base2, a);
  rows_side(qy, pool, true, base2, a);
  return a;
}

void to_base2(Attn<double>& bound, const Array<double>& lse2, const Array<double>& max_logits) {
  const double log2e = std::numbers::log2e;
  for (size_t i = 0; i < bound.lse.data.size(); ++i) {
    if (std::isfinite(lse2.data[i])) bound.lse.data[i] = log2e * bound.lse.data[i] + 4 * fp64::u * std::abs(lse2.data[i]);
    if (std::isfinite(max_logits.data[i]))
      bound.mx.data[i] = log2e * bound.mx.data[i] + 4 * fp64::u * std::abs(max_logits.data[i]);
  }
}

}  // namespace ladder::mla::flashmla_detail
