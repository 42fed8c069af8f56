// ladder/03-mla/config.hpp -- stage 03: the dimensions of one MLA layer (DeepSeek-V2 and small test shapes).
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
// > 03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)   <- this stage
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Names follow DeepSeek-V2's config.json (hidden_size, num_attention_heads, q_lora_rank, kv_lora_rank,
// qk_nope_head_dim, qk_rope_head_dim, v_head_dim); data/models/deepseek-v2.json holds the same numbers
// with their sources, and tests/03-mla/test_mla_model.cpp checks that file against deepseek_v2().
#pragma once
#include <cmath>
#include <cstdint>

#include "ladder/core/error.hpp"

namespace ladder::mla {

struct Config {
  int64_t hidden = 5120;        // hidden_size: h_t, u_t
  int64_t n_heads = 128;        // num_attention_heads: H
  int64_t q_lora_rank = 1536;   // c_t^Q = W_DQ h_t
  int64_t kv_lora_rank = 512;   // c_t^KV, the compressed (latent) cache
  int64_t qk_nope = 128;        // q^C, k^C per head (no position)
  int64_t qk_rope = 64;         // q^R per head, k^R shared by all heads (RoPE)
  int64_t v_head = 128;         // v per head
  double rope_theta = 10000.0;  // RoPE base
  double rms_eps = 1e-6;        // RMSNorm epsilon (q_a_layernorm, kv_a_layernorm)
  double softmax_scale = 0.0;   // 1/sqrt(qk_nope + qk_rope) unless set (yarn mscale off, as the notes' code)

  int64_t q_head() const { return qk_nope + qk_rope; }        // 192: one head of q and of CD's k
  int64_t kv_dim() const { return kv_lora_rank + qk_rope; }   // 576: one compressed cache row [c_KV | k_pe]
  int64_t kv_b_rows() const { return qk_nope + v_head; }      // 256: one head's slice of kv_b (W_UK; W_UV)
  double scale() const {
    return softmax_scale > 0 ? softmax_scale : 1.0 / std::sqrt(static_cast<double>(q_head()));
  }
};

// DeepSeek-V2 (236B) attention, as in deepseekv2-profile's mla/config.json; softmax scale 1/sqrt(192).
inline Config deepseek_v2() { return Config{}; }

// The small shape of the goldens and unit tests: every dimension different, so a transposed or
// swapped weight cannot line up by accident (8 heads, kv_lora 64, rope 16, nope 32, v 32, hidden 256).
inline Config small_config() {
  Config c;
  c.hidden = 256;
  c.n_heads = 8;
  c.q_lora_rank = 96;
  c.kv_lora_rank = 64;
  c.qk_nope = 32;
  c.qk_rope = 16;
  c.v_head = 32;
  return c;
}

// The SIMT tests' shape (CUDA threads run as fibers on the CPU, so every FLOP counts): still all
// dimensions distinct, nope != v, kv_lora not a multiple of the GEMM tile.
inline Config tiny_config() {
  Config c;
  c.hidden = 48;
  c.n_heads = 4;
  c.q_lora_rank = 40;
  c.kv_lora_rank = 36;
  c.qk_nope = 12;
  c.qk_rope = 8;
  c.v_head = 10;
  return c;
}

// Every rung calls this first; the message names the field, its value and the constraint.
inline void check_config(const Config& c, const char* who) {
  auto positive = [who](const char* name, int64_t v) {
    require(v >= 1, "mla {}: config.{} = {} violates {} >= 1", who, name, v, name);
  };
  positive("hidden", c.hidden);
  positive("n_heads", c.n_heads);
  positive("q_lora_rank", c.q_lora_rank);
  positive("kv_lora_rank", c.kv_lora_rank);
  positive("qk_nope", c.qk_nope);
  positive("qk_rope", c.qk_rope);
  positive("v_head", c.v_head);
  require(c.qk_rope % 2 == 0, "mla {}: config.qk_rope = {} violates qk_rope even (RoPE rotates pairs of dims)", who,
          c.qk_rope);
  require(std::isfinite(c.rope_theta) && c.rope_theta > 1, "mla {}: config.rope_theta = {} violates rope_theta > 1",
          who, c.rope_theta);
  require(std::isfinite(c.rms_eps) && c.rms_eps > 0, "mla {}: config.rms_eps = {} violates rms_eps > 0", who,
          c.rms_eps);
  require(std::isfinite(c.softmax_scale) && c.softmax_scale >= 0,
          "mla {}: config.softmax_scale = {} violates softmax_scale >= 0 (0 = 1/sqrt(qk_nope + qk_rope))", who,
          c.softmax_scale);
}

}  // namespace ladder::mla
