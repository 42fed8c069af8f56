// cuda/src/05-eplb/eplb_host.cpp -- the checked host API of the stage-05 kernels (ladder/cuda/05-eplb/eplb.hpp):
// sizes are validated here, with ladder::Error naming the parameter, then cuda/src/05-eplb/eplb.cu launches.
#include "ladder/core/error.hpp"
#include "ladder/cuda/05-eplb/eplb.hpp"

namespace ladder::cuda::eplb {
namespace {

void check_counts_args(const char* fn, const int64_t* topk, int64_t num_tokens, int64_t k, int64_t num_log,
                       const int32_t* counts) {
  require(num_tokens >= 0, "cuda::eplb::{}: num_tokens = {} violates num_tokens >= 0", fn, num_tokens);
  require(k >= 1, "cuda::eplb::{}: k = {} violates k >= 1", fn, k);
  require(num_log >= 1, "cuda::eplb::{}: num_log = {} violates num_log >= 1", fn, num_log);
  require(num_tokens <= ((int64_t{1} << 31) - 1) / k,
          "cuda::eplb::{}: num_tokens * k = {} * {} violates num_tokens * k < 2^31 (int32 counts)", fn, num_tokens, k);
  require(counts != nullptr, "cuda::eplb::{}: counts = nullptr violates counts != nullptr", fn);
  require(topk != nullptr || num_tokens == 0, "cuda::eplb::{}: topk = nullptr with num_tokens = {}", fn, num_tokens);
}

}  // namespace

void count_expert_load_v1_global(const int64_t* topk, int64_t num_tokens, int64_t k, int64_t num_log,
                                 int32_t* counts) {
  check_counts_args("count_expert_load_v1_global", topk, num_tokens, k, num_log, counts);
  detail::launch_count_v1_global(topk, num_tokens * k, num_log, counts);
}

void count_expert_load_v2_shared(const int64_t* topk, int64_t num_tokens, int64_t k, int64_t num_log,
                                 int32_t* counts) {
  check_counts_args("count_expert_load_v2_shared", topk, num_tokens, k, num_log, counts);
  require(num_log <= kMaxSharedBins,
          "cuda::eplb::count_expert_load_v2_shared: num_log = {} violates num_log <= {} (48 KiB shared histogram)",
          num_log, kMaxSharedBins);
  detail::launch_count_v2_shared(topk, num_tokens * k, num_log, counts);
}

void map_to_physical(const int64_t* topk, int64_t num_tokens, int64_t k, const int64_t* log2phy, int64_t max_cnt,
                     const int64_t* logcnt, int64_t num_log, int64_t* phys) {
  const char* fn = "map_to_physical";
  require(num_tokens >= 0, "cuda::eplb::{}: num_tokens = {} violates num_tokens >= 0", fn, num_tokens);
  require(k >= 1, "cuda::eplb::{}: k = {} violates k >= 1", fn, k);
  require(num_log >= 1, "cuda::eplb::{}: num_log = {} violates num_log >= 1", fn, num_log);
  require(max_cnt >= 1, "cuda::eplb::{}: max_cnt = {} violates max_cnt >= 1", fn, max_cnt);
  require(log2phy != nullptr && logcnt != nullptr, "cuda::eplb::{}: log2phy or logcnt is nullptr", fn);
  require(num_tokens == 0 || (topk != nullptr && phys != nullptr),
          "cuda::eplb::{}: topk or phys is nullptr with num_tokens = {}", fn, num_tokens);
  detail::launch_map_to_physical(topk, num_tokens, k, log2phy, max_cnt, logcnt, num_log, phys);
}

}  // namespace ladder::cuda::eplb
