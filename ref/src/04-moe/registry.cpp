// ref/src/04-moe/registry.cpp -- the stage-04 reference rungs in the registry (ladder/04-moe/moe.hpp).
//
// gate stores moe::GateFns; the layer rungs store moe::LayerFns (f32 at kernel precision, f64 the
// same algorithm in double; dense_loop<double> is the oracle). Costs: ladder/04-moe/cost.hpp, shape
// {T, D, F, E, k, Fs}.
#include "ladder/04-moe/moe.hpp"

namespace ladder {
namespace {

using namespace moe;

template <class T>
LayerOut<T> dense_out(Mat<T> y) {
  LayerOut<T> o;
  o.y = std::move(y);
  return o;
}

Rung rung(std::string id, std::string name, std::string doc, std::any fn, std::function<Cost(const Shape&)> cost,
          std::string cost_doc) {
  return Rung{kStage, std::move(id), std::move(name), std::move(doc), "ref", std::move(fn), std::move(cost),
              std::move(cost_doc)};
}

}  // namespace

void register_moe(Registry& r) {
  r.add(rung("gate", "DeepSeek gate (V3 sigmoid + bias for selection | V2 softmax), grouped top-k",
             "group scores (V3: sum of top-2 biased scores; V2: max), keep topk_group groups, top-k; ties: lowest id",
             GateFns{&gate<float>, &gate<double>}, &gate_cost,
             "T (2 D E + 4 E + 3 k) FLOPs; reads x, W_gate, bias; writes topk_idx, topk_weight"));
  r.add(rung("dense_loop", "dense loop (the oracle): per token, per selected expert",
             "y_t = sum_j w_tj E_e(x_t) + shared(x_t); E_e = w2(silu(w1 x) * w3 x)",
             LayerFns{[](auto& w, auto& x, auto& ro, auto&) { return dense_out(dense_loop(w, x, ro)); },
                      [](auto& w, auto& x, auto& ro, auto&) { return dense_out(dense_loop(w, x, ro)); }},
             [](const Shape& s) { return routed_cost(s, false); },
             "T k (6 D F + 4 F + 2 D) + T (6 D Fs + 4 Fs + D) FLOPs; reads the min(E, T k) touched experts"));
  r.add(rung("dense_fallback", "dense fallback: every token through every expert, masked",
             "the generic lowering of ragged_dot: E/k times the routed FLOPs, result weighted by a dense [T, E] mask",
             LayerFns{[](auto& w, auto& x, auto& ro, auto&) { return dense_out(dense_fallback(w, x, ro)); },
                      [](auto& w, auto& x, auto& ro, auto&) { return dense_out(dense_fallback(w, x, ro)); }},
             &fallback_cost, "T E (6 D F + 4 F + 2 D) + shared FLOPs; reads all E experts; scratch [T, E] + [T, D + 2F]"));
  r.add(rung("dropless", "sort -> ragged dot -> unsort + combine, dropless (JAX decode)",
             "stable counting sort of the T k assignments by expert, gather, ragged_dot x3, inverse permutation, sum",
             LayerFns{[](auto& w, auto& x, auto& ro, auto&) { return sorted_dropless(w, x, ro); },
                      [](auto& w, auto& x, auto& ro, auto&) { return sorted_dropless(w, x, ro); }},
             [](const Shape& s) { return routed_cost(s, true); },
             "the dense loop's FLOPs; scratch T k (2 D + 2 F) floats + 3 T k indices"));
  r.add(rung("dropping", "sort -> ragged dot -> scatter-add, dropping (JAX prefill)",
             "capacity C = round(cf T k / E) rows per expert (lowest token index kept), scatter-add combine",
             LayerFns{[](auto& w, auto& x, auto& ro, auto& o) { return sorted_dropping(w, x, ro, o.capacity_factor); },
                      [](auto& w, auto& x, auto& ro, auto& o) { return sorted_dropping(w, x, ro, o.capacity_factor); },
                      true},
             [](const Shape& s) { return routed_cost(s, true); },
             "at most the dropless cost (min(T k, E C) rows go through the experts)"));
  r.add(rung("ep_sharded", "expert parallelism on P shards in one process (all-reduce combine)",
             "shard p computes experts [p E/P, (p+1) E/P), others sorted to the end (zero rows); y = sum over shards",
             LayerFns{[](auto& w, auto& x, auto& ro, auto& o) { return ep_sharded(w, x, ro, o.shards); },
                      [](auto& w, auto& x, auto& ro, auto& o) { return ep_sharded(w, x, ro, o.shards); }},
             [](const Shape& s) { return routed_cost(s, true); },
             "the dropless FLOPs (+ (P - 1) T D adds of the all-reduce, not in the formula); scratch per shard"));
  r.add(rung("dropless_int8", "dropless with int8 per-output-channel expert weights",
             "ragged_dot_q8: int8 codes in the product, one scale per output column; oracle on the dequantised weights",
             LayerFns{[](auto& w, auto& x, auto& ro, auto&) { return sorted_dropless_int8(w, x, ro); },
                      [](auto& w, auto& x, auto& ro, auto&) { return sorted_dropless_int8(w, x, ro); }, false, true},
             [](const Shape& s) { return routed_cost(s, true); },
             "the dropless FLOPs (+ T k (D + F) column scalings); weights read as 1 byte (formula counts 4)"));
}

}  // namespace ladder
