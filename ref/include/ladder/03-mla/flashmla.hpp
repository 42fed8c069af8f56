// ladder/03-mla/flashmla.hpp -- stage 03 in FlashMLA's own interface: the layout "03-mla/flashmla", a case
// contract (core/contract.hpp) that `ladder oracle|check|describe 03-mla/flashmla` and Python's
// ladder.check("03-mla/flashmla", ...) read like a stage's. Defined in ref/src/03-mla/flashmla.cpp.
//
// FlashMLA's decode call (deepseek-ai/FlashMLA README, "Usage"; flash_mla_interface.py docstrings):
//   tile_scheduler_metadata, num_splits = get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)
//   o, lse = flash_mla_with_kvcache(q, kvcache, block_table, cache_seqlens, dv, tile_scheduler_metadata,
//                                   num_splits, softmax_scale=..., causal=True)
// with q [b, s_q, h_q, d] (d = 576), kvcache [num_blocks, 64, h_kv, d] (h_kv = 1), block_table
// [b, max_blocks] int32, cache_seqlens [b] int32, V = the first dv = 512 dims of each cache row, and
// outputs o [b, s_q, h_q, dv], lse [b, h_q, s_q] in natural log. The causal mask is aligned bottom right:
// query token i of sequence b sees rows j <= cache_seqlens[b] - s_q + i (FlashMLA's tests/test_flash_mla.py,
// ref_mla: tril(diagonal = s_k - s_q); lse = logsumexp of the scaled scores).
//
// No second oracle: the adapter lays FlashMLA's tensors out as stage 03's contract inputs (the paged
// cache, block_table and seqlens as they are; s_q > 1 as stage 03's q_lens, one decode step per query
// token over the same pages) and computes o^lat and lse by stage 03's absorbed attention at float64
// (scores over the cache rows, lse by logsumexp_rows, mla.hpp), the float32 baseline the same at float32.
//
// The metadata / num_splits contract: a split is a scheduling choice. The oracle takes no split argument,
// so its bytes cannot depend on one (tests/03-mla/test_mla_flashmla.cpp checks params num_splits give the
// same bytes); the flash_mla rung's float32 result on several split sizes passes the rule each time.
//
// FlashMLA's own metric, reported beside the verdict (FlashMLA tests/test_flash_mla.py, cal_diff):
//   cos_diff = 1 - 2 sum(x y) / sum(x x + y y), in float64 (flashmla_cos_diff).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::mla {

inline constexpr const char* kFlashMlaLayout = "03-mla/flashmla";

// A synthetic FlashMLA case: q, kvcache (the pool holds more blocks than the table names, in shuffled
// order: spare blocks random, rows past a sequence's length NaN), block_table, cache_seqlens.
struct FlashMlaSpec {
  int64_t s_q = 2, h_q = 16, d = 576, dv = 512;
  std::vector<int64_t> seqlens = {130, 77};
  int64_t spare_blocks = 2;
  bool causal = true;
  double softmax_scale = 0;  // 0: 1/sqrt(d), FlashMLA's default
  uint64_t seed = 4101;
};
Tensors flashmla_inputs(const FlashMlaSpec& spec);
nlohmann::json flashmla_params(const FlashMlaSpec& spec);

// Stage 03's flash_mla rung (flash.hpp: flash_split per split of split_blocks pages, flash_combine by lse)
// on FlashMLA's tensors at float32: {"o" <f4 [b, s_q, h_q, dv], "lse" <f4 [b, h_q, s_q]}.
Tensors flashmla_run_flash(const Tensors& inputs, const nlohmann::json& params, int64_t split_blocks);

// FlashMLA's cosine difference of two tensors of the same size, in float64.
double flashmla_cos_diff(const Array<double>& x, const Array<double>& y);

}  // namespace ladder::mla

namespace ladder::stage_records {
Contract contract_03_mla_flashmla();
}  // namespace ladder::stage_records
