// cuda/src/07-precision/attn_bf16_rung.cpp -- stage 07's CUDA rung attn_bf16 (ladder/cuda/07-precision/attn_bf16.hpp):
// the recipe of ladder/07-precision/attn_bf16.hpp run by stage 02's tensor-core forward tiled_bf16, judged by the
// same contract and bound (ladder/07-precision/attn_bound.hpp) as the reference rung.
//
// Where tiled_bf16's arithmetic (cuda/src/02-attention/attention_bf16.cuh; under SIMT the mma adds its products
// one by one into the fp32 accumulator, each addition RNE: cuda/simt/detail/tensor_core.hpp) is the recipe and
// where it is not. u = 2^-24; T = ceil(Lk / bc), the recipe's tiles; Tk = ceil(Lk / 64), the kernel's.
//   Q, K, V   bf16 RNE (formats::to_bf16, here on the host): the recipe's. Head dims: Q, K, V get zero columns up
//             to max(d, dv), and tiled_bf16 pads that to 64 or 128 the same way: a zero column adds 0 * x = 0 to a
//             dot product, exactly, in any rounding, so S has at most d - 1 inexact additions, as in the recipe;
//             V's zero columns give O columns that are 0 and dropped. d, dv > 128: refused.
//   S         fp32 sums of exact bf16 x bf16 products (<= d - 1 roundings), then one product with
//             scale_log2 = float(double(sigma) log2 e) (relative error <= u + 2^-52): in natural units the kernel's
//             score is fp32 S sigma (1 + e1)(1 + e2), d + 1 roundings (one of them u + 2^-52). The bound's
//             gamma_{d+1} covers d + 1 roundings with a margin of (d + 1)(d + 2)/2 u^2 >= 3 u^2 > 2^-52.
//   softmax   online over tiles of 64 keys, not bc: every count the bound takes from T grows with T (T + 1 exps,
//             T rescale products, the gamma_{L+2T} of the sums), so a run of Tk <= T tiles is inside it; bc with
//             Tk > T is refused, naming params.bc. exp2f(x - m') in log2 units is exp(s - m) of the same natural
//             arguments: the subtraction's error u |x - m'| is u |s - m| there, as in the recipe, and exp2f has
//             CUDA's documented 2 ulp, the bound's eps_exp (glibc's, under SIMT, is below 1 ulp).
//   l         per lane, then over the quad (two shuffles): a summation tree of Lk terms (<= Lk - 1 inexact
//             additions on any term's path; masked keys add exact zeros) and Tk rescales: gamma_{Lk+Tk-1}, inside
//             the bound's gamma_{L+2T} with (T + 1) u to spare.
//   P         rounded to bf16 RNE (cvt.rn.bf16x2.f32; formats::to_bf16 under SIMT) before P V, the row sum of the
//             unrounded P: the recipe's.
//   O         fp32 sums of exact bf16 x bf16 products, Tk rescales, then o * fl(1 / l): two roundings where the
//             recipe divides once, so Lk - 1 + Tk + 2 <= L + 2T roundings per term: inside gamma_acc.
//   lse       ln 2 (m' + log2f(l)) in double, rounded once to float: the recipe's final rounding u |lse'|; log2f's
//             1 ulp (CUDA; glibc's less) is 2 u |ln l| <= the bound's eps_exp (log L + 1); the double steps add
//             <= 3 2^-53 |lse'|, below the 2 u the kernel leaves of gl's budget while |lse'| < 2^28, which the
//             check sigma max |q_i| |k_j| <= 2^20 below ensures (|lse| <= max |s| + log Lk, and the score errors D
//             are below 2^-6 sigma max |q_i| |k_j|).
// The bound is proved for this arithmetic, i.e. for the SIMT build. On a GPU the mma's internal accumulation is
// not documented (cuda/simt/README.md: the SIMT bits are not the GPU bits; measurements of V100 / A100 tensor cores
// report truncated fp32 additions): there a pass is evidence, not proof.
#include "ladder/cuda/07-precision/attn_bf16.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::cuda::precision {

namespace lp = ladder::precision;

namespace {

constexpr int64_t kKernelKeys = 64;  // tiled_bf16's keys per tile (attention_bf16.cuh, kBf16Keys)

// The largest Euclidean norm of a row of x [rows, n] after bf16 rounding.
double max_row_norm(const std::vector<float>& x, int64_t rows, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t c = 0; c < n; ++c) {
      const double v = lp::bf16_round(x[static_cast<size_t>(i * n + c)]);
      s += v * v;
    }
    m = std::max(m, std::sqrt(s));
  }
  return m;
}

