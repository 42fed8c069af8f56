// tests/05-eplb/test_eplb_cuda.cpp -- stage 05 CUDA kernels (cuda/src/05-eplb/eplb.cu, run on the CPU through
// SIMT) vs the CPU loops of ladder/05-eplb/dispatch.hpp, exactly: expert-load counting (v1 global
// atomics, v2 shared-memory histogram) and the token -> replica mapping through log2phy. CTest runs
// this binary under SIMT_SCHEDULE=forward, reverse and random:1 (and in the TSan build).
#include <doctest/doctest.h>

#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/05-eplb/eplb.hpp"
#include "ladder/05-eplb/eplb.hpp"

using namespace ladder;
using eplb::Index;
using eplb::IndexMat;

namespace {

// TSan keeps shadow state for every fiber of every launch, so its build runs a smaller sweep.
#if defined(SIMT_TSAN)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

// Routed top-k ids [T, k]: `kind` 0 = uniform, 1 = every pair to expert hot, 2 = uniform over the
// first half only (the other experts receive zero tokens); about 1 in 16 entries is -1 (no expert).
IndexMat random_topk(Rng& rng, Index T, Index k, Index num_log, int kind) {
  IndexMat topk(T, k);
  const Index hot = num_log / 3, half = (num_log + 1) / 2;
  for (Index t = 0; t < T; ++t)
    for (Index j = 0; j < k; ++j) {
      const auto u = static_cast<Index>(rng.uniform_int(static_cast<uint64_t>(num_log)));
      topk(t, j) = rng.uniform_int(16) == 0 ? -1 : kind == 1 ? hot : kind == 2 ? u % half : u;
    }
  return topk;
}

using CountFn = void (*)(const int64_t*, int64_t, int64_t, int64_t, int32_t*);

std::vector<Index> count_on_device(CountFn fn, const IndexMat& topk, Index num_log) {
  cuda::DeviceBuffer<int64_t> d_topk(topk.data(), static_cast<size_t>(topk.size()));
  cuda::DeviceBuffer<int32_t> d_counts(static_cast<size_t>(num_log));  // poisoned: the kernel must zero it
  fn(d_topk.data(), topk.rows(), topk.cols(), num_log, d_counts.data());
  cuda::sync();
  const std::vector<int32_t> c = d_counts.to_host();
  return std::vector<Index>(c.begin(), c.end());
}

IndexMat map_on_device(const IndexMat& topk, const eplb::Placement& p, Index layer) {
  const IndexMat l2p = p.layer_log2phy(layer);
  const IndexMat cnt = p.logcnt.row(layer);
  cuda::DeviceBuffer<int64_t> d_topk(topk.data(), static_cast<size_t>(topk.size()));
  cuda::DeviceBuffer<int64_t> d_l2p(l2p.data(), static_cast<size_t>(l2p.size()));
  cuda::DeviceBuffer<int64_t> d_cnt(cnt.data(), static_cast<size_t>(cnt.size()));
  cuda::DeviceBuffer<int64_t> d_phys(static_cast<size_t>(topk.size()));
  cuda::eplb::map_to_physical(d_topk.data(), topk.rows(), topk.cols(), d_l2p.data(), p.max_cnt(), d_cnt.data(),
                              p.num_log(), d_phys.data());
  cuda::sync();
  IndexMat phys(topk.rows(), topk.cols());
  d_phys.copy_to_host(phys.data(), static_cast<size_t>(phys.size()));
  return phys;
}

}  // namespace

TEST_CASE("load counting: v1 (global atomics) and v2 (shared histogram) equal the CPU loop exactly") {
  Rng rng(5);
  const std::vector<Index> logs = kTsan ? std::vector<Index>{12, 97} : std::vector<Index>{1, 12, 97, 256};
  const std::vector<Index> tokens = kTsan ? std::vector<Index>{0, 97} : std::vector<Index>{0, 1, 97, 1025};
  for (Index num_log : logs)
    for (Index T : tokens)
      for (Index k : {1, 8})
        for (int kind = 0; kind < 3; ++kind) {
          CAPTURE(num_log);
          CAPTURE(T);
          CAPTURE(k);
          CAPTURE(kind);
          const IndexMat topk = random_topk(rng, T, k, num_log, kind);
          const std::vector<Index> want = eplb::count_expert_load(topk, num_log);
          CHECK(count_on_device(&cuda::eplb::count_expert_load_v1_global, topk, num_log) == want);
          CHECK(count_on_device(&cuda::eplb::count_expert_load_v2_shared, topk, num_log) == want);
        }
}

TEST_CASE("replica mapping equals the CPU loop exactly and lands on a replica of the routed expert") {
  Rng rng(6);
  const Mat<double> readme = (Mat<double>(2, 12) << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
                              20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27)
                                 .finished();
  const Mat<double> v3 = eplb::zipf_loads(rng, 2, 256, 4096 * 8, 1.0);
  const std::vector<std::pair<Mat<double>, eplb::Placement>> cases = {
      {readme, eplb::rebalance_experts(readme, 16, 4, 2, 8)},
      {readme, eplb::rebalance_experts(readme, 16, 3, 2, 8)},
      {v3, eplb::rebalance_experts(v3, 288, 8, 4, 32)},
      {v3, eplb::rebalance_experts(v3, 288, 8, 18, 144)},
  };
  const std::vector<Index> tokens = kTsan ? std::vector<Index>{97} : std::vector<Index>{1, 97, 1025};
  for (const auto& [w, p] : cases)
    for (Index layer = 0; layer < p.num_layers(); ++layer)
      for (Index T : tokens) {
        CAPTURE(p.num_log());
        CAPTURE(layer);
        CAPTURE(T);
        const IndexMat topk = random_topk(rng, T, 8, p.num_log(), static_cast<int>(T % 3));
        const IndexMat phys = map_on_device(topk, p, layer);
        CHECK(phys == eplb::map_to_physical(topk, p, layer));
        for (Index i = 0; i < topk.size(); ++i)
          CHECK((topk.data()[i] < 0 ? phys.data()[i] == -1 : p.phy2log(layer, phys.data()[i]) == topk.data()[i]));
      }
}

TEST_CASE("bad sizes raise ladder::Error naming the parameter") {
  cuda::DeviceBuffer<int64_t> topk(8);
  cuda::DeviceBuffer<int32_t> counts(8);
  CHECK_THROWS_WITH_AS(cuda::eplb::count_expert_load_v1_global(topk.data(), 1, 8, 0, counts.data()),
                       doctest::Contains("num_log = 0 violates num_log >= 1"), ladder::Error);
  CHECK_THROWS_WITH_AS(cuda::eplb::count_expert_load_v2_shared(topk.data(), 1, 0, 8, counts.data()),
                       doctest::Contains("k = 0 violates k >= 1"), ladder::Error);
  CHECK_THROWS_WITH_AS(cuda::eplb::count_expert_load_v2_shared(topk.data(), 1, 8, 20000, counts.data()),
                       doctest::Contains("num_log = 20000 violates num_log <= 12288"), ladder::Error);
  CHECK_THROWS_WITH_AS(cuda::eplb::count_expert_load_v1_global(topk.data(), int64_t{1} << 30, 8, 8, counts.data()),
                       doctest::Contains("violates num_tokens * k < 2^31"), ladder::Error);
  CHECK_THROWS_WITH_AS(cuda::eplb::map_to_physical(topk.data(), 1, 8, topk.data(), 0, topk.data(), 8, topk.data()),
                       doctest::Contains("max_cnt = 0 violates max_cnt >= 1"), ladder::Error);
}
