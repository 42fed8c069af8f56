// ladder/04-moe/moe.hpp -- stage 04: the MoE layer (DeepSeek gate, sort -> ragged dot -> unsort + combine).
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
// > 04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)   <- this stage
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Sources: the README of the JAX DeepSeek-R1 inference code (jax-ml/jax-llm-examples: route, sort,
// ragged dot, unsort, weighted sum; dropless decode, dropping prefill), Huawei's DeepSeek V3/R1
// inference deployment report for Ascend servers (EP choices, communication volumes), the CSE 234
// lecture notes' DeepSeek-V3 review, DeepSeek-V3's model code (gate equations) and jax.lax.ragged_dot
// (its contract). Chapter: chapters/04-moe/README.md. Split by concept:
//   moe/config.hpp      Config, Weights<T>, Routing<T> and their checks
//   moe/gate.hpp        gate<T>: DeepSeek-V3 (sigmoid, bias for selection only) and V2 (softmax)
//   moe/dense.hpp       dense_loop (THE ORACLE at T = double), dense_fallback (every expert, masked)
//   moe/dispatch.hpp    sort_by_key / sort_by_expert / sort_for_shard (counting sort), capacity, kept
//   moe/ragged_dot.hpp  ragged_dot (the JAX contract); ragged_dot_q8.hpp its int8 option
//   moe/quant.hpp       int8 per-output-channel weights
//   moe/sorted.hpp      sorted_dropless, sorted_dropping, ep_sharded, sorted_dropless_int8
//   moe/cost.hpp        FLOPs and bytes per rung
//   moe/synthetic.hpp   seeded dyadic weights, tokens and bias patterns
//
// Registry (ref/src/04-moe/registry.cpp, stage "04-moe"): the gate stores moe::GateFns, every layer rung
// moe::LayerFns; the CUDA rungs (cuda/src/04-moe/registry.cpp) store the same types with f32 only.
// Rung::cost takes the shape {T, D, F, E, k, Fs}.
#pragma once
#include <functional>

#include "ladder/core/registry.hpp"
#include "ladder/04-moe/config.hpp"
#include "ladder/04-moe/cost.hpp"
#include "ladder/04-moe/dense.hpp"
#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/gate.hpp"
#include "ladder/04-moe/quant.hpp"
#include "ladder/04-moe/ragged_dot.hpp"
#include "ladder/04-moe/ragged_dot_q8.hpp"
#include "ladder/04-moe/sorted.hpp"
#include "ladder/04-moe/synthetic.hpp"

namespace ladder::moe {

inline constexpr const char* kStage = "04-moe";

template <class T>
using GateFn = std::function<Routing<T>(const Weights<T>&, const Mat<T>& x)>;
struct GateFns {
  GateFn<float> f32;
  GateFn<double> f64;  // empty for CUDA rungs
};

template <class T>
using LayerFn = std::function<LayerOut<T>(const Weights<T>&, const Mat<T>& x, const Routing<T>&, const LayerOptions&)>;
struct LayerFns {
  LayerFn<float> f32;
  LayerFn<double> f64;  // empty for CUDA rungs
  bool dropping = false;  // its oracle is dense_loop restricted to its kept mask
  bool int8 = false;      // its oracle is dense_loop on dequantized_weights
};

}  // namespace ladder::moe

namespace ladder {
// Registers the stage-04 reference rungs (ref/src/04-moe/registry.cpp); its Stage record (stage.cpp) names it.
void register_moe(Registry& r);
}  // namespace ladder
