// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/04-moe/dispatch.hpp -- stage 04 rung "sort": the permutation that makes ragged_dot possible.
//
// The JAX DeepSeek-R1 MoE (jax-ml/jax-llm-examples): flatten topk_idx to T*k assignments (assignment
// a = t*k + j), stable argsort by expert, gather x[sort_idx // k], group_sizes = bincount(expert, E).
// After the expert products, the inverse permutation puts each row back at its assignment (unsort).
// Here the sort is a counting sort (histogram -> exclusive scan -> stable scatter), the same three
// steps the CUDA kernels run (cuda/src/04-moe/moe_permute.cu), and equal to a stable argsort.
// Keys are in [0, G]; key G is a sentinel ("not on this shard") sorted to the end and not counted in
// group_sizes (the JAX code's "tokens for which experts are missing are last").
// Dropping (prefill): capacity C = round(capacity_factor * T * k / E) rows per expert, rounded half
// up; within each expert the first C assignments in sorted order (lowest token index) are kept.
#pragma once
#include <cmath>
#include <numeric>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/04-moe/config.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::moe {

struct Permutation {
  std::vector<Index> sort_idx;     // [n] sorted position i holds assignment sort_idx[i]
  std::vector<Index> inverse;      // [n] inverse[a] = sorted position of assignment a
  std::vector<Index> group_sizes;  // [G] rows per group (the sentinel key G not counted)
  std::vector<Index> group_offsets() const {  // [G + 1] exclusive scan of group_sizes
    std::vector<Index> o(group_sizes.size() + 1, 0);
    for (size_t g = 0; g < group_sizes.size(); ++g) o[g + 1] = o[g] + group_sizes[g];
    return o;
  }
};

// Stable counting sort of keys [n] in [0, G].
LADDER_LAB_ENTRY inline Permutation sort_by_key(const std::vector<Index>& keys, Index G) {
  require(G >= 1, "moe::sort_by_key: G = {} violates G >= 1", G);
  const Index n = Index(keys.size());
  for (Index a = 0; a < n; ++a)
    require(keys[static_cast<size_t>(a)] >= 0 && keys[static_cast<size_t>(a)] <= G, "moe::sort_by_key: keys[{}] = {} violates 0 <= key <= G = {}",
            a, keys[static_cast<size_t>(a)], G);
  Permutation p;
  // Identity until the scatter below overwrites every entry: an unwritten permutation (the lab's
  // untouched starter) gives wrong answers, never out-of-range indices.
  p.sort_idx.resize(static_cast<size_t>(n));
  std::iota(p.sort_idx.begin(), p.sort_idx.end(), Index{0});
  p.inverse = p.sort_idx;
  p.group_sizes.assign(static_cast<size_t>(G), 0);
  // TODO(lab: sort_by_key): histogram of the keys into group_sizes, exclusive scan, stable scatter into sort_idx and inverse
  return p;
}

// The routed experts as keys: assignment a = t*k + j has key topk_idx[t, j].
inline Permutation sort_by_expert(const Array<Index>& topk_idx, Index n_experts) {
  return sort_by_key(topk_idx.data, n_experts);
}

// Expert-parallel shard p of P (experts [p E/P, (p+1) E/P)): local expert ids as keys, every other
// assignment gets the sentinel E/P and goes to the end.
inline Permutation sort_for_shard(const Array<Index>& topk_idx, Index n_experts, Index shards, Index p) {
  require(shards >= 1 && n_experts % shards == 0, "moe: shards = {} violates shards >= 1 and n_experts % shards == 0 "
          "(n_experts = {})", shards, n_experts);
  require(p >= 0 && p < shards, "moe: shard = {} violates 0 <= shard < shards = {}", p, shards);
  const Index local = n_experts / shards, first = p * local;
  std::vector<Index> keys(topk_idx.data.size());
  for (size_t a = 0; a < keys.size(); ++a) {
    const Index e = topk_idx.data[a];
    keys[a] = (e >= first && e < first + local) ? e - first : local;
  }
  return sort_by_key(keys, local);
}

// Rows per expert when dropping: round(capacity_factor * T * k / E), halves rounded up.
inline Index capacity(double capacity_factor, Index tokens, Index k, Index n_experts) {
  require(std::isfinite(capacity_factor) && capacity_factor > 0,
          "moe: capacity_factor = {} violates capacity_factor > 0", capacity_factor);
  require(tokens >= 0 && k >= 1 && n_experts >= 1, "moe::capacity: T = {}, k = {}, E = {} violate T >= 0, k, E >= 1",
          tokens, k, n_experts);
  return static_cast<Index>(std::floor(capacity_factor * double(tokens * k) / double(n_experts) + 0.5));
}

// kept[a] = 1 when assignment a is among the first C of its expert in sorted order, else 0.
inline std::vector<Index> kept_mask(const Array<Index>& topk_idx, const Permutation& p, Index C) {
  const auto offsets = p.group_offsets();
  std::vector<Index> kept(topk_idx.data.size(), 0);
  for (size_t a = 0; a < kept.size(); ++a)
    kept[a] = (p.inverse[a] - offsets[static_cast<size_t>(topk_idx.data[a])]) < C ? 1 : 0;
  return kept;
}

}  // namespace ladder::moe
