// ladder/06-disagg/presets.hpp -- stage 06: the data/ files' numbers in code, for goldens and notebooks.
//
// The golden writer must not read files (it runs inside the library, anywhere), so the model, GPU and
// coefficient numbers it uses are here; tests/06-disagg/test_disagg.cpp loads data/models, data/gpus and
// data/disagg and requires the same numbers, so the two cannot drift apart.
#pragma once
#include "ladder/06-disagg/roofline.hpp"
#include "ladder/06-disagg/step_model.hpp"

namespace ladder::disagg {

// data/disagg/distserve-opt-13b-a100.json
inline DistServeCoefficients distserve_opt13b_a100() {
  DistServeCoefficients c;
  c.prefill[0] = 18.10, c.prefill[1] = 0.1019, c.prefill[2] = 7.12e-6;
  c.decode[0] = 19.93, c.decode[1] = 6.27e-4, c.decode[2] = 0.0385;
  return c;
}

// data/models/opt-13b.json
inline ModelSpec opt_13b() {
  ModelSpec m;
  m.name = "OPT-13B";
  m.layers = 40, m.hidden = 5120, m.heads = 40, m.kv_heads = 40, m.head_dim = 128, m.vocab = 50272;
  m.attention = "mha", m.ffn = "gelu", m.intermediate = 20480;
  return m;
}

// data/models/deepseek-v3.json
inline ModelSpec deepseek_v3() {
  ModelSpec m;
  m.name = "DeepSeek-V3 (671B total, 37B active per token)";
  m.layers = 61, m.hidden = 7168, m.heads = 128, m.kv_heads = 128, m.head_dim = 56, m.vocab = 129280;
  m.attention = "mla", m.ffn = "swiglu", m.intermediate = 18432;
  m.dense_layers = 3, m.experts = 256, m.top_k = 8, m.shared_experts = 1, m.moe_intermediate = 2048;
  m.mla.hidden = 7168, m.mla.n_heads = 128, m.mla.q_lora_rank = 1536, m.mla.kv_lora_rank = 512;
  m.mla.qk_nope = 128, m.mla.qk_rope = 64, m.mla.v_head = 128;
  return m;
}

// data/gpus/a100-80gb.json and h800-sxm.json at bf16
inline GpuSpec a100_80gb() { return GpuSpec{"NVIDIA A100 80GB SXM", 312, 2039, 80, 600}; }
inline GpuSpec h800_sxm() { return GpuSpec{"NVIDIA H800 SXM 80GB", 989, 3350, 80, 400}; }

}  // namespace ladder::disagg
