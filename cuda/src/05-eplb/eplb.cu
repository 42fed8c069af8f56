// cuda/src/05-eplb/eplb.cu -- stage 05 CUDA kernels: the data plane around EPLB.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global        <== this file (data plane)
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// The balancer (ladder/05-eplb/eplb.hpp, after DeepSeek's eplb.py) runs on the host every few minutes; the GPU
// side of it is two small kernels that run every step:
//   (a) load counting: counts[e] = number of routed (token, expert) pairs with expert e, from the
//       gate's top-k ids -- the statistics EPLB's `weight` is summed from.
//       v1_global: one global atomicAdd per pair. v2_shared: a block-private histogram in shared
//       memory (privatisation), flushed with one global atomicAdd per non-zero bin; the two
//       __syncthreads are what make it correct (zeroed before counting, complete before flushing).
//   (b) replica mapping: pair (t, j) with expert e goes to slot log2phy[e][t % logcnt[e]].
// Integer atomics commute, so every schedule of threads gives the same counts: the results are
// compared exactly with the CPU loops in ladder/05-eplb/dispatch.hpp. Compiled by nvcc for sm_80/sm_90
// and by g++ through cuda/simt, where the tests run it under forward, reverse and random schedules.
// The checked host API (ladder::Error on bad sizes) is in eplb_host.cpp: this file includes no
// fmt-based header, because nvcc cannot compile fmt's consteval format strings.
#include "ladder/cuda/05-eplb/eplb.hpp"
#include "simt.hpp"

namespace ladder::cuda::eplb {
namespace {

__global__ void zero_counts(int32_t* counts, int64_t num_log) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < num_log; e += (int64_t)gridDim.x * blockDim.x)
    counts[e] = 0;
}

__global__ void count_load_v1_global(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = topk[i];
    if (e >= 0 && e < num_log) atomicAdd(&counts[e], 1);
  }
}

__global__ void count_load_v2_shared(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts) {
  SIMT_DYNAMIC_SHARED(int32_t, hist);
  for (int64_t e = threadIdx.x; e < num_log; e += blockDim.x) hist[e] = 0;
  __syncthreads();  // every bin is zero before any thread of the block counts into it
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = topk[i];
    if (e >= 0 && e < num_log) atomicAdd(&hist[e], 1);
  }
  __syncthreads();  // the block's counts are all in hist before they are flushed
  for (int64_t e = threadIdx.x; e < num_log; e += blockDim.x)
    if (hist[e] != 0) atomicAdd(&counts[e], hist[e]);
}

__global__ void map_to_physical_kernel(const int64_t* topk, int64_t num_tokens, int64_t k, const int64_t* log2phy,
                                       int64_t max_cnt, const int64_t* logcnt, int64_t num_log, int64_t* phys) {
  const int64_t n = num_tokens * k;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / k, e = topk[i];
    phys[i] = (e >= 0 && e < num_log) ? log2phy[e * max_cnt + t % logcnt[e]] : -1;
  }
}

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kBlockThreads - 1) / kBlockThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace

namespace detail {

void launch_count_v1_global(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts) {
  simt::launch(zero_counts, dim3(blocks_for(num_log)), dim3(kBlockThreads), 0, counts, num_log);
  if (n > 0) simt::launch(count_load_v1_global, dim3(blocks_for(n)), dim3(kBlockThreads), 0, topk, n, num_log, counts);
}

void launch_count_v2_shared(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts) {
  simt::launch(zero_counts, dim3(blocks_for(num_log)), dim3(kBlockThreads), 0, counts, num_log);
  if (n > 0)
    simt::launch(count_load_v2_shared, dim3(blocks_for(n)), dim3(kBlockThreads),
                 static_cast<size_t>(num_log) * sizeof(int32_t), topk, n, num_log, counts);
}

void launch_map_to_physical(const int64_t* topk, int64_t num_tokens, int64_t k, const int64_t* log2phy,
                            int64_t max_cnt, const int64_t* logcnt, int64_t num_log, int64_t* phys) {
  if (num_tokens > 0)
    simt::launch(map_to_physical_kernel, dim3(blocks_for(num_tokens * k)), dim3(kBlockThreads), 0, topk, num_tokens,
                 k, log2phy, max_cnt, logcnt, num_log, phys);
}

}  // namespace detail
}  // namespace ladder::cuda::eplb
