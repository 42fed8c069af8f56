// tools/ladder/07-precision/reproduce.cpp -- `ladder reproduce 07-precision`: DeepSeek-V3's accumulation
// curve, computed with ladder/07-precision/fp8_block.hpp's emulated accumulator.
//
// Two random matrices X [M x K], W [K x N] (N(0, 1) entries) are quantised to E4M3 with one amax/448
// scale per row of X and per column of W (one scale along K, so the accumulator sums the products of
// the codes as the tensor core does). For each K the products are summed
//   (1) in a 14-bit accumulator over all of K (no promotion), rounding to nearest even,
//   (2) the same, truncating (round toward zero: the other plausible hardware behaviour),
//   (3) in a 14-bit RNE accumulator promoted to float32 every N_C = 128 elements (DeepSeek-V3's fix),
// and compared with the exact float64 sum of the same quantised products (quantisation error excluded:
// this is the accumulation's error alone). Printed per K: the maximum relative error over elements,
// max |c - o| / |o| taken over the elements with |o| >= the median |o| (an element near 0 has no
// meaningful relative error), and the worst |c - o| / G (G = sum |products|, what the derived bound
// scales) beside the derived bound's own value of that ratio.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include "cli.hpp"
#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/07-precision/smoothquant.hpp"
#include "ladder/06-disagg/deploy/memory.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "ladder/06-disagg/roofline.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/rng.hpp"
#include "source_dir.hpp"

