// ladder/06-disagg/deploy/overlap.hpp -- stage 06, part 2: a decode step as a graph on two streams.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, OVERLAP, MTP]
//
// Per layer and micro-batch the ops are: attention (MLA down, up, attention, out) on the compute
// stream; the MoE (or dense FFN) dispatch (AllGather / All2All) on the communication stream, while
// the gate runs on the compute stream (Huawei report Sec. 5.2: the gate needs only local tokens); the
// experts (routed + shared, or the dense FFN) on compute; the combine (ReduceScatter / All2All) on
// communication. Each stream runs its ops in issue order; an op starts when its stream is free and its
// inputs are done. One micro-batch: every op waits for the previous one, step = the sum. Two
// micro-batches (two-batch overlap, DeepSeek's DeepEP / day-6 notes, Huawei report Sec. 8): the batch is
// split in halves A and B issued A, B alternately, so B's compute runs under A's communication;
// step = the schedule's makespan (its critical path). Communication is fully hidden when each
// micro-batch's communication fits under the other's computation. Halving a batch does not halve a
// memory-bound op: weights are read once per micro-batch, which is why overlap can lose in decode.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "ladder/06-disagg/deploy/traffic.hpp"

namespace ladder::deploy {

struct Op {
  std::string name;
  int stream = 0;          // 0 compute, 1 communication
  double ms = 0;
  std::vector<int> deps;   // indices of earlier ops
  double start = 0, end = 0;
};

// Schedule ops in issue order on their streams; returns the makespan.
inline double schedule(std::vector<Op>& ops) {
  double free[2] = {0, 0}, make = 0;
  for (Op& o : ops) {
    double t = free[o.stream];
    for (int d : o.deps) t = std::max(t, ops[static_cast<size_t>(d)].end);
    o.start = t, o.end = t + o.ms;
    free[o.stream] = o.end;
    make = std::max(make, o.end);
  }
  return make;
}

// One layer's op durations for a micro-batch (ms): attention, gate, dispatch, FFN, combine.
struct LayerOps {
  double attention = 0, gate = 0, dispatch = 0, ffn = 0, combine = 0;
};

// Per-layer durations of the layout's MoE and dense layers at its token count (the layout as given).
inline std::pair<LayerOps, LayerOps> layer_ops(const Layout& L) {
  LayerOps moe, dense;
  for (const ModuleCost& c : module_costs(L)) {
    const double ms = module_ms(L, c) / std::max(1.0, c.layers);
    if (c.module.rfind("MLA", 0) == 0) moe.attention += ms, dense.attention += ms;
    else if (c.module == "dense FFN") dense.ffn += ms;
    else if (c.module == "routed experts" || c.module == "shared expert") moe.ffn += ms;
  }
  const disagg::ModelSpec& m = L.model;  // gate: T x h by h x E, weights bf16-sized reads are negligible
  moe.gate = 1e3 * 2 * static_cast<double>(L.work.tokens_per_card * m.hidden * m.experts) / (L.gpu.tflops * 1e12);
  for (const Collective& x : collectives(L)) {
    const double ms = collective_ms(L, x);
    const bool before = x.kind != "reducescatter" && x.name.find("combine") == std::string::npos;
    if (x.name.rfind("MoE", 0) == 0) (before ? moe.dispatch : moe.combine) += ms;
    else if (x.name.rfind("dense", 0) == 0) (before ? dense.dispatch : dense.combine) += ms;
    else if (x.name.rfind("MLA", 0) == 0) moe.attention += ms, dense.attention += ms;  // kept on the attention path
  }
  return {moe, dense};
}

struct OverlapResult {
  double sequential_ms = 0;  // one micro-batch, no overlap (sum of every op)
  double two_batch_ms = 0;   // two half micro-batches, pipelined on two streams
  double comm_per_mb_ms = 0, compute_per_mb_ms = 0;  // one layer, one half micro-batch
  bool hidden = false;       // per micro-batch communication <= the other micro-batch's computation
  };

// The two-batch schedule of a list of layers (durations of one half micro-batch each). Issue order per
// layer: A attention, gate, dispatch; B attention, gate, dispatch; A FFN, combine; B FFN, combine -- so
// B's attention runs while A's dispatch is in flight and A's FFN while B's is.
inline std::vector<Op> two_batch_graph(const std::vector<LayerOps>& layers) {
  std::vector<Op> ops;
  int last[2] = {-1, -1};
  const auto deps = [](std::initializer_list<int> d) {
    std::vector<int> v;
    for (int x : d)
      if (x >= 0) v.push_back(x);
    return v;
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerOps& x = layers[i];
    int att[2], disp[2];
    for (int mb = 0; mb < 2; ++mb) {
      const std::string tag = fmt::format("{}{}", mb == 0 ? 'A' : 'B', i);
      att[mb] = static_cast<int>(ops.size());
      ops.push_back({tag + " attention", 0, x.attention, deps({last[mb]})});
      ops.push_back({tag + " gate", 0, x.gate, deps({att[mb]})});
      disp[mb] = static_cast<int>(ops.size());
      ops.push_back({tag + " dispatch", 1, x.dispatch, deps({att[mb]})});
    }
    for (int mb = 0; mb < 2; ++mb) {
      const std::string tag = fmt::format("{}{}", mb == 0 ? 'A' : 'B', i);
      const int f = static_cast<int>(ops.size());
      ops.push_back({tag + " ffn", 0, x.ffn, deps({att[mb] + 1, disp[mb]})});
      ops.push_back({tag + " combine", 1, x.combine, deps({f})});
      last[mb] = f + 1;
    }
  }
  return ops;
}

// No overlap: every op of the full batch one after the other.
inline double sequential_ms(const std::vector<LayerOps>& layers) {
  double t = 0;
  for (const LayerOps& x : layers) t += x.attention + x.gate + x.dispatch + x.ffn + x.combine;
  return t;
}

// One of the two micro-batches: half the requests and tokens of the layout.
inline Layout half_batch(const Layout& L) {
  Layout half = L;
  half.work.tokens_per_card = std::max<int64_t>(1, L.work.tokens_per_card / 2);
  half.work.requests_per_card = std::max<int64_t>(1, L.work.requests_per_card / 2);
  return half;
}

inline OverlapResult overlap(const Layout& L) {
  const Layout half = half_batch(L);
  const auto [moe, dense] = layer_ops(L);
  const auto [moe_h, dense_h] = layer_ops(half);
  std::vector<LayerOps> full, halves;
  for (int64_t i = 0; i < L.mla_layers(); ++i) {
    full.push_back(i < L.model.dense_layers ? dense : moe);
    halves.push_back(i < L.model.dense_layers ? dense_h : moe_h);
  }
  OverlapResult r;
  r.sequential_ms = sequential_ms(full);
  std::vector<Op> two = two_batch_graph(halves);
  r.two_batch_ms = schedule(two);
  r.comm_per_mb_ms = moe_h.dispatch + moe_h.combine;
  r.compute_per_mb_ms = moe_h.attention + moe_h.gate + moe_h.ffn;
  r.hidden = r.comm_per_mb_ms <= r.compute_per_mb_ms;
  return r;
}

}  // namespace ladder::deploy
