// ref/src/03-mla/fp64_bound.cpp -- the allowance of a float64 MLA step (Contract::fp64_bound), derived.
//
// Per query token (one decode step over the L rows it sees), in the model of core/fp64_bound.hpp (Ev: a
// value and its error bound; Sum: any order, gamma_{n-1} sum |terms|), each error carried forward:
//   c^Q   = RMSNorm(W_DQ h) q_norm   the product (gamma_hidden), ss = sum c^2, 1 / sqrt(ss / n + eps), gains
//   q^C_h = W_UQ_h c^Q,  q^R_h = RoPE(W_QR_h c^Q): angle pos theta^{-2i/rope} through log, exp (2 ulp each)
//           and a product; cos / sin within 2 ulp and |d cos| <= |d angle|; the rotation's products
//   s_j   = scale ([q^C | q^R] . [W_UK c_j | k^R_j])   -- the absorbed rungs compute (W_UK^T q^C) . c_j and AM
//           (W_UK^T W_UQ) c^Q first, so the rounding term is taken over the magnitude every association
//           shares: gamma_{q_lora + nope + kv_lora + rope + 2} (sum_a |W_UQ| |c^Q| ... |W_UK| |c_j|). An
//           error already in q^C is the same vector in every association and meets the exact k^C = W_UK c_j
//           (|dq . W_UK c_j| <= sum_a |dq_a| |k^C_a|); one in c_j (a prefill chunk's own rows) meets W_UK^T q^C
//
// Why errors meet values and only new roundings meet magnitudes: propagating every upstream error through
// |W| |x| at each of the chain's five levels multiplies the cancellation ratio |W| |x| / |W x| (~ sqrt(n):
// 8 .. 16 here) five times, and the bound came out 1e-8 relative -- a float32 answer passed as float64.
//   a_j, lse   02's softmax bound on these scores (online rescales for flash_mla, a reciprocal: 2u)
//   u     = W_O [W_UV_h sum_j a_j c_j]_h  -- or sum_j a_j (W_UV c_j), or AM's (W_O W_UV) o^lat: the rounding
//           term over sum_{h,c} |W_O| sum_j a_j (|W_UV| |c_j|) with gamma_{L + H kv_lora + H v + 2}; a_j's
//           error carried through |v_j| = |W_UV c_j|, c_j's through |W_UV|, o's through |W_O|
//   kv_rows (a prefill chunk) = [RMSNorm(c^KV) kv_norm | RoPE(k^R)] of W_DKV h, as c^Q and q^R above.
// The magnitudes are those of each term as computed (|W| |x| one level at a time), never products of
// whole-chain norms: the bound stays ~ (terms) x u x (magnitudes), e.g. ~1e-15 .. 1e-13 relative to u.
// The oracle (CD at float64) divides once; a candidate adds 2u for the scale, the reciprocal and RoPE's
// inverse frequency. The allowance is the oracle's bound plus the candidate's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/03-mla/mla.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/fp64_bound.hpp"

