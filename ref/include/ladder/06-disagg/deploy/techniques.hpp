// ladder/06-disagg/deploy/techniques.hpp -- stage 06, part 3: the Huawei report's Sec. 5-6 techniques as
// switches on the deployment step model, with counted bytes and a per-layer overlap graph.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, overlap, MTP, TECHNIQUES]
//
// Each switch changes one mechanism, priced from the model's shapes (data/models), the layout and the card's
// quoted rates (data/gpus); no efficiency is applied and nothing is fitted to the report's gains:
//   flashcomm          (Sec. 5.1) prefill TP MLA: the AllReduce (bf16) after the output projection becomes a
//                      ReduceScatter (bf16) + an AllGather of the normalised, int8-quantised input of the next
//                      layer. Counted factor of the MLA traffic: (ab + cb) / (2 ab) = 0.75 at bf16 / int8.
//   tp_dp_conversion   (Sec. 5.1, 3.2.1) prefill MLA as DP -> TP -> DP+TP2: the compressed q / kv rows are
//                      gathered (int8), the attention output goes back by All2All, only a TP2 ReduceScatter
//                      is left (the layout's own collectives, traffic.hpp). Builds on flashcomm.
//   comm_comm          (Sec. 5.2) norm + quantisation moved before the MoE (and dense FFN) AllGather: int8
//                      activations + one fp32 scale per token, sent as two concurrent collectives; off: the
//                      bf16 activations. The launch latency the concurrency hides is not priced (no cited size).
//   prefetch           (Sec. 5.2) while the MoE ReduceScatter runs, HBM is idle: the next layer's MLA weights
//                      and KV are read ahead, min(those bytes, t_RS x HBM bandwidth), and leave the MLA's HBM
//                      time. The cache's capacity is not modelled (no cited figure): an upper bound.
//   gate_overlap       (Sec. 5.2, Fig. 10) gate and shared expert on the compute stream while the AllGather
//                      runs on the communication stream; off: every op waits for the previous one.
//   fused_dispatch     (Sec. 6.2) MoeDistributeDispatch / Combine: the InitialRouting permutation copy before
//                      the All2All and its inverse after the combine (each a read + a write of T top_k h in
//                      HBM) disappear. An AllGather / ReduceScatter layout (the A2) has no such copy.
//   hierarchical       (Sec. 6.2, Fig. 11) a collective's inter- and intra-node phases pipelined: time =
//                      max(intra, inter) instead of intra + inter.
// The step is the makespan of the per-layer graph (overlap.hpp's schedule()): it is never below the critical
// path of the graph nor above the sum of its ops; with every switch off it is that sum.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "ladder/06-disagg/deploy/overlap.hpp"

