// ref/src/02-attention/registry.cpp -- stage 02 reference rungs in the registry.
//
// Forward rungs store attention::ForwardFns, backward rungs attention::BackwardFns (attention.hpp).
// Cost shape: {B, H, Nq, Nk, d[, causal]}; bytes at fp32; tiled rungs with default_tiles<float>(d).
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/registry.hpp"

namespace ladder {

void register_attention(Registry& r) {
  using namespace attention;
  auto tiles = [](const Problem& p) { return default_tiles<float>(p.d); };
  r.add({kStage, "naive", "standard attention (notes Alg. 0)",
         "S = scale QK^T, P = softmax(S), O = PV, each a pass over [B,H,Nq,Nk] arrays in memory", "ref",
         ForwardFns{&naive_forward<float>, &naive_forward<double>},
         [](const Shape& s) { return naive_forward_cost(problem_from_shape(s)); },
         "4 Nq Nk d + 6 Nq Nk FLOPs; reads Q, K, V + 2 Nq Nk, writes 2 Nq Nk + O; scratch S, P (2 Nq Nk)"});
  r.add({kStage, "flash", "FlashAttention, one query row (notes Fig. 8)",
         "one pass over the keys per row carrying m, d', o'; no S or P in memory, but K, V re-read per row", "ref",
         ForwardFns{&flash_forward<float>, &flash_forward<double>},
         [](const Shape& s) { return flash_forward_cost(problem_from_shape(s)); },
         "(5d + 10) FLOPs and 2d elements read per visible (query, key) pair; no scratch"});
  r.add({kStage, "tiled", "tiled FlashAttention forward (FA2 loop order)",
         "Br x Bc tiles, Q blocks outer, rescale by e^{m_old - m_new}, deferred normalisation, stores L", "ref",
         ForwardFns{&tiled_forward_default<float>, &tiled_forward_default<double>},
         [tiles](const Shape& s) {
           const Problem p = problem_from_shape(s);
           return tiled_forward_cost(p, tiles(p));
         },
         "~4 Nq Nk d FLOPs; reads Q once and K, V once per Q block (Nq/Br times); writes O, L; no scratch"});
  r.add({kStage, "backward_naive", "standard attention backward (from the materialised P)",
         "dV = P^T dO, dP = dO V^T, dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q, all N x N in memory", "ref",
         BackwardFns{&naive_backward<float>, &naive_backward<double>},
         [](const Shape& s) { return naive_backward_cost(problem_from_shape(s)); },
         "re-runs Alg. 0 lines 1-2, then 8 Nq Nk d FLOPs; 7 Nq Nk + 3 Nq Nk traffic; scratch 3 Nq Nk"});
  r.add({kStage, "backward_recompute", "FlashAttention backward with recomputation (FA2 Alg. 2)",
         "per tile: P = e^{S - L} recomputed from Q, K and L; dV, dP, dS, dQ, dK; only O(N) state in memory", "ref",
         BackwardFns{&recompute_backward_default<float>, &recompute_backward_default<double>},
         [tiles](const Shape& s) {
           const Problem p = problem_from_shape(s);
           return recompute_backward_cost(p, tiles(p));
         },
         "~10 Nq Nk d FLOPs; K, V read once; Q, dO, dQ read (and dQ written) once per KV block; no scratch"});
}

}  // namespace ladder
