// ladder/cuda/04-moe/moe.hpp -- host API of the stage-04 CUDA kernels (cuda/src/04-moe/*.cu).
//
// Device pointers in (ladder::cuda::DeviceBuffer<T>::data()), shapes as in ladder/04-moe/config.hpp.
// Bad sizes throw ladder::Error naming the parameter (moe_host.cpp); the kernels cannot throw.
//   gate        topk_idx [T, k], topk_weight [T, k] from x [T, D], W_gate [E, D], bias [E]
//   permute     stable counting sort of keys [n] in [0, G] (G = sentinel, sorted last):
//               sort_idx [n], inverse [n], group_sizes [G]  (histogram by atomics, scan, scatter)
//   ragged_dot  out [m, N] = ragged_dot(lhs [m, K], rhs [G, K, N], group_sizes [G] on the device):
//               the grouped GEMM over the tiles make_tiles schedules; rows past sum(group_sizes) = 0
//   dropless    the whole layer (routed experts + shared expert) from a routing on the device
// Oracles: ladder::moe::gate<float>, sort_by_key, ragged_dot<float>, dense_loop<double> (tests).
#pragma once
#include <cstdint>
#include <vector>

#include "ladder/cuda/04-moe/moe_kernels.hpp"
#include "ladder/04-moe/config.hpp"

namespace ladder::cuda::moe {

void gate(const GateParams& p, const float* x, const float* W_gate, const float* bias, int64_t* topk_idx,
          float* topk_weight);
void permute(const int64_t* keys, int64_t n, int64_t G, int64_t* sort_idx, int64_t* inverse, int64_t* group_sizes);
// The tile scheduler: one Tile per (group, 16-row block, 16-column block) of every non-empty group.
std::vector<Tile> make_tiles(const std::vector<int64_t>& group_sizes, int64_t N);
void ragged_dot(const float* lhs, int64_t m, int64_t K, const float* rhs, int64_t G, int64_t N,
                const int64_t* group_sizes, float* out);
// y [T, D] = the dropless MoE layer of w (float32 weights on the host, uploaded here) on x [T, D] and the
// routing (topk_idx [T, k], topk_weight [T, k]), all device pointers except w. sort_idx [T k] and
// group_sizes [E] (device) receive the permutation.
void dropless(const ladder::moe::Weights<float>& w, const float* x, int64_t T, const int64_t* topk_idx,
              const float* topk_weight, float* y, int64_t* sort_idx, int64_t* group_sizes);

}  // namespace ladder::cuda::moe
