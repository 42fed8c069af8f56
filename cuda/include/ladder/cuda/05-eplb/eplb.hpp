// ladder/cuda/05-eplb/eplb.hpp -- host API of the stage-05 CUDA kernels (cuda/src/05-eplb/eplb.cu): the data plane
// around EPLB. EPLB itself (ladder/05-eplb/eplb.hpp) is a small control-plane computation that runs on the
// host between batches; on the GPU are (a) counting how many routed (token, expert) pairs each
// logical expert received -- the statistics EPLB consumes -- and (b) sending each routed pair to one
// physical replica through log2phy -- the map EPLB produces.
//
// Every function takes DEVICE pointers (ladder::cuda::DeviceBuffer<T>::data()), launches through
// simt::launch and returns; call ladder::cuda::sync() before reading results on a GPU. Shapes:
//   topk     [num_tokens, k] int64 logical expert ids; -1 = no expert (a padded or dropped slot)
//   counts   [num_log] int32, overwritten
//   log2phy  [num_log, max_cnt] int64, one layer of eplb::Placement::log2phy, -1 padded
//   logcnt   [num_log] int64, the same layer's replica counts
//   phys     [num_tokens, k] int64, overwritten: the physical slot of each routed pair, -1 for -1
// Oracles: eplb::count_expert_load and eplb::map_to_physical (ladder/05-eplb/dispatch.hpp), compared
// exactly. Kernels cannot throw: an index outside [-1, num_log) is skipped (counts) or mapped to -1
// (phys); the oracles reject such input. Bad sizes throw ladder::Error naming the parameter.
#pragma once
#include <cstdint>

namespace ladder::cuda::eplb {

// (a) v1: one thread per routed pair, one global atomicAdd each (contended on hot experts).
void count_expert_load_v1_global(const int64_t* topk, int64_t num_tokens, int64_t k, int64_t num_log,
                                 int32_t* counts);
// (a) v2: each block counts into a private histogram in shared memory, then adds its non-zero bins to
// the global counts: hot-expert contention stays inside the block, one global atomic per bin per block.
void count_expert_load_v2_shared(const int64_t* topk, int64_t num_tokens, int64_t k, int64_t num_log,
                                 int32_t* counts);
// (b) routed pair (t, j) with expert e -> log2phy[e][t % logcnt[e]] (round-robin over e's replicas by
// token index: stateless, so the answer does not depend on thread order).
void map_to_physical(const int64_t* topk, int64_t num_tokens, int64_t k, const int64_t* log2phy, int64_t max_cnt,
                     const int64_t* logcnt, int64_t num_log, int64_t* phys);

// The launches behind the functions above, unchecked (cuda/src/05-eplb/eplb.cu); call the checked ones.
namespace detail {
void launch_count_v1_global(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts);
void launch_count_v2_shared(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts);
void launch_map_to_physical(const int64_t* topk, int64_t num_tokens, int64_t k, const int64_t* log2phy,
                            int64_t max_cnt, const int64_t* logcnt, int64_t num_log, int64_t* phys);
}  // namespace detail

inline constexpr int kBlockThreads = 256;
inline constexpr int kMaxBlocks = 1024;            // grid-stride loops cover the rest
inline constexpr int64_t kMaxSharedBins = 12288;  // v2's histogram: 48 KiB of int32 in shared memory

}  // namespace ladder::cuda::eplb
