// ladder/06-disagg/deploy/traffic.hpp -- stage 06, part 2: per-step communication, FLOPs and bytes per module,
// and the step time of a layout from the stage's roofline rule.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               TRAFFIC, overlap, MTP]
//
// Collectives, bytes one card moves (n = the gathered tensor over a group of g = k nodes x c cards):
//   AllGather      receives (g - 1) n / g: hierarchically (k - 1) n / g between nodes (its counterparts on
//                  the other nodes), then (c - 1) k n / g inside the node (Huawei report Sec. 5.1:
//                  at 4 nodes a card gets 3 BS h from other nodes)
//   ReduceScatter  the mirror image: the same bytes sent
//   All2All        a card's payload s (MoE dispatch: BS top_k h) goes (k - 1) / k off the node and
//                  (c - 1) / g to node peers (Huawei report: 8 experts x 3/4 remote = 6 BS h at 4 nodes)
// A collective's time is max(intra / intra_GBps, inter / (inter_GBps_per_node / c)): the node's link is
// shared by its cards, and the hierarchical algorithms overlap the two levels (Huawei report Sec. 5.1, 6.2).
// Per-op time is the roofline's max(flops / peak, bytes / HBM bandwidth), summed without overlap
// (ladder/06-disagg/roofline.hpp); overlap is ladder/06-disagg/deploy/overlap.hpp.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "ladder/06-disagg/deploy/memory.hpp"