namespace ladder::mla {

namespace {

using namespace fp64;
using Evs = std::vector<Ev>;

// rows [r0, r0 + n) of W x (x with errors).
Evs project(const Mat<float>& W, int64_t r0, int64_t n, const Evs& x) {
  Evs y(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    Sum s;
    for (int64_t c = 0; c < W.cols(); ++c) s.add(mul({W(r0 + r, c), 0}, x[static_cast<size_t>(c)]));
    y[static_cast<size_t>(r)] = s.done();
  }
  return y;
}

void rms_norm(Ev* x, int64_t n, const Vec<float>& gain, double eps, double div_rel) {
  Sum ss;
  for (int64_t i = 0; i < n; ++i) ss.add(mul(x[i], x[i]));
  const Ev r = div({1, 0}, fp64::sqrt(add(div(ss.done(), {static_cast<double>(n), 0}), {eps, 0})), div_rel);
  for (int64_t i = 0; i < n; ++i) x[i] = mul({gain[i], 0}, mul(x[i], r));
}

void rope(Ev* x, int64_t d, int64_t pos, double theta, bool cand) {
  const int64_t half = d / 2;
  const Ev lt = fp64::log({theta, 0});
  for (int64_t i = 0; i < half; ++i) {
    const Ev y = div({-2.0 * static_cast<double>(i), 0}, {static_cast<double>(d), 0});
    Ev ang = mul({static_cast<double>(pos), 0}, fp64::exp(mul(y, lt)));
    if (cand) ang.e += 2 * u * std::abs(ang.v);  // 1 / theta^{2i/d}: one more division
    const Ev c{math::cos(ang.v), ang.e + kFuncRel}, s{math::sin(ang.v), ang.e + kFuncRel};
    const Ev a = x[i], b = x[i + half];
    x[i] = sub(mul(a, c), mul(b, s));
    x[i + half] = add(mul(b, c), mul(a, s));
  }
}

Evs exact(const float* x, int64_t n) {
  Evs y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = {x[i], 0};
  return y;
}

}  // namespace

// Contract::fp64_bound of 03-mla (scores: the oracle's, [N, H, Lmax]).
Tensors fp64_allowance(const Weights<float>& W, const PagedCache<float>& cache, const Step<float>& step,
                       const std::vector<int64_t>& q_lens, bool writes_rows, const Array<double>& scores) {
  const Config& cf = W.cfg;
  const int64_t H = cf.n_heads, nope = cf.qk_nope, rope_d = cf.qk_rope, v = cf.v_head, kvl = cf.kv_lora_rank;
  const int64_t ql = cf.q_lora_rank, kvd = cf.kv_dim(), N = step.h.rows(), Lmax = scores.shape[2];
  const int64_t B = static_cast<int64_t>(q_lens.size());
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  Array<double> bu({N, cf.hidden}), blse({N, H}), bs({N, H, Lmax}), brows({N, kvd});
  const double sc = std::abs(cf.scale());
  for (const bool cand : {false, true}) {
    const double div_rel = cand ? 2 * u : u, scale_rel = cand ? 2 * u : 0;
    std::vector<Evs> rows(static_cast<size_t>(writes_rows ? N : 0));
    for (size_t n = 0; n < rows.size(); ++n) {  // the chunk's own cache rows
      rows[n] = project(W.W_DKV, 0, kvd, exact(&step.h(static_cast<int64_t>(n), 0), cf.hidden));
      rms_norm(rows[n].data(), kvl, W.kv_norm, cf.rms_eps, div_rel);
      rope(rows[n].data() + kvl, rope_d, step.q_pos[n], cf.rope_theta, cand);
      for (int64_t k = 0; k < kvd; ++k) brows.data[static_cast<int64_t>(n) * kvd + k] += rows[n][static_cast<size_t>(k)].e;
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < q_lens[b]; ++i) {
        const int64_t n = first[b] + i, prefix = cache.seqlens[b] - q_lens[b], L = prefix + i + 1;
        auto row = [&](int64_t j) {
          return writes_rows && j >= prefix ? rows[static_cast<size_t>(first[b] + j - prefix)] : exact(cache.row(b, j), kvd);
        };
        std::vector<Evs> c(static_cast<size_t>(L));
        for (int64_t j = 0; j < L; ++j) c[j] = row(j);
        Evs cQ = project(W.W_DQ, 0, ql, exact(&step.h(n, 0), cf.hidden));
        rms_norm(cQ.data(), ql, W.q_norm, cf.rms_eps, div_rel);
        std::vector<double> A(static_cast<size_t>(H * v)), Bm(A.size());
        for (int64_t h = 0; h < H; ++h) {
          const Evs qC = project(W.W_UQ, h * nope, nope, cQ);
          Evs qR = project(W.W_QR, h * rope_d, rope_d, cQ);
          rope(qR.data(), rope_d, step.q_pos[n], cf.rope_theta, cand);
          std::vector<double> mq(static_cast<size_t>(nope), 0.0);  // |W_UQ| |c^Q|: q^C's magnitude, any association
          for (int64_t a = 0; a < nope; ++a)
            for (int64_t k = 0; k < ql; ++k) mq[a] += std::abs(W.W_UQ(h * nope + a, k)) * std::abs(cQ[k].v);
          const auto UK = W.W_UK(h), UV = W.W_UV(h);
          const double g_s = gamma(static_cast<double>(ql + nope + kvl + rope_d + 2));
          const double* s = &scores.data[(n * H + h) * Lmax];
          std::vector<Ev> S(static_cast<size_t>(L));
          double m = -kInf, lo = kInf;
          std::vector<double> qabs(static_cast<size_t>(kvl), 0.0);  // W_UK^T q^C: where c_j's errors go
          for (int64_t l = 0; l < kvl; ++l)
            for (int64_t a = 0; a < nope; ++a) qabs[l] += UK(a, l) * qC[a].v;
          for (int64_t j = 0; j < L; ++j) {
            double err = 0, mag = 0;
            for (int64_t a = 0; a < nope; ++a) {
              double M = 0, K = 0;
              for (int64_t l = 0; l < kvl; ++l) M += std::abs(UK(a, l)) * std::abs(c[j][l].v), K += UK(a, l) * c[j][l].v;
              err += qC[a].e * std::abs(K), mag += mq[a] * M;  // q^C's error meets k^C = W_UK c_j in any association
            }
            for (int64_t l = 0; l < kvl; ++l) err += std::abs(qabs[l]) * c[j][l].e;
            for (int64_t r = 0; r < rope_d; ++r) {
              const Ev k = c[j][kvl + r];
              err += qR[r].e * std::abs(k.v) + std::abs(qR[r].v) * k.e, mag += std::abs(qR[r].v) * std::abs(k.v);
            }
            S[j] = {s[j], sc * (err + g_s * mag) + (u + scale_rel) * std::abs(s[j])};
            bs.data[(n * H + h) * Lmax + j] += S[j].e;
            m = std::max(m, s[j]), lo = std::min(lo, s[j]);
          }
          Sum ds;
          for (int64_t j = 0; j < L; ++j) ds.add(fp64::exp(sub(S[j], {m, 0})));
          Ev d = ds.done();
          const double rescale = cand ? rescale_rel(static_cast<double>(L - 1), m - lo) : 0;
          d.e += rescale * d.v;
          blse.data[n * H + h] += add({m, 0}, fp64::log(d)).e;
          for (int64_t j = 0; j < L; ++j) {
            const Ev P = div(fp64::exp(sub(S[j], {m, 0})), d, div_rel);
            for (int64_t x = 0; x < v; ++x) {
              double M = 0, ME = 0, V = 0;
              for (int64_t l = 0; l < kvl; ++l) {
                M += std::abs(UV(x, l)) * std::abs(c[j][l].v), ME += std::abs(UV(x, l)) * c[j][l].e;
                V += UV(x, l) * c[j][l].v;
              }
              // a_j's error meets v_j = W_UV c_j (any association); the rounding term over |W_UV| |c_j|
              A[h * v + x] += P.e * std::abs(V) + std::abs(P.v) * ME, Bm[h * v + x] += std::abs(P.v) * M;
            }
          }
          for (int64_t x = 0; x < v; ++x) A[h * v + x] += rescale * Bm[h * v + x];  // flash_mla's accumulator
        }
        const double g_u = gamma(static_cast<double>(L + H * kvl + H * v + 2));
        for (int64_t y = 0; y < cf.hidden; ++y) {
          double e = 0, mag = 0;
          for (int64_t k = 0; k < H * v; ++k) e += std::abs(W.W_O(y, k)) * A[k], mag += std::abs(W.W_O(y, k)) * Bm[k];
          bu.data[n * cf.hidden + y] += e + g_u * mag + kEta;
        }
      }
  }
  Tensors t{{"u", to_npy(bu)}, {"lse", to_npy(blse)}, {"scores", to_npy(bs)}};
  if (writes_rows) t["kv_rows"] = to_npy(brows);
  return t;
}

}  // namespace ladder::mla
