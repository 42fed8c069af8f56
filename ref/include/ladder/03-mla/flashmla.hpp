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
// The FP8 "with scale" cache (FlashMLA README, "FP8 KV Cache"; tests/quant.py): kcache may instead be |u1
// [num_blocks, 64, 1, 656], each token's record 512 E4M3 latent values, 4 float32 scales (scale g for values
// [128 g, 128 g + 128)), 64 bf16 RoPE values: stage 07's kv_fp8 record (07-precision/kv_quant.hpp, which
// quantises and lays it out). The oracle dequantises every record exactly (code x scale in float64) and
// attends at float64; the cache bytes ARE the case's input, so there is no quantisation error to carry (unlike
// 07's kv_fp8 rung, judged against the unquantised cache): the usual rule applies, its float32 baseline
// attending over fl32(code x scale), the one rounding a float32 kernel makes when it dequantises.
//
// Sparse decode (README, "Sparse Attention (indices tensor)"; tests/ref.py ref_sparse_attn_decode): an input
// indices [b, s_q, topk], entry = physical block x 64 + offset (block_table already applied, so block_table and
// cache_seqlens are not read), -1 = invalid; each query token attends over the listed rows only, no causal mask
// (param causal must be false), lse in natural log as the dense call. A duplicated index counts as often as it
// occurs: FlashMLA's reference gathers kv[indices] and softmaxes over all topk entries, and its sparse tests'
// generators produce duplicates (tests/test_flash_mla_prefill.py). A token with no valid entry (a "lonely" query token)
// gets o = 0 and lse = +inf (tests/ref.py ref_sparse_attn_decode: "Correct for q tokens which has no attendable k"): the
// oracle writes exactly that and the rule judges it exactly (+inf must sit where the oracle's is; the token's o slice has
// scale 0, so its tolerance is 0). Two optional sparse inputs (flash_mla_interface.py, flash_mla_with_kvcache):
// topk_length [b] int32, "only the leftmost topk_length indices will be processed" (entries past it are ignored,
// whatever they hold); attn_sink [h_q] float32, a logit per head: o is "scaled by exp(lse) / (exp(lse) +
// exp(attn_sink))", i.e. e^sink joins the softmax denominator without a value row, "no affect on the returned
// softmax_lse"; +inf makes o 0 (tests/ref.py: o *= 1 / (1 + exp(sink - lse))).
//
// FlashMLA's own metric, reported beside the verdict (FlashMLA tests/test_flash_mla.py, cal_diff):
//   cos_diff = 1 - 2 sum(x y) / sum(x x + y y), in float64 (flashmla_cos_diff).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
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
  bool kv_fp8 = false;       // kcache as FP8 records |u1 [num_blocks, 64, 1, dv + 4 dv/128 + 2 (d - dv)]
  int64_t topk = 0;          // > 0: sparse decode, indices [b, s_q, topk] (causal false; -1 entries, duplicates)
  bool lonely = false;       // sparse: query token (0, 0) gets only -1 entries (o = 0, lse = +inf)
  bool topk_length = false;  // sparse: input topk_length [b] < topk, valid rows past it (ignoring it shows)
  bool sink = false;         // sparse: input attn_sink [h_q] (head 0: -inf, head 1: +inf, the others finite)
};
Tensors flashmla_inputs(const FlashMlaSpec& spec);
nlohmann::json flashmla_params(const FlashMlaSpec& spec);

// Bugs a port makes, planted in the flash rung's reading of the cache or of indices (a mutant candidate the checks
// must reject): an FP8 record's scale taken from the neighbouring 128-group, its RoPE bytes read as E4M3 codes, its
// scale divided instead of multiplied; an index -1 read as row 0; a duplicated index counted once; a lonely token's o
// written as 0/0 = NaN and its lse as log 0 = -inf; topk_length ignored (all topk entries read); attn_sink ignored.
enum class FlashMlaBug {
  none, scale_neighbour, rope_as_fp8, scale_divide, invalid_as_row0, dedup, lonely_nan, topk_length_ignored,
  sink_ignored
};
const char* flashmla_bug_name(FlashMlaBug b);
FlashMlaBug flashmla_bug(const std::string& name);  // Error naming the known bugs

