// ref/src/02-attention/fp64_bound.cpp -- the allowance of a float64 attention (Contract::fp64_bound), derived.
//
// Per batch row b, query head h (kv head h / G) and query row i, over the keys j it sees, in the model of
// core/fp64_bound.hpp (Ev: a value and its error bound; Sum: any order, gamma_{n-1} sum |terms|):
//   S_ij  = scale q_i . k_j           gamma_{d+1} |scale| sum_c |q_ic k_jc| (the scale a (d+1)-th rounding)
//   P_ij  = e^{S_ij - m_i} / d_i      01's softmax (ref/src/01-softmax/fp64_bound.cpp) with S's errors in
//                                     the exponents: t_ij = S_ij - m_i carries err(S_ij) + u |t_ij| (m_i, any
//                                     number, cancels); d_i = sum_j e_ij
//   m_i = max_j S_ij                  max_j err(S_ij);   L_i = m_i + log d_i: log's 2 ulp and err(d_i) / d_i
//   O_i   = sum_j P_ij v_j            sum_j err(P_ij) |v_jc| + gamma_{n-1} sum_j P_ij |v_jc|
// With dO (the backward):
//   dP_ij = dO_i . v_j                gamma_{d_v} sum_c |dO_ic v_jc|
//   D_i   = sum_j P_ij dP_ij          (the oracle) or dO_i . O_i (FA2, the recompute rung): a candidate
//                                     gets the larger of the two bounds
//   dS_ij = P_ij (dP_ij - D_i)        products and a difference, errors of P, dP and D carried
//   dQ_i  = scale sum_j dS_ij k_j     gamma over the keys + the scale's rounding
//   dK_j  = scale sum_i dS_ij q_i,  dV_j = sum_i P_ij dO_i   over the G Nq rows of the kv head's group
// The oracle (naive.hpp) is that computation in float64, sums sequential, one division per P entry. A
// candidate may also: compute the scale itself (2u on S, dQ, dK), divide by a reciprocal (2u), rescale
// d_i and O_i's accumulators online (flash, tiled: up to n - 1 rescales, fp64::rescale_rel), and recompute
// P_ij = e^{S_ij - L_i} from the stored L (the backward rungs): its P bound is the larger of the two
// paths'. The allowance is the oracle's bound plus the candidate's; masked entries, fully masked rows
// and keys no row sees are exactly 0 in every rung (bound 0, plus underflow's eta).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/02-attention/problem.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/fp64_bound.hpp"

