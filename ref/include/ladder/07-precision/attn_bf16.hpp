// ladder/07-precision/attn_bf16.hpp -- rung (f): a bf16 tiled attention forward with float32 accumulation, as
// FlashAttention-2 runs on tensor cores (Dao, "FlashAttention-2", arXiv 2307.08691, Algorithm 1; its kernels
// convert P to the input type before the P V product and keep the row sum of the float32 P).
//
// The recipe (attn_bf16_forward): Q [Lq, d], K [Lk, d], V [Lk, dv] float32 -> bf16, round to nearest even
// (core/formats.hpp); per query row, key tiles of Bc in ascending order (stage 02's tiled loop order):
//   S_j = fl32(sum_d q_d k_jd) * sigma      (bf16 x bf16 products are exact in float32; float32 sums)
//   m' = max(m, max_j S_j), alpha = expf(m - m'), P_j = expf(S_j - m'),
//   l = alpha l + sum_j P_j                  (float32, the unrounded P: FA2's row sum)
//   O = alpha O + sum_j bf16(P_j) V_j        (P rounded to bf16 RNE; bf16 x bf16 products exact, float32 sums)
// then o = O / l, lse = m + logf(l). Outputs o [Lq, dv], lse [Lq].
//
// The oracle (attn_bf16_oracle) is attention in float64 on the float32 inputs (unrounded): the bound
// (attn_bound.hpp) carries the bf16 rounding of Q, K and V (each value's error |bf16(x) - x|, exact: RNE is
// deterministic; at most 2^-8 |x|), P's rounding (u_p = 2^-8), the exps (2 ulp) and the float32 sums over
// L + T terms (T = ceil(Lk / Bc) tiles). What it tells apart (tests/07-precision/test_kv_attn.cpp): P truncated
// where RNE is declared (the golden case attn_bf16_ptrunc places P just above 1/2, where truncation errs by
// 2^-7 relative and the bound allows 2^-8), O accumulated in bf16 where float32 is declared (attn_bf16_k1024:
// near-uniform weights over 1024 positive values, where a bf16 accumulator stagnates).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/07-precision/attn_bound.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/formats.hpp"

