// ref/src/07-precision/registry.cpp -- stage 07's reference rungs: one per recipe. Each stores a
// precision::RecipeFns (ladder/07-precision/recipe.hpp): the recipe's outputs from x, w and the params.
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/registry.hpp"

namespace ladder {

namespace {
Cost gemm_cost(const Shape& s) {  // s = {M, K, N}
  Cost c;
  if (s.size() == 3) {
    c.flops = 2.0 * static_cast<double>(s[0] * s[1] * s[2]);
    c.bytes_read = static_cast<double>(s[0] * s[1] + s[1] * s[2]);  // one byte per code
    c.bytes_written = 4.0 * static_cast<double>(s[0] * s[2]);
  }
  return c;
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
}

}  // namespace ladder