namespace ladder::attention {

namespace {

using namespace fp64;

struct Bounds {
  Array<double> O, L, m, D, dQ, dK, dV;
};

// One side's bound (cand: a candidate's freedoms, else the oracle's own algorithm), added into `out`.
void side(const Problem& p, const Array<double>& Q, const Array<double>& K, const Array<double>& V,
          const Array<double>* dO, bool cand, Bounds& out) {
  const int64_t G = p.group(), Nq = p.Nq, Nk = p.Nk, d = p.d, dv = p.dim_v(), Hkv = p.kv_heads();
  const double sc = std::abs(p.scale), scale_rel = cand ? 2 * u : 0, div_rel = cand ? 2 * u : u;
  std::vector<Ev> S(static_cast<size_t>(Nk)), P(static_cast<size_t>(Nk)), dP(static_cast<size_t>(Nk));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t kh = 0; kh < Hkv; ++kh) {
      const double* Kh = &K.data[((b * Hkv + kh) * Nk) * d];
      const double* Vh = &V.data[((b * Hkv + kh) * Nk) * dv];
      std::vector<Sum> dK(static_cast<size_t>(Nk * d)), dV(static_cast<size_t>(Nk * dv));
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < Nq; ++i) {
          const int64_t row = (b * p.H + kh * G + g) * Nq + i;
          const double* q = &Q.data[row * d];
          const int64_t f = std::min(p.first_key(i, b), Nk), l = std::min(p.last_key(i, b), Nk - 1);
          if (l < f) continue;  // fully masked: O = 0, L = m = -inf, zero gradients in every rung
          double m = -kInf, lo = kInf, em = 0;
          for (int64_t j = f; j <= l; ++j) {
            Sum s;
            for (int64_t c = 0; c < d; ++c) s.add(mul({q[c], 0}, {Kh[j * d + c], 0}));
            const Ev t = s.done();
            S[j] = {p.scale * t.v, sc * t.e + (u + scale_rel) * std::abs(p.scale * t.v)};
            m = std::max(m, S[j].v), lo = std::min(lo, S[j].v), em = std::max(em, S[j].e);
          }
          Sum ds;
          for (int64_t j = f; j <= l; ++j) ds.add(fp64::exp(sub(S[j], {m, 0})));
          Ev dsum = ds.done();
          const int64_t n = l - f + 1;
          const double rescale = cand ? rescale_rel(static_cast<double>(n - 1), m - lo) : 0;
          dsum.e += rescale * dsum.v;
          const Ev L = add({m, 0}, fp64::log(dsum));
          out.L.data[row] += L.e, out.m.data[row] += em;
          for (int64_t j = f; j <= l; ++j) {
            P[j] = div(fp64::exp(sub(S[j], {m, 0})), dsum, div_rel);
            if (cand) P[j].e = std::max(P[j].e, fp64::exp(sub(S[j], L)).e);  // recomputed from L
          }
          std::vector<Ev> O(static_cast<size_t>(dv));
          for (int64_t c = 0; c < dv; ++c) {
            Sum o;
            for (int64_t j = f; j <= l; ++j) o.add(mul(P[j], {Vh[j * dv + c], 0}));
            O[c] = o.done();
            O[c].e += rescale * o.mag;  // the flash accumulator's rescales
            out.O.data[row * dv + c] += O[c].e;
          }
          if (!dO) continue;
          const double* gO = &dO->data[row * dv];
          Sum dd;
          for (int64_t j = f; j <= l; ++j) {
            Sum s;
            for (int64_t c = 0; c < dv; ++c) s.add(mul({gO[c], 0}, {Vh[j * dv + c], 0}));
            dP[j] = s.done();
            dd.add(mul(P[j], dP[j]));
          }
          Ev D = dd.done();
          if (cand) {
            Sum fa2;
            for (int64_t c = 0; c < dv; ++c) fa2.add(mul({gO[c], 0}, O[c]));
            D.e = std::max(D.e, fa2.done().e);
          }
          out.D.data[row] += D.e;
          std::vector<Sum> dq(static_cast<size_t>(d));
          for (int64_t j = f; j <= l; ++j) {
            const Ev dSj = mul(P[j], sub(dP[j], D));
            for (int64_t c = 0; c < d; ++c) {
              dq[c].add(mul(dSj, {Kh[j * d + c], 0}));
              dK[j * d + c].add(mul(dSj, {q[c], 0}));
            }
            for (int64_t c = 0; c < dv; ++c) dV[j * dv + c].add(mul(P[j], {gO[c], 0}));
          }
          for (int64_t c = 0; c < d; ++c) {
            const Ev t = dq[c].done();
            out.dQ.data[row * d + c] += sc * t.e + (u + scale_rel) * sc * std::abs(t.v);
          }
        }
      if (!dO) continue;
      for (int64_t x = 0; x < Nk * d; ++x) {
        const Ev t = dK[x].done();
        out.dK.data[(b * Hkv + kh) * Nk * d + x] += sc * t.e + (u + scale_rel) * sc * std::abs(t.v);
      }
      for (int64_t x = 0; x < Nk * dv; ++x) out.dV.data[(b * Hkv + kh) * Nk * dv + x] += dV[x].done().e;
    }
}

}  // namespace

// Contract::fp64_bound of 02-attention: the oracle's bound + a candidate's, per element of each output.
Tensors fp64_allowance(const Problem& p, const Array<double>& Q, const Array<double>& K, const Array<double>& V,
                       const Array<double>* dO) {
  Bounds b{Array<double>({p.B, p.H, p.Nq, p.dim_v()}), Array<double>({p.B, p.H, p.Nq}), Array<double>({p.B, p.H, p.Nq}),
           Array<double>({p.B, p.H, p.Nq}), Array<double>({p.B, p.H, p.Nq, p.d}),
           Array<double>({p.B, p.kv_heads(), p.Nk, p.d}), Array<double>({p.B, p.kv_heads(), p.Nk, p.dim_v()})};
  side(p, Q, K, V, dO, false, b);
  side(p, Q, K, V, dO, true, b);
  Tensors t{{"O", to_npy(b.O)}, {"L", to_npy(b.L)}, {"m", to_npy(b.m)}};
  if (dO) t.insert({{"D", to_npy(b.D)}, {"dQ", to_npy(b.dQ)}, {"dK", to_npy(b.dK)}, {"dV", to_npy(b.dV)}});
  return t;
}

}  // namespace ladder::attention