namespace ladder::precision {

struct AttnOperands {
  int64_t Lq = 0, Lk = 0, d = 0, dv = 0;
  std::vector<float> q, k, v;  // [Lq, d], [Lk, d], [Lk, dv]
  float sigma = 0;             // the softmax scale in float32 (params.softmax_scale; 1/sqrt(d) by default)
  int64_t bc = 64;             // Bc, keys per tile (params.bc)
};

struct AttnResult {
  std::vector<float> o, lse;  // [Lq, dv], [Lq]
};

inline float bf16_round(float x, formats::Round r = formats::Round::nearest_even) {
  return formats::from_bf16(formats::to_bf16(x, r));
}

inline void check_attn(const AttnOperands& a) {
  require(a.Lq >= 1 && a.Lk >= 1 && a.d >= 1 && a.dv >= 1, "attn_bf16: Lq = {}, Lk = {}, d = {}, dv = {} violate >= 1",
          a.Lq, a.Lk, a.d, a.dv);
  require(a.bc >= 1, "attn_bf16: bc = {} violates bc >= 1", a.bc);
  require(std::isfinite(a.sigma) && a.sigma > 0, "attn_bf16: softmax_scale = {} violates finite > 0", a.sigma);
}

// The reference rung (header). p_round: P's rounding before P V (the recipe declares nearest_even).
inline AttnResult attn_bf16_forward(const AttnOperands& a, formats::Round p_round = formats::Round::nearest_even) {
  check_attn(a);
  std::vector<float> qb(a.q.size()), kb(a.k.size()), vb(a.v.size());
  for (size_t i = 0; i < qb.size(); ++i) qb[i] = bf16_round(a.q[i]);
  for (size_t i = 0; i < kb.size(); ++i) kb[i] = bf16_round(a.k[i]);
  for (size_t i = 0; i < vb.size(); ++i) vb[i] = bf16_round(a.v[i]);
  AttnResult r{std::vector<float>(static_cast<size_t>(a.Lq * a.dv)), std::vector<float>(static_cast<size_t>(a.Lq))};
  std::vector<float> S(static_cast<size_t>(a.bc)), acc(static_cast<size_t>(a.dv));
  for (int64_t i = 0; i < a.Lq; ++i) {
    const float* qi = &qb[static_cast<size_t>(i * a.d)];
    float m = -INFINITY, l = 0;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j0 = 0; j0 < a.Lk; j0 += a.bc) {
      const int64_t n = std::min(a.bc, a.Lk - j0);
      float mt = m;
      for (int64_t j = 0; j < n; ++j) {
        const float* kj = &kb[static_cast<size_t>((j0 + j) * a.d)];
        float dot = 0;
        for (int64_t c = 0; c < a.d; ++c) dot += qi[c] * kj[c];
        S[static_cast<size_t>(j)] = dot * a.sigma;
        mt = std::max(mt, S[static_cast<size_t>(j)]);
      }
      const float alpha = m == -INFINITY ? 0.0f : std::exp(m - mt);
      float rowsum = 0;
      for (int64_t c = 0; c < a.dv; ++c) acc[static_cast<size_t>(c)] *= alpha;
      for (int64_t j = 0; j < n; ++j) {
        const float p = std::exp(S[static_cast<size_t>(j)] - mt);
        rowsum += p;
        const float pb = bf16_round(p, p_round);
        const float* vj = &vb[static_cast<size_t>((j0 + j) * a.dv)];
        for (int64_t c = 0; c < a.dv; ++c) acc[static_cast<size_t>(c)] += pb * vj[c];
      }
      l = alpha * l + rowsum;
      m = mt;
    }
    for (int64_t c = 0; c < a.dv; ++c) r.o[static_cast<size_t>(i * a.dv + c)] = acc[static_cast<size_t>(c)] / l;
    r.lse[static_cast<size_t>(i)] = m + std::log(l);
  }
  return r;
}

struct AttnOracle {
  std::vector<double> o, o_bound, lse, lse_bound;  // [Lq, dv], [Lq]
};

// |bf16(x) - x| for each value (RNE: deterministic, so exact), as doubles.
inline std::vector<double> bf16_errors(const std::vector<float>& x) {
  std::vector<double> e(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    e[i] = std::fabs(static_cast<double>(bf16_round(x[i])) - x[i]);
    require(e[i] <= 0x1p-8 * std::fabs(x[i]) + 0x1p-134, "attn_bf16: bf16({}) errs by {}, above 2^-8 |x|", x[i], e[i]);
  }
  return e;
}

inline AttnOracle attn_bf16_oracle(const AttnOperands& a) {
  check_attn(a);
  const std::vector<double> q(a.q.begin(), a.q.end()), k(a.k.begin(), a.k.end()), v(a.v.begin(), a.v.end());
  const std::vector<double> eq = bf16_errors(a.q), ek = bf16_errors(a.k), ev = bf16_errors(a.v);
  const RowRecipe rr{(a.Lk + a.bc - 1) / a.bc, 0x1p-8, true};
  AttnOracle o;
  for (int64_t i = 0; i < a.Lq; ++i) {
    const RowOracle r = attend_row_bound(&q[static_cast<size_t>(i * a.d)], &eq[static_cast<size_t>(i * a.d)], a.d,
                                         k.data(), ek.data(), a.d, v.data(), ev.data(), a.dv, a.dv, a.Lk,
                                         static_cast<double>(a.sigma), rr);
    o.o.insert(o.o.end(), r.o.begin(), r.o.end());
    o.o_bound.insert(o.o_bound.end(), r.bound.begin(), r.bound.end());
    o.lse.push_back(r.lse);
    o.lse_bound.push_back(r.lse_bound);
  }
  return o;
}

}  // namespace ladder::precision