// Stage 03's flash_mla rung (flash.hpp: flash_split per split of split_blocks pages, flash_combine by lse)
// on FlashMLA's tensors at float32: {"o" <f4 [b, s_q, h_q, dv], "lse" <f4 [b, h_q, s_q]}; prec F8: the same
// algorithm at float64 on the cache rows as the oracle reads them (<f8 outputs: a float64 candidate computed another
// way, judged by the derived fp64 bound); a bug planted in the float32 values of FP8 records is refused there.
Tensors flashmla_run_flash(const Tensors& inputs, const nlohmann::json& params, int64_t split_blocks,
                           FlashMlaBug bug = FlashMlaBug::none, DType prec = DType::F4);

// FlashMLA's cosine difference of two tensors of the same size, in float64.
double flashmla_cos_diff(const Array<double>& x, const Array<double>& y);

// Sparse prefill, flash_mla_sparse_fwd (README "Sparse MLA Prefill" and its equivalent PyTorch code;
// tests/test_flash_mla_prefill.py reference_torch): q [s_q, h_q, d_qk], kv [s_kv, h_kv = 1, d_qk], indices
// [s_q, h_kv, topk] (entries < 0 or >= s_kv invalid), returning (out, max_logits, lse) with
//   P = (q . kv[indices]) x sm_scale x log2(e),  max_logits = max P,  lse = log2 sum 2^P,  out = sum 2^(P - lse) kv[:d_v]
// so max_logits and lse are in BASE 2 (log2 of the sum of e^{scaled score}, i.e. the natural lse / ln 2); out is
// unaffected. The layout "03-mla/flashmla_sparse_prefill", defined in ref/src/03-mla/flashmla_sparse.cpp. A lonely token:
// out = 0, max_logits = -inf, lse = +inf; topk_length [s_q] and attn_sink [h_q] as in decode (flash_mla_sparse_fwd's
// docstring; tests/ref.py ref_sparse_attn_fwd merges the sink with the natural-log lse, so the sink is in natural-log
// units here too, and leaves max_logits and lse as they are). Note: FlashMLA's later tests/ref.py and
// tests/test-sparse-prefill.py compare the kernel's lse with a natural-log logsumexp; this layout follows the README's
// base-2 definition.
inline constexpr const char* kFlashMlaSparsePrefillLayout = "03-mla/flashmla_sparse_prefill";

struct FlashMlaPrefillSpec {
  int64_t s_q = 6, s_kv = 300, h_q = 16, d = 576, dv = 512, topk = 96;
  uint64_t seed = 4102;
  bool lonely = false, topk_length = false, sink = false;  // as FlashMlaSpec's (topk_length [s_q]; token 0 lonely)
};
Tensors flashmla_prefill_inputs(const FlashMlaPrefillSpec& spec);  // invalid entries (-1, >= s_kv) and duplicates
nlohmann::json flashmla_prefill_params(const FlashMlaPrefillSpec& spec);
// The flash_mla rung per query token on its listed rows at float32 (prec F8: float64): {"out", "max_logits", "lse"}
// (base 2). bug: one of the index / lonely / topk_length / sink bugs (the FP8 ones concern records this kernel does not
// read).
Tensors flashmla_prefill_run_flash(const Tensors& inputs, const nlohmann::json& params, int64_t split_blocks,
                                   FlashMlaBug bug = FlashMlaBug::none, DType prec = DType::F4);

}  // namespace ladder::mla

namespace ladder::stage_records {
Contract contract_03_mla_flashmla();
Contract contract_03_mla_flashmla_sparse_prefill();
}  // namespace ladder::stage_records
