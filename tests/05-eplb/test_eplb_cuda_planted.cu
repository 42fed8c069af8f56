// tests/05-eplb/test_eplb_cuda_planted.cu -- a deliberately broken copy of the v2 load-counting kernel
// (cuda/src/05-eplb/eplb.cu) with its first __syncthreads removed: a thread may count into a bin that
// another thread zeroes afterwards. The test proves the exact comparison with the CPU loop catches
// it under SIMT's schedules; it is skipped in the TSan build, where the race itself is the report.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <vector>

#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/05-eplb/eplb.hpp"

#if !defined(SIMT_TSAN)

namespace {

__global__ void count_load_missing_barrier(const int64_t* topk, int64_t n, int64_t num_log, int32_t* counts) {
  SIMT_DYNAMIC_SHARED(int32_t, hist);
  for (int64_t e = threadIdx.x; e < num_log; e += blockDim.x) hist[e] = 0;
  // (the __syncthreads that belongs here is missing)
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t e = topk[i];
    if (e >= 0 && e < num_log) atomicAdd(&hist[e], 1);
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < num_log; e += blockDim.x)
    if (hist[e] != 0) atomicAdd(&counts[e], hist[e]);
}

}  // namespace

TEST_CASE("planted bug: the shared-histogram kernel without its first barrier miscounts under every schedule") {
  using ladder::eplb::Index;
  ladder::Rng rng(9);
  const Index T = 1025, k = 8, num_log = 12;
  ladder::eplb::IndexMat topk(T, k);
  for (Index i = 0; i < topk.size(); ++i) topk.data()[i] = static_cast<Index>(rng.uniform_int(num_log));
  const std::vector<Index> want = ladder::eplb::count_expert_load(topk, num_log);

  ladder::test::each_schedule([&](simt::Schedule s) {
    ladder::cuda::DeviceBuffer<int64_t> d_topk(topk.data(), static_cast<size_t>(topk.size()));
    ladder::cuda::DeviceBuffer<int32_t> d_counts(static_cast<size_t>(num_log));
    d_counts.fill_zero();
    simt::launch(count_load_missing_barrier, dim3(4), dim3(256), static_cast<size_t>(num_log) * sizeof(int32_t),
                 d_topk.data(), T * k, num_log, d_counts.data());
    const std::vector<int32_t> got = d_counts.to_host();
    CAPTURE(static_cast<int>(s));
    CHECK(std::vector<Index>(got.begin(), got.end()) != want);
  }, 1);
}

#endif
