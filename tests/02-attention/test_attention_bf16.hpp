// tests/02-attention/test_attention_bf16.hpp -- what the tests of stage 02's tensor-core forward share
// (test_attention_bf16.cpp, test_attention_bf16_planted.cu): bf16 inputs, the fp64 oracle on them, the derived
// error bound, and running the kernel.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/02-attention/attention.hpp"
#include "ladder/02-attention/golden.hpp"
#include "ladder/02-attention/golden_cases.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::test::bf16 {

using namespace ladder::attention;
namespace fmts = ladder::formats;

// ---- the bound ----------------------------------------------------------------------------------------------
// Notation, per (batch, head): u = 2^-24 (fp32's unit roundoff; the mma's additions are taken as off by up to
// one ulp, 2u, each, which covers truncating hardware as well as round-to-nearest), A = max_ij sum_k |q_ik k_jk|
// (bounds |s_ij| and the mma's running sums), Vmax = max |v|, N = Nk keys, s = |scale|. Inputs are exact (bf16).
//   S     s_ij = q_i . k_j by d fp32 additions: |ds| <= d 2u A. Into log2 units, s' = fl(fl(s c)), c = fl(scale
//         log2 e) (2 roundings, 2u |s'|), then s' - m' (u |s' - m'| <= 2u |s'|) and exp2f (2 ulp: 4u relative,
//         as an exponent error <= 4u / ln 2 < 8u): every exponent of the softmax is off, in natural units, by
//         delta <= s d 2u A + 4u log2(e) s A + 8u.
//         A perturbation of every exponent by <= delta moves P_ij by <= 2 delta P_ij relative (the normaliser
//         moves too), so O by <= 2 delta Vmax, and logsumexp by <= delta.
//   P     rounded to bf16 before P V (unit roundoff 2^-8): O' = sum_j bf16(p_j) v_j / l with l = sum_j p_j in
//         fp32 (unrounded p), so |dO| <= 2^-8 sum_j p_j |v_j| / l <= 2^-8 Vmax. Second-order products of the
//         terms (2^-8 times the rest) are inside 2^-8 * 2^-7.
//   sums  P V accumulates N products by fp32 additions in the mma (<= N 2u relative to sum_j p_j |v_j|), O is
//         rescaled by alpha once per 64-key tile (<= 2u each, N / 64 tiles), l sums N / 4 values per lane,
//         2 more over the quad, rescaled per tile (<= (N / 4 + 2 + N / 64) u), and O / l rounds twice (2u):
//         in all <= (2N + N / 2 + 8) u <= 4 N u relative to Vmax for N >= 8 (N < 8: use 8 in place of N).
//   => |O - O*| <= (2^-8 (1 + 2^-7) + 2 delta + 4 max(N, 8) u) Vmax                      per element (c = 4).
//   L = ln 2 (m' + log2 l): the exponents (delta), l (the sums term above without P V: <= max(N, 8) u relative,
//      so <= 2 max(N, 8) u absolute in log), log2f (<= 2 ulp of |log2 l| <= log2 N), the sum and the ln 2
//      product (2u |L'|, |L'| <= log2(e) s A + log2 N):
//   => |L - L*| <= delta + 2 max(N, 8) u + 8u (log2(e) s A + log2 N + 1).
// A fully masked row must come out exactly O = 0, L = -inf.
// d is the caller's head dim, also where tiled_bf16 pads it to D = 64 or 128 (d not in {64, 128}): the D - d
// zero columns of Q and K add exact zeros to q_i . k_j (0 * x = 0, s + 0 = s, in any rounding), so at most d of
// its D additions round and the S term above holds with the real d; P, the sums and L do not see d at all.
constexpr double u32 = 0x1p-24;

struct Bound {
  double O = 0, L = 0;
};

