// ref/src/06-disagg/roofline.cpp -- stage 06: the roofline step-time model (ladder/06-disagg/roofline.hpp).
#include <fmt/format.h>

#include <algorithm>

#include "ladder/06-disagg/roofline.hpp"

namespace ladder::disagg {
namespace {

Cost scale(const Cost& c, double s) { return Cost{c.flops * s, c.bytes_read * s, c.bytes_written * s, 0}; }
Cost diff(const Cost& a, const Cost& b) { return a + scale(b, -1.0); }

}  // namespace

RooflineModel::RooflineModel(ModelSpec m, GpuSpec g, int64_t gpus, double weight_bytes, double act_bytes)
    : m_(std::move(m)), g_(std::move(g)), wb_(weight_bytes), ab_(act_bytes) {
  require(gpus >= 1, "roofline: gpus = {} violates gpus >= 1", gpus);
  require(g_.tflops > 0, "roofline: gpu {} tflops = {} violates > 0", g_.name, g_.tflops);
  require(g_.hbm_GBps > 0, "roofline: gpu {} hbm_GBps = {} violates > 0", g_.name, g_.hbm_GBps);
  require(m_.layers >= 1 && m_.hidden >= 1 && m_.heads >= 1, "roofline: model {} needs layers, hidden, heads >= 1",
          m_.name);
  require(m_.attention == "mha" || m_.attention == "mla", "roofline: model {} attention = '{}' violates mha | mla",
          m_.name, m_.attention);
  flops_per_s_ = g_.tflops * 1e12 * static_cast<double>(gpus);
  bytes_per_s_ = g_.hbm_GBps * 1e9 * static_cast<double>(gpus);
  // Prefill attention per request: fit c0 + c1 l + c2 l^2 through l = 1, 2, 3 (exact: the Cost is a
  // quadratic in l). Second differences: c2 = (f3 - 2 f2 + f1) / 2, c1 = f2 - f1 - 3 c2, c0 = f1 - c1 - c2.
  const Cost f1 = attention_prefill(1), f2 = attention_prefill(2), f3 = attention_prefill(3);
  pre_[2] = scale(f3 + scale(f2, -2.0) + f1, 0.5);
  pre_[1] = diff(diff(f2, f1), scale(pre_[2], 3.0));
  pre_[0] = diff(diff(f1, pre_[1]), pre_[2]);
  if (m_.attention == "mla") {
    // mla::step_cost is linear in B and in B L: per batch (absorbed weights), per request, per token.
    auto at = [&](int64_t B, int64_t L) { return mla::step_cost(mla::Variant::A_CC_ME, mla::cost_shape(m_.mla, B, L, 2)); };
    const Cost c10 = at(1, 0), c20 = at(2, 0), c11 = at(1, 1);
    dec_fixed_ = diff(scale(c10, 2.0), c20);
    dec_[0] = diff(c20, c10);
    dec_[1] = diff(c11, c10);
  } else {
    const Cost d1 = attention_decode(1), d2 = attention_decode(2);
    dec_[1] = diff(d2, d1);
    dec_[0] = diff(d1, dec_[1]);
  }
}

Cost RooflineModel::attention_prefill(int64_t l) const {
  if (m_.attention == "mla") {  // our formula: causal pairs, 2 H (qk_head + v_head) flops per pair
    const double pairs = static_cast<double>(l) * static_cast<double>(l + 1) / 2, H = static_cast<double>(m_.heads);
    const double qk = static_cast<double>(m_.mla.q_head()), v = static_cast<double>(m_.mla.v_head);
    const double L = static_cast<double>(l);
    return Cost{2 * H * pairs * (qk + v), ab_ * H * L * (2 * qk + v), ab_ * H * L * v, 0};
  }
  // Stage 02's flash Cost, whose per-row rung reads K and V once per visible pair; FA2 on a GPU reuses
  // each K/V load across a Q tile of kQTile rows, so that part of the traffic is divided by kQTile.
  constexpr double kQTile = 128;
  Cost c = attention::flash_forward_cost(attention::Problem::make(1, m_.heads, l, l, m_.head_dim, true), ab_);
  const double q_bytes = ab_ * static_cast<double>(m_.heads * l * m_.head_dim);
  c.bytes_read = q_bytes + (c.bytes_read - q_bytes) / kQTile;
  return c;
}

Cost RooflineModel::attention_decode(int64_t ctx) const {
  if (m_.attention == "mla") return mla::step_cost(mla::Variant::A_CC_ME, mla::cost_shape(m_.mla, 1, ctx, 2));
  return attention::flash_forward_cost(attention::Problem::make(1, m_.heads, 1, ctx, m_.head_dim, false), ab_);
}

double RooflineModel::op_ms(const Cost& c) const {
  return 1e3 * std::max(c.flops / flops_per_s_, (c.bytes_read + c.bytes_written) / bytes_per_s_);
}

// The GEMMs of one layer for `tokens` tokens: attention projections (MHA; for MLA prefill the
// projections, for MLA decode none: mla::step_cost holds them), then the FFN or the MoE.
double RooflineModel::layer_gemms_ms(double tokens, double decode, bool moe) const {
  const double D = static_cast<double>(m_.hidden);
  double ms = 0;
  if (m_.attention == "mha") {
    const double d = static_cast<double>(m_.head_dim), H = static_cast<double>(m_.heads);
    ms += op_ms(gemm_cost(tokens, D, (H + 2 * static_cast<double>(m_.kv_heads)) * d, wb_, ab_));
    ms += op_ms(gemm_cost(tokens, H * d, D, wb_, ab_));
  } else if (decode == 0) {
    const mla::Config& c = m_.mla;
    const double H = static_cast<double>(c.n_heads), ql = static_cast<double>(c.q_lora_rank);
    const double R = static_cast<double>(c.kv_lora_rank);
    ms += op_ms(gemm_cost(tokens, D, ql, wb_, ab_));                                      // W_DQ
    ms += op_ms(gemm_cost(tokens, ql, H * static_cast<double>(c.q_head()), wb_, ab_));    // W_UQ, W_QR
    ms += op_ms(gemm_cost(tokens, D, static_cast<double>(c.kv_dim()), wb_, ab_));         // W_DKV, W_KR
    ms += op_ms(gemm_cost(tokens, R, H * static_cast<double>(c.kv_b_rows()), wb_, ab_));  // kv_b
    ms += op_ms(gemm_cost(tokens, H * static_cast<double>(c.v_head), D, wb_, ab_));       // W_O
  }
  const double mats = m_.ffn == "swiglu" ? 3 : 2;
  if (!moe) {
    const double F = static_cast<double>(m_.intermediate);
    return ms + op_ms(scale(gemm_cost(tokens, D, F, wb_, ab_), mats));
  }
  // MoE, our formula: every token visits top_k routed experts and the shared ones; the weights read
  // are those of the distinct experts touched.
  const double E = static_cast<double>(m_.experts), k = static_cast<double>(m_.top_k);
  const double F = static_cast<double>(m_.moe_intermediate), S = static_cast<double>(m_.shared_experts);
  const double touched = E * (1 - std::pow(1 - k / E, tokens));
  const Cost one = gemm_cost(0, D, F, wb_, ab_);  // weights of one matrix of one expert
  Cost c{mats * 2 * tokens * (k + S) * D * F, mats * (touched + S) * one.bytes_read + tokens * (k + S) * D * ab_,
         tokens * (k + S) * D * ab_, 0};
  return ms + op_ms(c);
}

Cost RooflineModel::fitted_prefill_attention(const BatchStats& b) const {
  return scale(pre_[0], static_cast<double>(b.n)) + scale(pre_[1], b.sum_tokens) + scale(pre_[2], b.sum_sq);
}

Cost RooflineModel::fitted_decode_attention(const BatchStats& b) const {
  Cost c = scale(dec_[0], static_cast<double>(b.n)) + scale(dec_[1], b.sum_tokens);
  if (m_.attention == "mla") c += dec_fixed_;
  return c;
}

double RooflineModel::prefill_ms(const BatchStats& b) const {
  const double n = static_cast<double>(b.n);
  const Cost attn = fitted_prefill_attention(b);
  const double L = static_cast<double>(m_.layers), Ld = static_cast<double>(std::min(m_.dense_layers, m_.layers));
  double ms = L * op_ms(attn);
  if (m_.is_moe())
    ms += Ld * layer_gemms_ms(b.sum_tokens, 0, false) + (L - Ld) * layer_gemms_ms(b.sum_tokens, 0, true);
  else
    ms += L * layer_gemms_ms(b.sum_tokens, 0, false);
  // LM head for the last token of each request.
  return ms + op_ms(gemm_cost(n, static_cast<double>(m_.hidden), static_cast<double>(m_.vocab), wb_, ab_));
}

double RooflineModel::decode_ms(const BatchStats& b) const {
  const double B = static_cast<double>(b.n);
  const Cost attn = fitted_decode_attention(b);
  const double L = static_cast<double>(m_.layers), Ld = static_cast<double>(std::min(m_.dense_layers, m_.layers));
  double ms = L * op_ms(attn);
  if (m_.is_moe())
    ms += Ld * layer_gemms_ms(B, 1, false) + (L - Ld) * layer_gemms_ms(B, 1, true);
  else
    ms += L * layer_gemms_ms(B, 1, false);
  return ms + op_ms(gemm_cost(B, static_cast<double>(m_.hidden), static_cast<double>(m_.vocab), wb_, ab_));
}

std::string RooflineModel::describe() const {
  return fmt::format("roofline: {} on {} ({} TFLOP/s, {} GB/s per worker), per-op max(flops/peak, bytes/bw), summed",
                     m_.name, g_.name, flops_per_s_ / 1e12, bytes_per_s_ / 1e9);
}

}  // namespace ladder::disagg
