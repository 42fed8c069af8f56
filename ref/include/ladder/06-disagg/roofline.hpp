// ladder/06-disagg/roofline.hpp -- stage 06, rung 1b: a roofline step-time model from the stages' Cost.
//
//   06 disagg   [step-time model] -> event simulator -> KV-cache migration
//
// Per layer, each op's time is max(flops / peak, bytes / HBM bandwidth) (LLM-Viewer's per-op roofline),
// and the ops are summed without overlap. The ops and where their Cost comes from:
//   dense GEMMs (projections, dense FFN, LM head)  gemm_cost below: 2 m k n flops, weights + activations
//   MHA attention                                  stage 02: attention::flash_forward_cost (causal prefill;
//                                                  one query row over ctx keys for decode)
//   MLA decode attention                           stage 03: mla::step_cost (A_CC_ME, weights absorbed)
//   MLA prefill attention                          our formula: 2 H pairs (qk_head + v_head) flops
//   MoE (routed + shared experts)                  our formula: top_k experts
//                                                  per token; weights of the distinct experts a step
//                                                  touches, E (1 - (1 - k/E)^T) under uniform routing
// A worker of `gpus` devices is modelled as one device with gpus x the FLOP/s and bandwidth (perfect
// tensor parallelism, no communication); the per-module layouts of ladder/deploy (`ladder plan`) are computed beside it.
// Per-request prefill Cost is quadratic in l and decode Cost linear in ctx, so we evaluate the
// stages' Cost at l = 1, 2, 3 (ctx = 0, 1) and keep the coefficients; a batch is then one sum.
#pragma once
#include <cmath>
#include <string>

#include "ladder/02-attention/cost.hpp"
#include "ladder/core/cost.hpp"
#include "ladder/06-disagg/step_model.hpp"
#include "ladder/03-mla/cost.hpp"

namespace ladder::disagg {

// A model config (data/models/*.json, "model" section).
struct ModelSpec {
  std::string name;
  int64_t layers = 1, hidden = 1, heads = 1, kv_heads = 1, head_dim = 1, vocab = 1;
  std::string attention = "mha";  // "mha" (GQA when kv_heads < heads) or "mla"
  mla::Config mla;                // attention == "mla"
  std::string ffn = "gelu";       // "gelu" (2 matrices) or "swiglu" (3 matrices)
  int64_t intermediate = 1;       // dense FFN width
  int64_t dense_layers = 0;       // MoE models: the first dense_layers layers are dense, the rest MoE
  int64_t experts = 0, top_k = 0, shared_experts = 0, moe_intermediate = 0;
  double kv_elem_bytes = 2;       // KV cache dtype
  bool is_moe() const { return experts > 0; }
  // KV bytes per token over all layers: MHA/GQA keep K and V per KV head; MLA one latent row.
  double kv_bytes_per_token() const {
    const double per_layer = attention == "mla" ? static_cast<double>(mla.kv_dim())
                                                : 2.0 * static_cast<double>(kv_heads * head_dim);
    return per_layer * static_cast<double>(layers) * kv_elem_bytes;
  }
};

// A GPU spec (data/gpus/*.json).
struct GpuSpec {
  std::string name;
  double tflops = 0;      // dense peak at the compute dtype
  double hbm_GBps = 0;    // HBM bandwidth
  double hbm_GB = 0;      // capacity
  double link_GBps = 0;   // interconnect to another worker (KV transfer default)
};

// One GEMM of m tokens by a k x n weight: weights read once, activations in and out.
inline Cost gemm_cost(double m, double k, double n, double wbytes, double abytes) {
  return Cost{2 * m * k * n, k * n * wbytes + m * k * abytes, m * n * abytes, 0};
}

class RooflineModel final : public StepModel {
 public:
  RooflineModel(ModelSpec m, GpuSpec g, int64_t gpus, double weight_bytes = 2, double act_bytes = 2);
  double prefill_ms(const BatchStats& b) const override;
  double decode_ms(const BatchStats& b) const override;
  std::string describe() const override;
  // Per-layer attention Cost of one request, as the stages compute it (tests check the fitted
  // coefficients against these at other lengths).
  Cost attention_prefill(int64_t l) const;
  Cost attention_decode(int64_t ctx) const;
  // The same per layer for a whole batch, from the fitted coefficients (what the step times use).
  Cost fitted_prefill_attention(const BatchStats& b) const;
  Cost fitted_decode_attention(const BatchStats& b) const;
  const ModelSpec& model() const { return m_; }

 private:
  double op_ms(const Cost& c) const;
  double layer_gemms_ms(double tokens, double moe_tokens_routed, bool moe) const;
  ModelSpec m_;
  GpuSpec g_;
  double flops_per_s_, bytes_per_s_, wb_, ab_;
  Cost pre_[3];  // attention prefill per request: c0 + c1 l + c2 l^2 (each field)
  Cost dec_[2];  // attention decode per request: c0 + c1 ctx (weights of MLA kept apart below)
  Cost dec_fixed_;  // per-batch part of MLA decode (absorbed weights, read once per step)
};

}  // namespace ladder::disagg
