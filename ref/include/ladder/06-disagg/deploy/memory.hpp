// ladder/06-disagg/deploy/memory.hpp -- stage 06, part 2: per-card memory of a layout, by module.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, MEMORY,
//               traffic, overlap, MTP]
//
// Parameter counts are the model's matrices (DeepSeek-V3, data/models/deepseek-v3.json):
//   MLA down   q_a h x q_lora + kv_a h x (kv_lora + rope)              (DP: whole on every card)
//   MLA up     q_b q_lora x H (nope + rope) + kv_b kv_lora x H (nope + v) (TP cuts heads)
//   MLA out    o_proj H v x h                                          (TP cuts heads)
//   dense FFN  3 h inter (SwiGLU: gate, up, down)      over dense_layers layers
//   expert     3 h moe_inter per MoE layer (routed: per expert; shared: n_shared of them)
//   embedding, LM head   vocab x h each
// Norms, the router (h x E per MoE layer) and the MTP layer's own projection are left out (together
// under 0.2 GB for DeepSeek-V3). A module split tp ways keeps 1/tp of its weights per card; DP keeps all.
// KV per card: MLA keeps one latent row (kv_lora + rope) per token per layer, shared by every head, so a
// TP group of t cards each holds the whole cache of the group's requests; MHA/GQA keep K and V per KV
// head, which TP does split (Huawei report Sec. 3.2.1).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "ladder/06-disagg/deploy/layout.hpp"

