// ref/src/07-precision/registry.cpp -- stage 07's reference rungs: one per recipe. Each stores a
// precision::RecipeFns (ladder/07-precision/recipe.hpp): the recipe's outputs from x, w and the params.
#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/07-precision/recipe_cost.hpp"
#include "ladder/core/registry.hpp"

namespace ladder {

namespace {
using precision::attn_cost, precision::bf16_cost, precision::gemm_cost;  // recipe_cost.hpp
// ref/bf16_gemm: the recipe's codes and y = gemm_bf16_cpu on them (float32 only, as the CPU kernels are).
Tensors bf16_gemm_cpu_rung(const precision::Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  require(r.name == "bf16_gemm", "ref 07-precision/bf16_gemm: params.recipe = {} violates recipe == bf16_gemm", r.name);
  require(x.cols() == w.rows(), "bf16_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
  const std::vector<uint16_t> xq = precision::bf16_codes(x, "x"), wq = precision::bf16_codes(w, "w");
  Array<float> y({x.rows(), w.cols()});
  precision::gemm_bf16_cpu(xq.data(), wq.data(), y.data.data(), x.rows(), x.cols(), w.cols());
  return Tensors{{"xq", to_npy(precision::bf16_codes_i32(xq, x.rows(), x.cols()))},
                 {"wq", to_npy(precision::bf16_codes_i32(wq, w.rows(), w.cols()))},
                 {"y", to_npy(y)}};
}
}  // namespace

void register_precision(Registry& r) {
  using precision::RecipeFns;
  r.add({"07-precision", "a8w8", "A8W8 GEMM (int8 x int8 -> int32, per-token x per-channel dequant)",
         "int8 codes per token / per output channel, exact int32 sum (K <= 131071), y = acc * xs * ws in float32",
         "ref", RecipeFns{"a8w8"}, &gemm_cost, "2 M K N integer ops; 1 byte per code read, 4 per output written"});
  r.add({"07-precision", "fp8_block", "FP8 E4M3 block-scaled GEMM (DeepSeek-V3 §3.3)",
         "1x128 / 128x128 amax/448 scales, acc_bits-bit accumulator promoted to float32 every nc elements", "ref",
         RecipeFns{"fp8_block"}, &gemm_cost, "2 M K N flops; 1 byte per code read, 4 per output written"});
  // The bf16 GEMM recipe (ladder/07-precision/bf16_gemm.hpp).
  r.add({"07-precision", "bf16_gemm", "bf16 GEMM, exact products, float32 accumulation (MLA's projections)",
         "x, w rounded to bf16 (RNE), y = gemm_bf16_cpu on the codes: VDPBF16PS's pairs, DAZ / FTZ, the same bits on "
         "every CPU", "ref", RecipeFns{"bf16_gemm", &bf16_gemm_cpu_rung}, &bf16_cost,
         "2 M K N flops; 2 bytes per code read, 4 per output written"});
  // Rung (d): stage 04's routed experts through the ragged dot (ladder/07-precision/moe_quant.hpp). Here, not in
  // stage 04: they are judged as 07's recipes are (exact codes and int32 sums, a bound derived from the recipe),
  // while stage 04's contract judges float layers by k x a float32 baseline. Cost shape {T k, K, N}.
  r.add({"07-precision", "moe_a8w8", "MoE experts A8W8 through the ragged dot",
         "tokens int8 per token (before dispatch), experts int8 per channel, sorted by expert, int32 ragged dot, "
         "float32 dequant, unsorted to assignment order", "ref", RecipeFns{"moe_a8w8"}, &gemm_cost,
         "2 (T k) K N integer ops; weights 1 byte per code"});
  r.add({"07-precision", "moe_a8w4", "MoE experts A8W4 (packed int4, group scales) through the ragged dot",
         "tokens int8 per token, experts int4 in groups of g along K (packed two per byte), int32 sums per group, "
         "float32 dequant summed over groups", "ref", RecipeFns{"moe_a8w4"}, &gemm_cost,
         "2 (T k) K N integer ops; weights half a byte per code (+ 4 bytes per group scale)"});
  // Rungs (e), (f) (ladder/07-precision/kv_quant.hpp, attn_bf16.hpp): judged by the bound of attn_bound.hpp.
  r.add({"07-precision", "kv_int8", "MLA decode over an int8 KV cache (one scale per token)",
         "each cache row [c^KV | k^R] int8, amax/127 per token, dequantised in stage 03's absorbed attention, "
         "u = W_absO o^lat", "ref", RecipeFns{"kv_int8"}, &attn_cost,
         "2 H L (R + rope + R) flops per token; R + rope + 4 bytes per cached token"});
  r.add({"07-precision", "kv_fp8", "MLA decode over FlashMLA's 656-byte FP8 KV record",
         "latent E4M3 with one amax/448 scale per 128, RoPE part bf16, dequantised in stage 03's absorbed attention",
         "ref", RecipeFns{"kv_fp8"}, &attn_cost, "2 H L (R + rope + R) flops per token; R + R/32 + 2 rope bytes per token"});
  r.add({"07-precision", "attn_bf16", "bf16 tiled attention forward, float32 accumulation (FlashAttention-2)",
         "Q, K, V bf16 RNE, S and O in float32, online softmax over tiles of bc keys, P rounded to bf16 before P V",
         "ref", RecipeFns{"attn_bf16"}, &attn_cost, "2 Lq Lk (d + dv) flops; 2 bytes per value read"});
}

}  // namespace ladder