namespace ladder::cli {

namespace {

struct Curve {
  double rel[3] = {0, 0, 0};  // max relative error (upper half of |o|): no promo RNE, no promo RTZ, promo
  double g[3] = {0, 0, 0};    // max |c - o| / G
};

Curve curve_at(int64_t k, int64_t m, int64_t n, uint64_t seed) {
  Mat<float> x(m, k), w(k, n);
  Rng rng(seed);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < k; ++c) x(i, c) = static_cast<float>(rng.normal());
  for (int64_t c = 0; c < k; ++c)
    for (int64_t j = 0; j < n; ++j) w(c, j) = static_cast<float>(rng.normal());
  const quant::Quantized xq = quant::quantize(x, quant::Elem::e4m3, 1, k), wq = quant::quantize(w, quant::Elem::e4m3, k, 1);
  const Mat<float> a = precision::code_values(xq), b = precision::code_values(wq);
  std::vector<double> o(static_cast<size_t>(m * n)), g(o.size()), c[3];
  for (auto& v : c) v.resize(o.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double t = static_cast<double>(xq.scales(i, 0)) * wq.scales(0, j);
      precision::LimitedAccumulator rne{14, precision::AccRound::nearest_even, 0}, rtz{14, precision::AccRound::toward_zero, 0};
      double exact = 0, abs = 0;
      float promoted = 0;
      precision::LimitedAccumulator chunk{14, precision::AccRound::nearest_even, 0};
      for (int64_t kk = 0; kk < k; ++kk) {
        const float p = a(i, kk) * b(kk, j);  // exact
        exact += p;                           // exact in float64 (multiples of 2^-18 below 2^40)
        abs += std::fabs(p);
        rne.add(p);
        rtz.add(p);
        chunk.add(p);
        if ((kk + 1) % 128 == 0 || kk + 1 == k) {
          promoted = promoted + chunk.value();
          chunk.units = 0;
        }
      }
      o[e] = exact * t;
      g[e] = abs * t;
      c[0][e] = static_cast<double>(rne.value()) * t;
      c[1][e] = static_cast<double>(rtz.value()) * t;
      c[2][e] = static_cast<double>(promoted) * t;
    }
  std::vector<double> mag(o.size());
  for (size_t e = 0; e < o.size(); ++e) mag[e] = std::fabs(o[e]);
  std::nth_element(mag.begin(), mag.begin() + static_cast<long>(mag.size() / 2), mag.end());
  const double median = mag[mag.size() / 2];
  Curve cv;
  for (int s = 0; s < 3; ++s)
    for (size_t e = 0; e < o.size(); ++e) {
      const double err = std::fabs(c[s][e] - o[e]);
      if (std::fabs(o[e]) >= median && o[e] != 0) cv.rel[s] = std::max(cv.rel[s], err / std::fabs(o[e]));
      if (g[e] > 0) cv.g[s] = std::max(cv.g[s], err / g[e]);
    }
  return cv;
}

// SmoothQuant's table (rung (b), smoothquant.hpp): the A8W8 output's relative error over a.
std::string smoothquant_section() {
  const std::string intro = fmt::format(
      "\n## 07-precision: SmoothQuant A8W8 on outlier channels (smoothquant.hpp)\n\nX [{} x {}] N(0,1) with {} "
      "channels x{:.0f} (seed {}), W [{} x {}] N(0,1/K), weights int8 per channel; relative Frobenius error of the "
      "output against X W in float64.\n",
      precision::kSqTokens, precision::kSqK, precision::kOutliers, precision::kOutlierGain, precision::kSqSeed,
      precision::kSqK, precision::kSqN);
  fmt::print("{}", intro);
  std::string md = intro + "\n| a | per-tensor int8 | per-token int8 | smoothed, per-tensor | smoothed, per-token |\n"
                           "|---|---|---|---|---|\n";
  fmt::print("{:>5} {:>16} {:>16} {:>20} {:>20}\n", "a", "per-tensor", "per-token", "smoothed per-tensor",
             "smoothed per-token");
  for (const precision::SqRow& r : precision::smoothquant_table(precision::sq_data())) {
    fmt::print("{:>5.2f} {:>15.3f}% {:>15.3f}% {:>19.3f}% {:>19.3f}%\n", r.alpha, 100 * r.tensor_plain,
               100 * r.token_plain, 100 * r.tensor_smooth, 100 * r.token_smooth);
    md += fmt::format("| {:.2f} | {:.3f}% | {:.3f}% | {:.3f}% | {:.3f}% |\n", r.alpha, 100 * r.tensor_plain,
                      100 * r.token_plain, 100 * r.tensor_smooth, 100 * r.token_smooth);
  }
  return md;
}

// Rung (d) on the same experts in both recipes (the inputs of golden case moe_a8w4_g128): the recipe's rounding,
// measured against the fp64 oracle of its own codes beside the derived bound (moe_quant.hpp), and the
// quantisation's cost, measured against the unquantised float64 product beside its bound from
// core/quant.hpp's dequant_bound: |o - x w| <= sum_k dx_k (|w_k| + dw_k) + |x_k| dw_k.
std::string expert_error_table() {
  Tensors in;
  nlohmann::json params;
  precision::golden_case("moe_a8w4_g128", in, params);
  precision::MoeOperands m;
  m.x = from_npy<float>(in.at("x"), "x").mat();
  const Array<float> w = from_npy<float>(in.at("w"), "w");
  m.w = w.data;
  m.E = w.shape[0], m.N = w.shape[2];
  m.topk_idx = npy_as_int64(in.at("topk_idx"), "topk_idx");
  const int64_t K = m.x.cols(), N = m.N, k = m.topk_idx.shape[1];
  std::string md = fmt::format("\n| experts in rung (d) (case moe_a8w4_g128: {} tokens x top-{}, K = {}, N = {}) | max |y - o| "
                               "| its bound there | worst |y - o| / bound | rel. error vs unquantised x w (fp64) | worst "
                               "|y - x w| / its bound |\n|---|---|---|---|---|---|\n", m.x.rows(), k, K, N);
  for (const char* name : {"moe_a8w8", "moe_a8w4"}) {
    const precision::Recipe r = precision::parse_recipe(nlohmann::json{{"recipe", name}});
    const precision::MoeQuantResult q = precision::moe_quant_experts(m.x, m.w, m.E, N, m.topk_idx, r.name == "moe_a8w4", r.group);
    const precision::OracleOut o = precision::oracle_moe_recipe(r, m);
    const Array<double> oy = npy_as_double(o.outputs.at("y"));
    double emax = 0, bat = 0, ratio = 0, qratio = 0, num = 0, den = 0;
    for (int64_t a = 0; a < q.y.rows(); ++a) {
      const int64_t t = a / k, e = m.topk_idx.data[static_cast<size_t>(a)];
      for (int64_t n = 0; n < N; ++n) {
        const size_t i = static_cast<size_t>(a * N + n);
        const double err = std::fabs(q.y(a, n) - oy.data[i]), b = o.bound.data[i];
        if (err >= emax) emax = err, bat = b;
        ratio = std::max(ratio, err / b);
        double exact = 0, qb = 0;
        for (int64_t c = 0; c < K; ++c) {
          const double xv = m.x(t, c), wv = m.w[static_cast<size_t>((e * K + c) * N + n)];
          const double dx = quant::dequant_bound(quant::Elem::int8, q.xq.scales(t, 0), xv);
          const float ws = q.wq.scales[static_cast<size_t>(e)](c / q.wq.group, n);
          const double dw = quant::dequant_bound(q.wq.elem, ws, wv);
          exact += xv * wv;
          qb += dx * (std::fabs(wv) + dw) + std::fabs(xv) * dw;
        }
        num += (q.y(a, n) - exact) * (q.y(a, n) - exact);
        den += exact * exact;
        qratio = std::max(qratio, std::fabs(q.y(a, n) - exact) / (qb + b));
      }
    }
    md += fmt::format("| {} | {:.2e} | {:.2e} | {:.3f} | {:.3f}% | {:.3f} |\n", name, emax, bat, ratio,
                      100 * std::sqrt(num / den), qratio);
  }
  return md;
}

// Rung (e) on its golden case: the reference rung's u against the fp64 oracle on the unquantised cache (the error
// the cache format costs), as max |u - o| / max |o|, and the worst ratio to the derived bound (kv_quant.hpp).
std::string kv_error_cells(const char* name) {
  Tensors in;
  nlohmann::json params;
  precision::golden_case(name, in, params);
  const precision::Recipe r = precision::parse_recipe(params);
  const Array<double> got = npy_as_double(precision::run_attn_recipe(r, in).at("u"));
  const precision::AttnRecipeOracle o = precision::oracle_attn_recipe(r, in);
  const Array<double> want = npy_as_double(o.outputs.at("u"));
  double emax = 0, omax = 0, ratio = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got.data[i] - want.data[i]);
    emax = std::max(emax, e), omax = std::max(omax, std::fabs(want.data[i]));
    ratio = std::max(ratio, e / o.bound.at("u").data[i]);
  }
  return fmt::format("{:.3f}% | {:.3f} ({})", 100 * emax / omax, ratio, name);
}

