// cuda/src/04-moe/registry.cpp -- the stage-04 CUDA rungs in the registry (backend "cuda"): gate
// (moe::GateFns, f32 only) and dropless (moe::LayerFns, f32 only). Each uploads its inputs, runs the
// kernels of ladder/cuda/04-moe/moe.hpp and downloads the result. Cost: the reference formulas (same
// algorithm, same FLOPs).
#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/04-moe/moe.hpp"
#include "ladder/04-moe/moe.hpp"

namespace ladder::cuda {
namespace {

namespace ref = ladder::moe;

ref::Routing<float> gate_rung(const ref::Weights<float>& w, const Mat<float>& x) {
  ref::check_weights(w);
  require(x.cols() == w.cfg.hidden, "cuda::moe::gate: x.cols = {} violates == hidden = {}", x.cols(), w.cfg.hidden);
  const auto& c = w.cfg;
  moe::GateParams p{x.rows(), c.hidden, c.n_experts, c.top_k, c.n_group, c.topk_group, float(c.route_scale),
                    c.gate == ref::GateKind::v3_sigmoid};
  DeviceBuffer<float> d_x(x.data(), static_cast<size_t>(x.size())), d_w(w.W_gate.data(), static_cast<size_t>(w.W_gate.size())), d_b(w.bias);
  DeviceBuffer<int64_t> idx(static_cast<size_t>(x.rows() * c.top_k));
  DeviceBuffer<float> wt(static_cast<size_t>(x.rows() * c.top_k));
  moe::gate(p, d_x.data(), d_w.data(), d_b.data(), idx.data(), wt.data());
  sync();
  ref::Routing<float> r{Array<int64_t>({x.rows(), c.top_k}), Array<float>({x.rows(), c.top_k})};
  r.topk_idx.data = idx.to_host();
  r.topk_weight.data = wt.to_host();
  return r;
}

ref::LayerOut<float> dropless_rung(const ref::Weights<float>& w, const Mat<float>& x, const ref::Routing<float>& r,
                                   const ref::LayerOptions&) {
  ref::check_layer_inputs(w, x, r);
  const int64_t T = x.rows(), n = T * w.cfg.top_k;
  DeviceBuffer<float> d_x(x.data(), static_cast<size_t>(x.size())), d_wt(r.topk_weight.data), y(static_cast<size_t>(T * w.cfg.hidden));
  DeviceBuffer<int64_t> d_idx(r.topk_idx.data), sort_idx(static_cast<size_t>(n)), gs(static_cast<size_t>(w.cfg.n_experts));
  moe::dropless(w, d_x.data(), T, d_idx.data(), d_wt.data(), y.data(), sort_idx.data(), gs.data());
  ref::LayerOut<float> o;
  o.y.resize(T, w.cfg.hidden);
  if (T) y.copy_to_host(o.y.data(), static_cast<size_t>(o.y.size()));
  o.sort_idx = sort_idx.to_host();
  o.group_sizes = gs.to_host();
  o.kept.assign(static_cast<size_t>(n), 1);
  return o;
}

}  // namespace

// Called by the list CMake generates from the folders cuda/src/NN-stage/ (cuda/CMakeLists.txt).
void rungs_04_moe(Registry& r) {
  r.add(Rung{ref::kStage, "gate", "DeepSeek gate kernel (block of 32 per token, thread 0 selects)",
             "logits and scores in shared memory, then group scores, topk_group groups, top-k as the reference", "cuda",
             ref::GateFns{&gate_rung, {}}, &ref::gate_cost, "as the reference gate"});
  r.add(Rung{ref::kStage, "dropless", "permute (histogram, scan, scatter) -> grouped GEMM (tile scheduler) -> combine",
             "the JAX dropless MoE as kernels: empty groups get no tiles, no group padded to the largest", "cuda",
             ref::LayerFns{&dropless_rung, {}},
             [](const Shape& s) { return ref::routed_cost(s, true); }, "as the reference dropless rung"});
}

}  // namespace ladder::cuda