namespace ladder::deploy {

struct Collective {
  std::string name, kind;  // kind: allgather, reducescatter, all2all
  double per_layer_count = 0;  // how many layers run it per step
  double intra = 0, inter = 0;  // bytes per card per occurrence
};

// Bytes one card receives (AllGather) or sends (ReduceScatter) for a gathered tensor of n bytes over
// a group of g cards, c per node.
inline Collective gather_like(std::string name, std::string kind, double n, int64_t g, int64_t c, double count) {
  const int64_t cc = std::min(g, c);
  const double k = static_cast<double>(g / cc), gd = static_cast<double>(g);
  return {std::move(name), std::move(kind), count, (static_cast<double>(cc) - 1) * k * n / gd, (k - 1) * n / gd};
}
// All2All of a per-card payload s over g cards, c per node (uniform destinations).
inline Collective all_to_all(std::string name, double s, int64_t g, int64_t c, double count) {
  const int64_t cc = std::min(g, c);
  const double k = static_cast<double>(g / cc), gd = static_cast<double>(g);
  return {std::move(name), "all2all", count, s * (static_cast<double>(cc) - 1) / gd, s * (k - 1) / k};
}

inline std::vector<Collective> collectives(const Layout& L) {
  const disagg::ModelSpec& m = L.model;
  const double T = static_cast<double>(L.work.tokens_per_card), h = static_cast<double>(m.hidden);
  const double cb = L.bytes.comm, ab = L.bytes.activations;
  const double mla_l = static_cast<double>(L.mla_layers()), moe_l = static_cast<double>(L.moe_layers());
  const int64_t c = L.cards_per_node;
  std::vector<Collective> out;
  if (L.mla_up.tp > 1) {  // DP -> TP after the down projections: gather the compressed q and kv rows
    const double row = static_cast<double>(m.mla.q_lora_rank + m.mla.kv_dim());
    out.push_back(gather_like("MLA DP->TP AllGather (q_a, kv_a rows)", "allgather",
                              T * row * cb * static_cast<double>(L.mla_up.tp), L.mla_up.tp, c, mla_l));
    // TP -> the output projection's layout: each card's heads for the tokens of its o_proj group
    out.push_back(all_to_all("MLA TP->DP All2All (attention out)", T * static_cast<double>(L.mla_up.tp) *
                                 static_cast<double>(m.heads / L.mla_up.tp * m.mla.v_head) * cb,
                             L.mla_up.tp, c, mla_l));
  }
  if (L.mla_out.tp > 1)
    out.push_back(gather_like("MLA o_proj ReduceScatter", "reducescatter",
                              T * h * ab * static_cast<double>(L.mla_out.tp), L.mla_out.tp, c, mla_l));
  if (L.dense_ffn.tp > 1) {
    const double n = T * h * static_cast<double>(L.dense_ffn.tp);
    out.push_back(gather_like("dense FFN AllGather", "allgather", n * cb, L.dense_ffn.tp, c,
                              static_cast<double>(m.dense_layers)));
    out.push_back(gather_like("dense FFN ReduceScatter", "reducescatter", n * ab, L.dense_ffn.tp, c,
                              static_cast<double>(m.dense_layers)));
  }
  if (L.routed.comm == "allgather") {
    const double n = T * h * static_cast<double>(L.routed.ep);
    out.push_back(gather_like("MoE AllGather", "allgather", n * cb, L.routed.ep, c, moe_l));
    out.push_back(gather_like("MoE ReduceScatter", "reducescatter", n * ab, L.routed.ep, c, moe_l));
  } else {
    const double s = T * static_cast<double>(m.top_k) * h;
    out.push_back(all_to_all("MoE dispatch All2All", s * cb, L.routed.ep, c, moe_l));
    out.push_back(all_to_all("MoE combine All2All", s * ab, L.routed.ep, c, moe_l));
  }
  if (L.lm_head.tp > 1)
    out.push_back(gather_like("LM head AllGather", "allgather", T * h * ab * static_cast<double>(L.lm_head.tp),
                              L.lm_head.tp, c, 1));
  return out;
}

inline double collective_ms(const Layout& L, const Collective& x) {
  const double c = static_cast<double>(std::min(L.cards, L.cards_per_node));
  return 1e3 * std::max(x.intra / (L.intra_GBps * 1e9), x.inter / (L.inter_GBps_node / c * 1e9));
}

// FLOPs and HBM bytes of one module per step on one card, and its roofline time.
struct ModuleCost {
  std::string module;
  double layers = 0, flops = 0, bytes = 0;  // per layer
  bool gemm = true;                          // int8 GEMM peak (else the bf16 peak: attention core)
};

inline std::vector<ModuleCost> module_costs(const Layout& L) {
  const disagg::ModelSpec& m = L.model;
  const double T = static_cast<double>(L.work.tokens_per_card), h = static_cast<double>(m.hidden);
  const double w = L.bytes.weights, ab = L.bytes.activations;
  const double R = static_cast<double>(L.work.requests_per_card), ctx = static_cast<double>(L.work.context);
  const double mla_l = static_cast<double>(L.mla_layers()), moe_l = static_cast<double>(L.moe_layers());
  const auto gemm = [&](double rows, double k, double n) {  // rows x k by a k x n weight
    return std::pair<double, double>{2 * rows * k * n, k * n * w + rows * (k + n) * ab};
  };
  std::vector<ModuleCost> out;
  const double q_lora = static_cast<double>(m.mla.q_lora_rank), kv_dim = static_cast<double>(m.mla.kv_dim());
  auto [f1, b1] = gemm(T, h, q_lora + kv_dim);
  out.push_back({"MLA down", mla_l, f1, b1});
  // Up projections and attention on the card's heads for its TP group's tokens (decode: absorbed).
  const double t = static_cast<double>(L.mla_up.tp), rows = T * t, Hl = static_cast<double>(m.heads) / t;
  const double nope = static_cast<double>(m.mla.qk_nope), rope = static_cast<double>(m.mla.qk_rope);
  const double kvl = static_cast<double>(m.mla.kv_lora_rank), v = static_cast<double>(m.mla.v_head);
  auto [f2, b2] = gemm(rows, q_lora, Hl * (nope + rope));
  if (L.phase == "decode") {
    // W_UK absorbed into q (nope -> kv_lora), scores over ctx latent rows, out through W_UV.
    const double fa = rows * Hl * (2 * nope * kvl + 2 * ctx * (kvl + rope) + 2 * ctx * kvl + 2 * kvl * v);
    const double ba = Hl * kvl * (nope + v) * w + R * t * ctx * kv_dim * L.bytes.kv;
    out.push_back({"MLA up (q_b)", mla_l, f2, b2});
    out.push_back({"MLA attention (absorbed, KV read)", mla_l, fa, ba, false});
  } else {
    // Prefill: kv_b expands every token's latent, causal attention over the request's tokens.
    auto [f3, b3] = gemm(rows, kvl, Hl * (nope + v));
    const double per_req = rows / std::max(1.0, R * t);  // tokens per request
    const double fa = rows * Hl * (2 * (nope + rope) + 2 * v) * (per_req + 1) / 2;
    out.push_back({"MLA up (q_b, kv_b)", mla_l, f2 + f3, b2 + b3});
    out.push_back({"MLA attention (causal)", mla_l, fa, rows * Hl * (nope + rope + nope + v + v) * ab, false});
  }
  const double to = static_cast<double>(L.mla_out.tp);
  auto [f4, b4] = gemm(T * to, static_cast<double>(m.heads) * v / to, h);
  out.push_back({"MLA out", mla_l, f4, b4});
  const double tf = static_cast<double>(L.dense_ffn.tp);
  auto [f5, b5] = gemm(T * tf, h, 3 * static_cast<double>(m.intermediate) / tf);
  out.push_back({"dense FFN", static_cast<double>(m.dense_layers), f5, b5});
  // Routed: the EP group's tokens x top_k spread uniformly over experts; every local expert touched.
  const double e = static_cast<double>(L.routed.per_card(m.experts));
  const double group_tokens = T * static_cast<double>(L.cards);  // every card runs attention on T tokens
  const double rows_e = group_tokens * static_cast<double>(m.top_k) / static_cast<double>(m.experts + L.routed.redundant);
  const double mi = static_cast<double>(m.moe_intermediate);
  out.push_back({"routed experts", moe_l, e * 2 * rows_e * 3 * h * mi, e * (3 * h * mi * w + rows_e * 2 * (h + mi) * ab)});
  const double ts = static_cast<double>(L.shared_expert.tp);
  const double shared_rows = L.routed.cards == L.cards ? T * ts : T * static_cast<double>(L.cards) /
                                                                      static_cast<double>(L.shared_expert.cards);
  auto [f6, b6] = gemm(shared_rows, h, 3 * mi * static_cast<double>(m.shared_experts) / ts);
  out.push_back({"shared expert", moe_l, f6, b6});
  const double tl = static_cast<double>(L.lm_head.tp);
  auto [f7, b7] = gemm(T * tl, h, static_cast<double>(m.vocab) / tl);
  out.push_back({"LM head", 1, f7, b7 * L.bytes.lm_head / w});
  return out;
}

inline double module_ms(const Layout& L, const ModuleCost& c) {
  const double peak = (c.gemm ? L.gemm_tflops : L.gpu.tflops) * 1e12;
  return 1e3 * c.layers * std::max(c.flops / peak, c.bytes / (L.gpu.hbm_GBps * 1e9));
}

struct StepTime {
  double compute_ms = 0, comm_ms = 0;
  double total_ms() const { return compute_ms + comm_ms; }  // no overlap
};

inline StepTime step_time(const Layout& L) {
  StepTime s;
  for (const auto& c : module_costs(L)) s.compute_ms += module_ms(L, c);
  for (const auto& x : collectives(L)) s.comm_ms += x.per_layer_count * collective_ms(L, x);
  return s;
}

}  // namespace ladder::deploy