// Rung (f) over the sequence length: Q [8 x 64], K, V [L x 64] N(0, 1) (seed 7100 + L), tiles of 64 keys; the
// reference rung against fp64 attention on the float32 inputs, beside the derived bound (attn_bf16.hpp).
std::string attn_bf16_section(bool quick) {
  const std::string intro =
      "\n## 07-precision: bf16 tiled attention, float32 accumulation (rung (f), attn_bf16.hpp)\n\nQ [8 x 64], K, V [L x "
      "64] N(0,1), Q K V rounded to bf16 (RNE), P to bf16 before P V, tiles of 64 keys; against fp64 attention on the "
      "float32 inputs. Errors measured; bounds derived (attn_bound.hpp).\n";
  const std::string head = "\n| L | max abs err of o | max err / max \\|o\\| | worst err / bound | max bound / max \\|o\\| | "
                           "max lse err | worst lse err / bound |\n|---|---|---|---|---|---|---|\n";
  fmt::print("{}{}", intro, head);
  std::string md = intro + head;
  for (const int64_t L : quick ? std::vector<int64_t>{128, 1024, 4096} : std::vector<int64_t>{128, 512, 2048, 8192, 32768}) {
    precision::AttnOperands a;
    a.Lq = 8, a.Lk = L, a.d = 64, a.dv = 64, a.bc = 64, a.sigma = static_cast<float>(1 / std::sqrt(64.0));
    Rng rng(7100 + static_cast<uint64_t>(L));
    for (auto* t : {&a.q, &a.k, &a.v}) {
      t->resize(static_cast<size_t>((t == &a.q ? a.Lq : L) * 64));
      for (auto& x : *t) x = static_cast<float>(rng.normal());
    }
    const precision::AttnResult c = precision::attn_bf16_forward(a);
    const precision::AttnOracle o = precision::attn_bf16_oracle(a);
    double emax = 0, omax = 0, ratio = 0, bmax = 0, lmax = 0, lratio = 0;
    for (size_t i = 0; i < o.o.size(); ++i) {
      const double e = std::fabs(c.o[i] - o.o[i]);
      emax = std::max(emax, e), omax = std::max(omax, std::fabs(o.o[i])), bmax = std::max(bmax, o.o_bound[i]);
      ratio = std::max(ratio, e / o.o_bound[i]);
    }
    for (size_t i = 0; i < o.lse.size(); ++i) {
      const double e = std::fabs(c.lse[i] - o.lse[i]);
      lmax = std::max(lmax, e), lratio = std::max(lratio, e / o.lse_bound[i]);
    }
    const std::string row = fmt::format("| {} | {:.2e} | {:.3f}% | {:.3f} | {:.3f}% | {:.2e} | {:.3f} |\n", L, emax,
                                        100 * emax / omax, ratio, 100 * bmax / omax, lmax, lratio);
    fmt::print("{}", row);
    md += row;
  }
  return md;
}