inline Bound derive_bound(const Problem& p, const std::vector<double>& Q, const std::vector<double>& K,
                   const std::vector<double>& V, int64_t bh) {
  const int64_t d = p.d;
  double A = 0, vmax = 0;
  for (int64_t i = 0; i < p.Nq; ++i)
    for (int64_t j = 0; j < p.Nk; ++j) {
      double a = 0;
      const double* q = &Q[size_t((bh * p.Nq + i) * d)];
      const double* k = &K[size_t((bh * p.Nk + j) * d)];
      for (int64_t c = 0; c < d; ++c) a += std::abs(q[c] * k[c]);
      A = std::max(A, a);
    }
  for (int64_t j = 0; j < p.Nk * d; ++j) vmax = std::max(vmax, std::abs(V[size_t(bh * p.Nk * d + j)]));
  const double s = std::abs(p.scale), n = double(std::max<int64_t>(p.Nk, 8)), log2e = 1.4426950408889634;
  const double delta = s * double(d) * 2 * u32 * A + 4 * u32 * log2e * s * A + 8 * u32;
  Bound b;
  b.O = (0x1p-8 * (1 + 0x1p-7) + 2 * delta + 4 * n * u32) * vmax;
  b.L = delta + 2 * n * u32 + 8 * u32 * (log2e * s * A + std::log2(n) + 1);
  return b;
}

// Inputs rounded to bf16: the bits for the kernel, their exact values for the oracle.
struct Bf16Case {
  std::string name;
  Problem p;
  std::vector<uint16_t> Q, K, V;
  std::vector<double> Qd, Kd, Vd;
  Array<double> O, L;  // the fp64 oracle on the bf16 values
};

inline Bf16Case make_case(std::string name, const Problem& p, const Array<float>& Q, const Array<float>& K,
                   const Array<float>& V) {
  Bf16Case c{std::move(name), p, {}, {}, {}, {}, {}, {}, {}, {}};
  const auto round = [](const Array<float>& x, std::vector<uint16_t>& bits, std::vector<double>& exact) {
    for (float v : x.data) {
      bits.push_back(fmts::to_bf16(v));
      exact.push_back(double(fmts::from_bf16(bits.back())));
    }
  };
  round(Q, c.Q, c.Qd);
  round(K, c.K, c.Kd);
  round(V, c.V, c.Vd);
  Array<double> q(Q.shape), k(K.shape), v(V.shape);
  q.data = c.Qd, k.data = c.Kd, v.data = c.Vd;
  const Forward<double> f = run_forward<double>(&naive_forward<double>, p, q, k, v);
  c.O = f.O, c.L = f.L;
  return c;
}

inline Bf16Case random_case(int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, bool causal, uint64_t seed) {
  const Problem p = Problem::make(B, H, Nq, Nk, d, causal);
  Rng rng(seed);
  Array<float> Q({B, H, Nq, d}), K({B, H, Nk, d}), V({B, H, Nk, d});
  for (auto* a : {&Q, &K, &V})
    for (float& x : a->data) x = float(rng.normal());
  const std::string name = "random B" + std::to_string(B) + " H" + std::to_string(H) + " q" + std::to_string(Nq) +
                           " k" + std::to_string(Nk) + " d" + std::to_string(d) + (causal ? " causal" : "");
  return make_case(name, p, Q, K, V);
}

inline Bf16Case golden(const std::string& name) {
  const GoldenCase& g = golden_case(name);
  const GoldenInputs in = golden_inputs(g);
  return make_case(name, g.p, in.Q, in.K, in.V);
}

struct Result {
  std::vector<float> O, L;
};

using Launch = void (*)(const cuda::attention::Dims&, const uint16_t*, const uint16_t*, const uint16_t*, float*,
                        float*);

// Through the host API, or (`planted`) a launch of the kernel template that skips it.
inline Result run(const Bf16Case& c, Launch planted = nullptr) {
  cuda::DeviceBuffer<uint16_t> Q(c.Q), K(c.K), V(c.V);
  cuda::DeviceBuffer<float> O(size_t(c.p.B * c.p.H * c.p.Nq * c.p.d)), L(size_t(c.p.B * c.p.H * c.p.Nq));
  if (planted) {
    const cuda::attention::Dims k{int(c.p.B), int(c.p.H), int(c.p.Nq), int(c.p.Nk), int(c.p.d),
                                  float(c.p.scale), c.p.causal, 0};
    planted(k, Q.data(), K.data(), V.data(), O.data(), L.data());
  } else {
    cuda::attention::tiled_bf16(c.p, Q.data(), K.data(), V.data(), O.data(), L.data());
  }
  return {O.to_host(), L.to_host()};
}