namespace ladder::deploy {

struct Switches {
  bool flashcomm = false, tp_dp_conversion = false, comm_comm = false, prefetch = false, gate_overlap = false,
       fused_dispatch = false, hierarchical = false;
  static Switches all() { return {true, true, true, true, true, true, true}; }
};

// Bytes one card moves per step, by level, summed over every collective of the step.
struct CommBytes {
  double intra = 0, inter = 0;
  double total() const { return intra + inter; }
};

struct TechniqueStep {
  double step_ms = 0;          // makespan of the step's graph
  double sum_ms = 0;           // every op one after the other (the graph's upper bound)
  double critical_ms = 0;      // the longest dependency chain, streams ignored (its lower bound)
  CommBytes comm, mla_comm;    // all collectives; the MLA's alone (prefill TP)
  double prefetched_bytes = 0; // per MoE layer, read ahead during the ReduceScatter
  // One layer's op times (ms): what the mechanism checks of the switches compare against.
  double mla_ms = 0, mla_comm_ms = 0, gate_ms = 0, shared_ms = 0, gather_ms = 0, gate_comm_ms = 0, routed_ms = 0,
         scatter_ms = 0, permute_ms = 0, mla_after_prefetch_ms = 0;
  double permute_bytes = 0;    // per MoE layer, HBM bytes of the InitialRouting copies (All2All, unfused)
};

namespace techniques_detail {

inline double collective_time(const Layout& L, const Collective& x, bool hierarchical) {
  const double c = static_cast<double>(std::min(L.cards, L.cards_per_node));
  const double a = x.intra / (L.intra_GBps * 1e9), b = x.inter / (L.inter_GBps_node / c * 1e9);
  return 1e3 * (hierarchical ? std::max(a, b) : a + b);
}

inline bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// The prefill MLA's collectives per layer: the layout's (conversion), or a TP MLA over the whole mla_up group
// with an AllReduce (as ReduceScatter + AllGather in bf16) or FlashComm's bf16 ReduceScatter + int8 AllGather.
inline std::vector<Collective> mla_collectives(const Layout& L, const Switches& s) {
  std::vector<Collective> out;
  if (L.mla_up.tp == 1) return out;  // DP MLA (decode): no MLA collective
  if (s.tp_dp_conversion) {
    for (const Collective& x : collectives(L))
      if (starts(x.name, "MLA")) out.push_back(x);
    return out;
  }
  const int64_t g = L.mla_up.tp;
  const double n = static_cast<double>(L.work.tokens_per_card * g * L.model.hidden), one = 1;
  const double ab = L.bytes.activations, cb = s.flashcomm ? L.bytes.comm : ab;
  out.push_back(gather_like("MLA o_proj ReduceScatter", "reducescatter", n * ab, g, L.cards_per_node, one));
  out.push_back(gather_like("MLA input AllGather", "allgather", n * cb, g, L.cards_per_node, one));
  return out;
}

// MoE and dense FFN collectives with the comm_comm switch applied to their AllGathers.
inline std::vector<Collective> ffn_collectives(const Layout& L, const Switches& s) {
  std::vector<Collective> out;
  const double h = static_cast<double>(L.model.hidden);
  for (Collective x : collectives(L)) {
    if (starts(x.name, "MLA")) continue;
    const bool gather = x.kind == "allgather" || x.name.find("dispatch") != std::string::npos;
    if (gather && !starts(x.name, "LM head")) {
      // per token: h x cb (+ a 4-byte scale) with the switch, h x ab without it
      const double per_token = s.comm_comm ? h * L.bytes.comm + 4 : h * L.bytes.activations;
      const double f = per_token / (h * L.bytes.comm);
      x.intra *= f, x.inter *= f;
    }
    out.push_back(x);
  }
  return out;
}

}  // namespace techniques_detail

inline TechniqueStep technique_step(const Layout& L, const Switches& s) {
  using namespace techniques_detail;
  const disagg::ModelSpec& m = L.model;
  const double T = static_cast<double>(L.work.tokens_per_card), h = static_cast<double>(m.hidden);
  TechniqueStep r;
  // Module times per layer. Without the conversion a prefill TP MLA runs the down projections on every token of
  // its group (replicated, the input was gathered) and the output projection as TP over the whole group.
  Layout Lm = L;
  const bool tp_mla = L.mla_up.tp > 1 && !s.tp_dp_conversion;
  if (tp_mla) Lm.mla_out = Par{1, L.mla_up.tp, L.mla_up.tp};
  double mla_ms = 0, mla_bytes = 0, shared = 0, routed = 0, dense = 0, lm = 0;
  std::vector<std::pair<double, double>> mla_parts;  // (flops time, HBM bytes) per MLA module, in order
  for (ModuleCost c : module_costs(Lm)) {
    if (starts(c.module, "MLA down") && tp_mla) {  // the same weights, every token of the group
      const double w = h * static_cast<double>(m.mla.q_lora_rank + m.mla.kv_dim()) * L.bytes.weights;
      c.flops *= static_cast<double>(L.mla_up.tp), c.bytes = w + (c.bytes - w) * static_cast<double>(L.mla_up.tp);
    }
    c.layers = 1;
    const double ms = module_ms(L, c);
    const double peak = (c.gemm ? L.gemm_tflops : L.gpu.tflops) * 1e12;
    if (starts(c.module, "MLA")) {
      mla_ms += ms, mla_bytes += c.bytes;
      mla_parts.push_back({1e3 * c.flops / peak, c.bytes});
    } else if (c.module == "shared expert") shared = ms;
    else if (c.module == "routed experts") routed = ms;
    else if (c.module == "dense FFN") dense = ms;
    else if (c.module == "LM head") lm = ms;
  }
  const double gate = 1e3 * 2 * T * h * static_cast<double>(m.experts) / (L.gpu.tflops * 1e12);
  // Unfused All2All: the InitialRouting copy (read + write of T top_k h) before dispatch and its inverse after.
  const bool a2a = L.routed.comm != "allgather";
  if (a2a && !s.fused_dispatch)
    r.permute_bytes = 2 * T * static_cast<double>(m.top_k) * h * (L.bytes.comm + L.bytes.activations);
  const double permute_ms = 1e3 * r.permute_bytes / (L.gpu.hbm_GBps * 1e9);

  // Collectives, timed and counted.
  double mla_comm = 0, moe_gather = 0, moe_scatter = 0, dense_gather = 0, dense_scatter = 0, lm_comm = 0;
  const double moe_l = static_cast<double>(L.moe_layers()), mla_l = static_cast<double>(L.mla_layers());
  for (const Collective& x : mla_collectives(L, s)) {
    mla_comm += collective_time(L, x, s.hierarchical);
    r.mla_comm.intra += mla_l * x.intra, r.mla_comm.inter += mla_l * x.inter;
  }
  r.comm = r.mla_comm;
  for (const Collective& x : ffn_collectives(L, s)) {
    const double t = collective_time(L, x, s.hierarchical);
    const bool before = x.kind == "allgather" || x.name.find("dispatch") != std::string::npos;
    if (starts(x.name, "MoE")) (before ? moe_gather : moe_scatter) += t;
    else if (starts(x.name, "dense")) (before ? dense_gather : dense_scatter) += t;
    else lm_comm += t;
    r.comm.intra += x.per_layer_count * x.intra, r.comm.inter += x.per_layer_count * x.inter;
  }
  // Gate results (top_k fp32 weights + int32 indices per token) go with the AllGather (Fig. 10).
  const double gate_bytes = T * static_cast<double>(m.top_k) * 8;
  const Collective gx = gather_like("MoE gate results AllGather", "allgather", gate_bytes * static_cast<double>(L.routed.ep),
                                    L.routed.ep, L.cards_per_node, moe_l);
  const double gate_comm = a2a ? 0 : collective_time(L, gx, s.hierarchical);
  if (!a2a) r.comm.intra += moe_l * gx.intra, r.comm.inter += moe_l * gx.inter;

  // Prefetch: during the ReduceScatter, the next layer's MLA bytes, in module order, while time lasts.
  double mla_pref_ms = mla_ms;
  if (s.prefetch) {
    double budget = std::min(mla_bytes, moe_scatter * 1e-3 * L.gpu.hbm_GBps * 1e9);
    r.prefetched_bytes = budget;
    mla_pref_ms = 0;
    for (auto [fl, by] : mla_parts) {
      const double take = std::min(budget, by);
      budget -= take;
      mla_pref_ms += std::max(fl, 1e3 * (by - take) / (L.gpu.hbm_GBps * 1e9));
    }
  }

  // The per-layer graph (stream 0 compute, 1 communication), chained over the layers.
  std::vector<Op> ops;
  int last = -1, prev_shared = -1;
  const auto add = [&](const std::string& name, int stream, double ms, std::vector<int> deps) {
    std::vector<int> d;
    for (int x : deps)
      if (x >= 0) d.push_back(x);
    ops.push_back({name, stream, ms, d});
    return static_cast<int>(ops.size()) - 1;
  };
  for (int64_t i = 0; i < L.mla_layers(); ++i) {
    const bool moe = i >= m.dense_layers;
    const bool after_moe = i > m.dense_layers;  // a MoE layer's ReduceScatter came just before
    const int att = add("attention", 0, after_moe ? mla_pref_ms : mla_ms, {last, prev_shared});
    const int mc = add("MLA collectives", 1, mla_comm, {att});
    prev_shared = -1;
    if (!moe) {
      const int g = add("dense AllGather", 1, dense_gather, {mc});
      const int f = add("dense FFN", 0, dense, {g});
      last = add("dense ReduceScatter", 1, dense_scatter, {f});
      continue;
    }
    // Without the overlap every op waits for the one issued before it.
    const bool ov = s.gate_overlap;
    const int pre = add("InitialRouting copy", 0, permute_ms, {mc});
    const int g = add("gate", 0, gate, {pre});
    const int ag = add("MoE AllGather / dispatch", 1, moe_gather, {ov ? pre : g});
    const int gr = add("gate results AllGather", 1, gate_comm, {g, ag});
    const int sh = add("shared expert", 0, shared, {ov ? g : gr});
    const int ro = add("routed experts", 0, routed, {gr, sh});
    const int rs = add("MoE ReduceScatter / combine", 1, moe_scatter, {ro});
    last = add("InitialRouting inverse copy", 0, permute_ms, {rs});
    prev_shared = sh;
  }
  add("LM head", 0, lm + lm_comm, {last});
  r.mla_ms = mla_ms, r.mla_comm_ms = mla_comm, r.gate_ms = gate, r.shared_ms = shared, r.gather_ms = moe_gather;
  r.gate_comm_ms = gate_comm, r.routed_ms = routed, r.scatter_ms = moe_scatter, r.permute_ms = permute_ms;
  r.mla_after_prefetch_ms = mla_pref_ms;
  r.step_ms = schedule(ops);
  for (const Op& o : ops) r.sum_ms += o.ms;
  std::vector<double> finish(ops.size(), 0);  // longest chain through dependencies alone
  for (size_t i = 0; i < ops.size(); ++i) {
    double t = 0;
    for (int d : ops[i].deps) t = std::max(t, finish[static_cast<size_t>(d)]);
    finish[i] = t + ops[i].ms;
    r.critical_ms = std::max(r.critical_ms, finish[i]);
  }
  return r;
}

}  // namespace ladder::deploy