// Byte tables (derived from stage 06's DeepSeek-V3 model data, ladder/06-disagg/presets.hpp): the MLA
// cache row per token per layer, and one routed expert's weights, in each format.
std::string bytes_section() {
  const disagg::ModelSpec m = disagg::deepseek_v3();
  const double lat = static_cast<double>(m.mla.kv_lora_rank), rope = static_cast<double>(m.mla.qk_rope);
  const double row = static_cast<double>(m.mla.kv_dim()), layers = static_cast<double>(m.layers);
  // FlashMLA's FP8 record: the latent in E4M3, one fp32 scale per 128 latent values, RoPE part in bf16.
  const double fp8 = lat + 4 * (lat / 128) + 2 * rope;
  struct KvRow { const char* what; double bytes; std::string err; };
  const KvRow kv[3] = {{"bf16 (stage 03's table, elem_bytes 2)", deploy::mla_kv_row_bytes(m, 2), "- | -"},
                       {"int8, one fp32 scale per token", row + 4, kv_error_cells("kv_int8_mla")},
                       {"FlashMLA FP8 record (E4M3 latent, fp32 scale / 128, bf16 RoPE)", fp8, kv_error_cells("kv_fp8_mla")}};
  std::string md = fmt::format(
      "\n## 07-precision: bytes (derived from DeepSeek-V3's model data: kv_lora {}, rope {}, {} layers, hidden {}, "
      "moe_intermediate {})\n\n| KV cache per token | bytes per layer | all layers | vs bf16 | rung (e): max \\|u - u_exact\\| "
      "/ max \\|u_exact\\| (measured) | worst err / derived bound (golden case) |\n|---|---|---|---|---|---|\n",
      m.mla.kv_lora_rank, m.mla.qk_rope, m.layers, m.hidden, m.moe_intermediate);
  for (const KvRow& r : kv)
    md += fmt::format("| {} | {:.0f} | {:.0f} | {:.3f} | {} |\n", r.what, r.bytes, r.bytes * layers, r.bytes / kv[0].bytes,
                      r.err);
  // One routed expert: gate and up [hidden x moe_inter], down [moe_inter x hidden]. A8W8: int8 + one fp32
  // scale per output channel; A8W4: packed int4 + one fp32 scale per group of 128 along K per column.
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.moe_intermediate);
  const double params = deploy::expert_params(m);
  const double out_ch = 2 * f + h, groups = 2 * (h / 128) * f + (f / 128) * h;
  struct ExRow { const char* what; double bytes; };
  const ExRow ex[3] = {{"bf16", 2 * params}, {"A8W8 (int8, fp32 scale per channel)", params + 4 * out_ch},
                       {"A8W4 (int4, fp32 scale per 128-group)", params / 2 + 4 * groups}};
  const double per_token = static_cast<double>(m.top_k + m.shared_experts);
  md += fmt::format("\n| expert weights ({:.0f} parameters) | bytes per expert | per token per MoE layer ({} routed + "
                    "{} shared experts read, batch 1) | vs bf16 |\n|---|---|---|---|\n",
                    params, m.top_k, m.shared_experts);
  for (const ExRow& r : ex)
    md += fmt::format("| {} | {:.0f} | {:.0f} | {:.3f} |\n", r.what, r.bytes, r.bytes * per_token, r.bytes / ex[0].bytes);
  md += expert_error_table();
  // Stage 06's roofline decode step (its weight_bytes term: bytes per weight, every weight, scales not counted).
  const disagg::GpuSpec gpu = disagg::h800_sxm();
  const int64_t gpus = 8;
  md += fmt::format("\n| decode step, stage 06's roofline ({} x {}, context 4096) | weight bytes / param | B = 1 (ms) | "
                    "B = 64 (ms) |\n|---|---|---|---|\n", gpus, gpu.name);
  const std::pair<const char*, double> wb[3] = {{"bf16", 2.0}, {"A8W8", 1.0}, {"A8W4", 0.5}};
  for (const auto& [what, bytes] : wb) {
    const disagg::RooflineModel rm(m, gpu, gpus, bytes, 2);
    const double b1 = rm.decode_ms({1, 4096, 0}), b64 = rm.decode_ms({64, 64 * 4096.0, 0});
    md += fmt::format("| {} | {:g} | {:.3f} | {:.3f} |\n", what, bytes, b1, b64);
  }
  md += "\nBytes and times derived (computed from the model data, the formats and stage 06's roofline), not measured; "
        "the errors of rung (d) measured on the golden case's experts, beside their derived bounds.\n";
  fmt::print("{}", md);
  return md;
}

}  // namespace

