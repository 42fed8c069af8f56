// ladder/07-precision/recipe_cost.hpp -- the cost formulas of stage 07's rungs, one per kind of recipe, shared by
// the reference rungs (ref/src/07-precision/registry.cpp) and the CUDA rungs (cuda/src/07-precision/registry.cpp):
// a rung's cost is its recipe's, whoever runs it.
#pragma once
#include "ladder/core/cost.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

// The GEMM recipes (a8w8, fp8_block, moe_*): s = {M, K, N}; 2 M K N operations, one byte per code read, float32
// outputs written.
inline Cost gemm_cost(const Shape& s) {
  Cost c;
  if (s.size() == 3) {
    c.flops = 2.0 * static_cast<double>(s[0] * s[1] * s[2]);
    c.bytes_read = static_cast<double>(s[0] * s[1] + s[1] * s[2]);
    c.bytes_written = 4.0 * static_cast<double>(s[0] * s[2]);
  }
  return c;
}

// bf16_gemm: as gemm_cost, two bytes per bf16 code read.
inline Cost bf16_cost(const Shape& s) {
  Cost c = gemm_cost(s);
  c.bytes_read *= 2;
  return c;
}

// Rungs (e), (f): s = {rows, L, n, dv}: each of `rows` query rows scores L keys of n values and sums L values of dv;
// one byte per cached code (the cache is read once), float32 outputs.
inline Cost attn_cost(const Shape& s) {
  Cost c;
  if (s.size() == 4) {
    c.flops = 2.0 * static_cast<double>(s[0] * s[1] * (s[2] + s[3]));
    c.bytes_read = static_cast<double>(s[1] * s[2]);
    c.bytes_written = 4.0 * static_cast<double>(s[0] * s[3]);
  }
  return c;
}

}  // namespace ladder::precision
