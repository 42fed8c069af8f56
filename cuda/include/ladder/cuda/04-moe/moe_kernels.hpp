// ladder/cuda/04-moe/moe_kernels.hpp -- the stage-04 kernels' launch functions, unchecked and free of fmt
// (the .cu files include only this). Call the checked API in ladder/cuda/04-moe/moe.hpp instead.
// All pointers are device pointers; shapes as in ladder/04-moe/config.hpp (row-major).
#pragma once
#include <cstdint>

namespace ladder::cuda::moe {

struct GateParams {
  int64_t tokens = 0, hidden = 0, n_experts = 0, top_k = 1, n_group = 1, topk_group = 1;
  float route_scale = 1.0f;
  bool v3 = true;  // true: sigmoid + bias for selection, group score = top-2 sum; false: softmax, group max
};

// One grouped-GEMM tile: output rows [row0, row0 + rows) x columns [col0, col0 + 16) of group g.
struct Tile {
  int64_t group, row0, rows, col0;
};

inline constexpr int kGateThreads = 32;     // one warp-sized block per token
inline constexpr int kSortChunk = 256;      // assignments per histogram / scatter block
inline constexpr int kGemmTile = 16;        // 16 x 16 output tile, K step 16
inline constexpr int kThreads = 256;

namespace detail {
// topk_idx [T, k] int64, topk_weight [T, k]; dynamic shared memory: 2 E + n_group floats.
void launch_gate(const GateParams& p, const float* x, const float* W_gate, const float* bias, int64_t* topk_idx,
                 float* topk_weight);
// The three permutation steps over keys [n] in [0, G] (G = sentinel): per-chunk histograms
// (chunk_counts [chunks, G + 1]), the exclusive scan into per-(key, chunk) offsets and group_sizes
// [G], the stable scatter into sort_idx and inverse.
void launch_permute(const int64_t* keys, int64_t n, int64_t G, int64_t* chunk_counts, int64_t* offsets,
                    int64_t* group_sizes, int64_t* sort_idx, int64_t* inverse);
// xs [n, D]: row i = x[sort_idx[i] / k].
void launch_gather(const float* x, int64_t D, const int64_t* sort_idx, int64_t k, int64_t n, float* xs);
// out [m, N] = ragged_dot(lhs [m, K], rhs [G, K, N]) over the tiles (built from the group offsets by the
// host scheduler); rows from `zero_from` to m are zeroed (rows past sum(group_sizes)).
void launch_grouped_gemm(const Tile* tiles, int64_t num_tiles, const float* lhs, int64_t K, const float* rhs,
                         int64_t N, const int64_t* group_offsets, float* out, int64_t zero_from, int64_t m);
// h1[i] = silu(h1[i]) * h3[i], n elements.
void launch_swiglu(float* h1, const float* h3, int64_t n);
// y [T, D] (+)= sum_j topk_weight[t, j] o[inverse[t k + j]]; accumulate adds to y.
void launch_combine(const float* o, const int64_t* inverse, const float* topk_weight, int64_t T, int64_t k,
                    int64_t D, float* y, bool accumulate);
}  // namespace detail

}  // namespace ladder::cuda::moe