// The largest |err| / bound over O and L (a NaN, or a masked row's exact values missed: inf), and those of O
// and L alone in *of, *ol when given.
inline double worst_ratio(const Bf16Case& c, const Result& r, double* of = nullptr, double* ol = nullptr) {
  double wo = 0, wl = 0;
  const auto ratio = [](double err, double bound) { return err <= 1e300 ? err / bound : INFINITY; };  // NaN: inf
  const int64_t d = c.p.d;
  for (int64_t bh = 0; bh < c.p.B * c.p.H; ++bh) {
    const Bound b = derive_bound(c.p, c.Qd, c.Kd, c.Vd, bh);
    for (int64_t i = 0; i < c.p.Nq; ++i) {
      const size_t row = size_t(bh * c.p.Nq + i);
      const double Lw = c.L.data[row], Lg = r.L[row];
      if (std::isinf(Lw)) {  // fully masked: exactly O = 0, L = -inf
        if (!(Lg == Lw)) wl = INFINITY;
        for (int64_t k = 0; k < d; ++k)
          if (r.O[row * size_t(d) + size_t(k)] != 0.0f) wo = INFINITY;
        continue;
      }
      wl = std::max(wl, ratio(std::abs(Lg - Lw), b.L));
      for (int64_t k = 0; k < d; ++k) {
        const size_t e = row * size_t(d) + size_t(k);
        wo = std::max(wo, ratio(std::abs(double(r.O[e]) - c.O.data[e]), b.O));
      }
    }
  }
  if (of) *of = wo;
  if (ol) *ol = wl;
  return std::max(wo, wl);
}

// The check, its failure in the labs' form (tests/lab_check.hpp: "rung R, output X, case C: ..."), so that
// scripts/lab can name the output and show its hint.
inline void check_within_bound(const Bf16Case& c, const Result& r) {
  double ro = 0, rl = 0;
  worst_ratio(c, r, &ro, &rl);
  MESSAGE(c.name << ": max |err| / bound = O " << ro << ", L " << rl);
  if (!(ro <= 1.0)) FAIL_CHECK("rung tiled_bf16, output O, case " << c.name << ": max |err| / bound = " << ro);
  if (!(rl <= 1.0)) FAIL_CHECK("rung tiled_bf16, output L, case " << c.name << ": max |err| / bound = " << rl);
}

// The golden cases tiled_bf16 computes: the plain ones (case.json "rungs" lists the forward rungs there); the
// others (GQA / MQA, d_v != d, windows, seqlens) are the oracle's alone, and tiled_bf16 refuses them by name.
inline std::vector<std::string> golden_plain() {
  std::vector<std::string> r;
  for (const std::string& name : golden_case_names())
    if (golden_case(name).p.plain()) r.push_back(name);
  return r;
}

inline std::vector<Bf16Case> cases() {
  std::vector<Bf16Case> r;
  r.push_back(random_case(1, 2, 128, 128, 64, false, 4201));
  r.push_back(random_case(1, 2, 128, 128, 64, true, 4202));
  r.push_back(random_case(1, 1, 100, 100, 64, true, 4203));   // tails: a partial Q tile and KV tile
  r.push_back(random_case(1, 1, 100, 100, 64, false, 4204));
  r.push_back(random_case(1, 1, 37, 100, 64, true, 4205));    // causal, Nq < Nk: the diagonal shifted
  r.push_back(random_case(1, 1, 100, 37, 64, true, 4206));    // causal, Nq > Nk: fully masked rows and a block
  r.push_back(random_case(1, 1, 128, 128, 128, true, 4207));  // d = 128
  r.push_back(random_case(1, 2, 70, 90, 59, true, 4208));     // d = 59 (not a multiple of 8): padded to 64
  r.push_back(random_case(1, 1, 65, 130, 96, false, 4209));   // d = 96: padded to 128
  r.push_back(random_case(1, 1, 150, 20, 40, true, 4210));    // d = 40 padded, Q blocks 0, 1 fully masked
  // Every golden case it computes, d in {32, 59, 64, 111, 128} (32, 59 padded to 64, 111 to 128); the four with
  // ~1k keys (most of the time here) not in the TSan build, where they take minutes.
  for (const std::string& name : golden_plain()) {
#if defined(SIMT_TSAN)
    if (golden_case(name).p.Nk >= 1000) continue;
#endif
    r.push_back(golden(name));
  }
  return r;
}

inline const std::vector<Bf16Case>& all_cases() {
  static const std::vector<Bf16Case> c = cases();
  return c;
}

}  // namespace ladder::test::bf16