// x [rows, n] -> bf16 bits [rows, D], columns n .. D - 1 zero.
std::vector<uint16_t> padded_bf16(const std::vector<float>& x, int64_t rows, int64_t n, int64_t D) {
  std::vector<uint16_t> r(static_cast<size_t>(rows * D), 0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < n; ++c)
      r[static_cast<size_t>(i * D + c)] = formats::to_bf16(x[static_cast<size_t>(i * n + c)]);
  return r;
}

}  // namespace

AttnBf16Out attn_bf16_tiled(const lp::AttnOperands& a, float scale) {
  lp::check_attn(a);
  require(a.d <= 128, "cuda 07-precision/attn_bf16: d = {} violates d <= 128 (tiled_bf16's head dims)", a.d);
  require(a.dv <= 128, "cuda 07-precision/attn_bf16: dv = {} violates dv <= 128 (tiled_bf16's head dims)", a.dv);
  require(a.Lq <= 0x7fffffff && a.Lk <= 0x7fffffff, "cuda 07-precision/attn_bf16: Lq = {}, Lk = {} violate <= 2^31 - 1",
          a.Lq, a.Lk);
  // |q'.k'| <= |q'| |k'| (Cauchy-Schwarz): fp32 sums that cannot overflow, and scores small enough for the lse
  // argument above.
  const double qk = max_row_norm(a.q, a.Lq, a.d) * max_row_norm(a.k, a.Lk, a.d);
  require(qk <= 0x1p126, "cuda 07-precision/attn_bf16: inputs q, k: max |q_i| |k_j| = {} violates <= 2^126 (fp32 "
          "scores without overflow)", qk);
  require(static_cast<double>(scale) * qk <= 0x1p20, "cuda 07-precision/attn_bf16: softmax_scale = {} times max "
          "|q_i| |k_j| = {} violates |scores| <= 2^20", scale, qk);
  const int64_t D = std::max(a.d, a.dv);
  ladder::attention::Problem p = ladder::attention::Problem::make(1, 1, a.Lq, a.Lk, D);
  p.scale = static_cast<double>(scale);  // exactly `scale` again in the kernel's float Dims
  DeviceBuffer<uint16_t> q(padded_bf16(a.q, a.Lq, a.d, D)), k(padded_bf16(a.k, a.Lk, a.d, D)),
      v(padded_bf16(a.v, a.Lk, a.dv, D));
  DeviceBuffer<float> o(static_cast<size_t>(a.Lq * D)), lse(static_cast<size_t>(a.Lq));
  attention::tiled_bf16(p, q.data(), k.data(), v.data(), o.data(), lse.data());
  sync();
  const std::vector<float> full = o.to_host();
  AttnBf16Out r{std::vector<float>(static_cast<size_t>(a.Lq * a.dv)), lse.to_host()};
  for (int64_t i = 0; i < a.Lq; ++i)
    std::copy_n(full.begin() + i * D, a.dv, r.o.begin() + i * a.dv);
  return r;
}

Tensors attn_bf16_rung(const lp::Recipe& r, const Tensors& in) {
  require(r.name == "attn_bf16", "cuda 07-precision/attn_bf16: params.recipe = {} violates recipe == attn_bf16",
          r.name);
  const lp::AttnOperands a = lp::attn_operands(in, r);
  const int64_t T = (a.Lk + a.bc - 1) / a.bc, Tk = (a.Lk + kKernelKeys - 1) / kKernelKeys;
  require(Tk <= T, "cuda 07-precision/attn_bf16: params.bc = {} violates ceil(Lk / bc) >= ceil(Lk / 64) = {} "
          "(Lk = {}): tiled_bf16 runs tiles of 64 keys, the bound of bc's {} tiles covers at most {}", a.bc, Tk, a.Lk,
          T, T);
  AttnBf16Out o = attn_bf16_tiled(a, a.sigma);
  return Tensors{{"o", lp::npy_of(std::move(o.o), {a.Lq, a.dv})}, {"lse", lp::npy_of(std::move(o.lse), {a.Lq})}};
}

}  // namespace ladder::cuda::precision