std::string reproduce_07_precision(const ReproduceContext& ctx) {
  const auto j = read_json(ladder::source_dir() / "data" / "papers" / "07-precision.json");
  std::map<std::string, double> paper;
  for (const auto& e : j.at("entries")) paper[e.at("id").get<std::string>()] = e.at("value").get<double>();
  const int64_t mn = ctx.quick ? 16 : 64;
  const std::vector<int64_t> ks = ctx.quick ? std::vector<int64_t>{128, 1024, 4096}
                                            : std::vector<int64_t>{128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  std::string md = "## 07-precision: FP8 GEMM accumulation error vs K (DeepSeek-V3 §3.3)\n\n";
  const std::string intro = fmt::format(
      "X [{0} x K] and W [K x {0}] N(0,1), E4M3 codes (amax/448 per row / column); the products summed in a "
      "14-bit accumulator, against the exact sum of the same codes.\nmax rel err: over the elements with "
      "|o| >= median |o|; err/G: worst |c - o| / sum|products|, beside the derived bound's (fp8_block.hpp).\n",
      mn);
  fmt::print("{}", intro);
  md += intro + "\n| K | no promotion, RNE: max rel err | no promotion, truncating | promoted every 128 | "
                "err/G no promo (bound) | err/G promoted (bound) |\n|---|---|---|---|---|---|\n";
  fmt::print("{:>6} {:>14} {:>14} {:>14} {:>24} {:>24}\n", "K", "no-promo RNE", "no-promo RTZ", "promoted/128",
             "err/G no-promo (bound)", "err/G promoted (bound)");
  for (const int64_t k : ks) {
    const Curve cv = curve_at(k, mn, mn, 7000 + static_cast<uint64_t>(k));
    precision::Fp8Recipe whole{14, precision::AccRound::nearest_even, 128, 0};
    // Without promotion the accumulator sums all K: the bound's inner term is gamma_{K-1}(2^-14) (+ the
    // final scaling, two float32 roundings), valid while (K - 1) 2^-14 < 1.
    // Past (K - 1) 2^-14 = 1/2 the worst case exceeds the sum itself: printed as "> 1".
    const double b_whole = (k - 1) * 0x1p-14 < 0.5 ? precision::gamma_n(static_cast<double>(k - 1), 0x1p-14) +
                                                         precision::gamma_n(2, 0x1p-24)
                                                   : INFINITY;
    const double b_promo = precision::fp8_bound(whole, k, 1.0);
    const std::string bw = std::isfinite(b_whole) ? fmt::format("{:.2e}", b_whole) : std::string("> 1");
    fmt::print("{:>6} {:>13.3f}% {:>13.3f}% {:>13.4f}% {:>13.2e} ({}) {:>13.2e} ({:.2e})\n", k, 100 * cv.rel[0],
               100 * cv.rel[1], 100 * cv.rel[2], cv.g[0], bw, cv.g[2], b_promo);
    md += fmt::format("| {} | {:.3f}% | {:.3f}% | {:.4f}% | {:.2e} ({}) | {:.2e} ({:.2e}) |\n", k, 100 * cv.rel[0],
                      100 * cv.rel[1], 100 * cv.rel[2], cv.g[0], bw, cv.g[2], b_promo);
  }
  const std::string src = fmt::format(
      "DeepSeek-V3 report (data/papers/07-precision.json): about {} bits kept; max relative error nearly {:.0f}% at "
      "K = 4096 without promotion; fixed by promoting every N_C = {}.\n",
      paper.at("v3_acc_bits"), 100 * paper.at("v3_max_rel_err_k4096"), paper.at("v3_nc"));
  fmt::print("{}", src);
  md += "\n" + src;
  md += smoothquant_section();
  md += bytes_section();
  md += attn_bf16_section(ctx.quick);
  return md;
}

}  // namespace ladder::cli