namespace ladder::deploy {

inline constexpr double kGB = 1e9;
inline constexpr double kGiB = 1073741824.0;

// Parameters per layer (or per model for embedding / LM head).
inline double mla_down_params(const disagg::ModelSpec& m) {
  return static_cast<double>(m.hidden * m.mla.q_lora_rank + m.hidden * m.mla.kv_dim());
}
inline double mla_up_params(const disagg::ModelSpec& m) {
  return static_cast<double>(m.mla.q_lora_rank * m.heads * m.mla.q_head() + m.mla.kv_lora_rank * m.heads * m.mla.kv_b_rows());
}
inline double mla_out_params(const disagg::ModelSpec& m) { return static_cast<double>(m.heads * m.mla.v_head * m.hidden); }
inline double mla_params(const disagg::ModelSpec& m) { return mla_down_params(m) + mla_up_params(m) + mla_out_params(m); }
inline double dense_ffn_params(const disagg::ModelSpec& m) { return 3.0 * static_cast<double>(m.hidden * m.intermediate); }
inline double expert_params(const disagg::ModelSpec& m) { return 3.0 * static_cast<double>(m.hidden * m.moe_intermediate); }
inline double vocab_params(const disagg::ModelSpec& m) { return static_cast<double>(m.vocab * m.hidden); }

// KV bytes per token per layer of the model's own attention (MLA: the latent row).
inline double mla_kv_row_bytes(const disagg::ModelSpec& m, double kv_bytes) {
  return static_cast<double>(m.mla.kv_dim()) * kv_bytes;
}

// Per-card KV bytes when `total_requests` requests of `context` tokens are spread over `cards` cards
// whose attention runs TP t (t = 1: DP). latent: every card of a TP group holds the group's whole cache;
// kv_heads > 0: K and V of kv_heads heads of head_dim, the heads split over t (never below one head).
inline double kv_bytes_per_card(double total_requests, double context, double layers, double cards, double t,
                                double row_bytes_latent, int64_t kv_heads = 0, int64_t head_dim = 0,
                                double kv_bytes = 2) {
  const double group_requests = total_requests * t / cards;  // a TP group serves t cards' share
  if (kv_heads == 0) return group_requests * context * layers * row_bytes_latent;
  const double heads_per_card = std::max(1.0, static_cast<double>(kv_heads) / t);
  return group_requests * context * layers * 2.0 * heads_per_card * static_cast<double>(head_dim) * kv_bytes;
}

struct MemoryRow {
  std::string module;
  double bytes = 0;
  std::string how;
};

// One kind of card (all cards alike, or CM384's routed-expert and shared-expert cards).
struct CardMemory {
  std::string kind;
  int64_t count = 0;
  std::vector<MemoryRow> rows;
  double total() const {
    double t = 0;
    for (const auto& r : rows) t += r.bytes;
    return t;
  }
};

// Activations at the layout's token count: the largest set of live buffers of one layer on one card
// (the residual stream in and out, plus the widest module's intermediate on this card), in the
// activation dtype. A coarse model: the report does not say what its activation figure counts.
inline double activation_bytes(const Layout& L) {
  const disagg::ModelSpec& m = L.model;
  const double T = static_cast<double>(L.work.tokens_per_card);
  const double gathered = T * static_cast<double>(L.routed.ep);  // tokens on a card after the MoE AllGather
  const double up_rows = T * static_cast<double>(L.mla_up.tp);   // tokens the TP attention group sees
  const double ffn = (L.routed.comm == "allgather" ? gathered : T * static_cast<double>(m.top_k)) *
                     static_cast<double>(m.hidden);
  const double attn = up_rows * static_cast<double>(m.heads / L.mla_up.tp) *
                      static_cast<double>(m.mla.q_head() + m.mla.kv_b_rows());
  return (2.0 * T * static_cast<double>(m.hidden) + std::max(ffn, attn)) * L.bytes.activations;
}

inline std::vector<CardMemory> card_memory(const Layout& L) {
  const disagg::ModelSpec& m = L.model;
  const double w = L.bytes.weights;
  const double mla_l = static_cast<double>(L.mla_layers()), moe_l = static_cast<double>(L.moe_layers());
  std::vector<MemoryRow> common = {
      {"MLA down (q_a, kv_a)", mla_l * mla_down_params(m) * w / static_cast<double>(L.mla_down.tp),
       fmt::format("{} layers, DP{}", L.mla_layers(), L.mla_down.dp)},
      {"MLA up (q_b, kv_b)", mla_l * mla_up_params(m) * w / static_cast<double>(L.mla_up.tp),
       fmt::format("{} layers, /TP{}", L.mla_layers(), L.mla_up.tp)},
      {"MLA out (o_proj)", mla_l * mla_out_params(m) * w / static_cast<double>(L.mla_out.tp),
       fmt::format("{} layers, /TP{}", L.mla_layers(), L.mla_out.tp)},
      {"dense FFN", static_cast<double>(m.dense_layers) * dense_ffn_params(m) * w / static_cast<double>(L.dense_ffn.tp),
       fmt::format("{} layers, /TP{}", m.dense_layers, L.dense_ffn.tp)},
      {"embedding", vocab_params(m) * L.bytes.embedding / static_cast<double>(L.embedding.tp),
       fmt::format("{} x {}, /TP{}", m.vocab, m.hidden, L.embedding.tp)},
      {"LM head", vocab_params(m) * L.bytes.lm_head / static_cast<double>(L.lm_head.tp),
       fmt::format("{} x {}, /TP{}", m.vocab, m.hidden, L.lm_head.tp)},
  };
  // KV: the requests one card's attention group serves, latent rows, MLA + MTP layers.
  const double kv = kv_bytes_per_card(static_cast<double>(L.work.requests_per_card * L.cards),
                                      static_cast<double>(L.work.context), mla_l, static_cast<double>(L.cards),
                                      static_cast<double>(L.mla_up.tp), mla_kv_row_bytes(m, L.bytes.kv));
  common.push_back({"KV cache", kv,
                    fmt::format("{} req x {} tok x {} layers x {} B, TP{}", L.work.requests_per_card, L.work.context,
                                L.mla_layers(), m.mla.kv_dim() * static_cast<int64_t>(L.bytes.kv), L.mla_up.tp)});
  common.push_back({"activations", activation_bytes(L), fmt::format("{} tokens per card", L.work.tokens_per_card)});
  const MemoryRow routed{"routed experts", moe_l * expert_params(m) * w * static_cast<double>(L.routed.per_card(m.experts)),
                         fmt::format("{} per card x {} layers", L.routed.per_card(m.experts), L.moe_layers())};
  const MemoryRow shared{"shared expert",
                         moe_l * expert_params(m) * static_cast<double>(m.shared_experts) * w /
                             static_cast<double>(L.shared_expert.tp),
                         fmt::format("{} layers, /TP{}", L.moe_layers(), L.shared_expert.tp)};
  std::vector<CardMemory> out;
  if (L.routed.cards == L.cards) {
    CardMemory c{"every card", L.cards, common};
    c.rows.push_back(routed);
    c.rows.push_back(shared);
    out.push_back(c);
  } else {
    CardMemory a{"routed-expert card", L.routed.cards, common}, b{"shared-expert card", L.shared_expert.cards, common};
    a.rows.push_back(routed);
    b.rows.push_back(shared);
    out.push_back(a), out.push_back(b);
  }
  return out;
}

// One of the report's printed figures beside ours, with the assumption that links them and the unit
// (GB = 1e9 B or GiB = 2^30 B) under which ours is closer to the printed number.
struct ReportFigure {
  std::string id, what;
  double bytes = 0;      // ours
  double printed = 0;    // the report's number (data/papers/06-disagg-deploy.json)
  std::string assumption;
  double gb() const { return bytes / kGB; }
  double gib() const { return bytes / kGiB; }
  std::string fits() const {
    const double a = gb() - printed, b = gib() - printed;
    return (a < 0 ? -a : a) <= (b < 0 ? -b : b) ? "GB" : "GiB";
  }
};

// Ours for each of the Huawei report's memory figures (Sec. 3.2), computed from the model file (printed
// values are passed in from data/papers/06-disagg-deploy.json by the caller; the id names which is which).
inline std::vector<ReportFigure> report_memory_figures(const disagg::ModelSpec& m) {
  const double moe_main = static_cast<double>(m.layers - m.dense_layers);
  const double kv_4k_72 = 72.0 * 4096.0 * static_cast<double>(m.layers) * mla_kv_row_bytes(m, 2);
  return {
      {"mla_weights", "MLA weights (int8)", static_cast<double>(m.layers + 1) * mla_params(m), 0,
       fmt::format("{} layers + 1 MTP layer x {} params x 1 B", m.layers, mla_params(m))},
      {"expert_58_layers", "one routed expert over the MoE layers (int8)", moe_main * expert_params(m), 0,
       fmt::format("{} MoE layers x 3 x {} x {} x 1 B", m.layers - m.dense_layers, m.hidden, m.moe_intermediate)},
      {"dense_ffn", "dense FFN weights (int8)", static_cast<double>(m.dense_layers) * dense_ffn_params(m), 0,
       fmt::format("{} dense layers x 3 x {} x {} x 1 B", m.dense_layers, m.hidden, m.intermediate)},
      {"embedding", "embedding (or LM head) weights (bf16)", vocab_params(m) * 2, 0,
       fmt::format("{} x {} x 2 B", m.vocab, m.hidden)},
      {"shared_tp8_saving", "shared expert TP8 saving vs DP (int8)", moe_main * expert_params(m) * 7.0 / 8.0, 0,
       fmt::format("{} MoE layers x expert x (1 - 1/8)", m.layers - m.dense_layers)},
      {"vocab_dp4tp8_saving", "embedding + LM head DP4+TP8 saving vs DP (bf16)", 2.0 * vocab_params(m) * 2 * 7.0 / 8.0,
       0, "2 x vocab x h x 2 B x (1 - 1/8)"},
      {"kv_72x4k", "KV cache, 72 requests x 4K tokens (bf16)", kv_4k_72, 0,
       fmt::format("72 x 4096 x {} layers x {} x 2 B", m.layers, m.mla.kv_dim())},
  };
}

}  // namespace ladder::deploy
