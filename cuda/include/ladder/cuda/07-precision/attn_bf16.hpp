// ladder/cuda/07-precision/attn_bf16.hpp -- stage 07's CUDA rung attn_bf16: the recipe of
// ladder/07-precision/attn_bf16.hpp run by stage 02's tensor-core forward, tiled_bf16
// (cuda/src/02-attention/attention_bf16.cuh). Why tiled_bf16's arithmetic is inside the recipe's bound, and
// which params it refuses: cuda/src/07-precision/attn_bf16_rung.cpp.
#pragma once
#include <vector>

#include "ladder/07-precision/attn_bf16.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"

namespace ladder::cuda::precision {

struct AttnBf16Out {
  std::vector<float> o, lse;  // [Lq, dv], [Lq]
};

// Q, K, V of `a` rounded to bf16 (RNE), zero-padded to max(d, dv) columns, through tiled_bf16 (one batch, one
// head, not causal) with score scale `scale` (the rung passes a.sigma; tests plant others). Checks a's sizes and
// magnitudes (ladder::Error naming them), not a.bc (the rung's check).
AttnBf16Out attn_bf16_tiled(const ladder::precision::AttnOperands& a, float scale);

// The rung: the case's inputs and params (recipe attn_bf16) -> o [Lq, dv], lse [Lq] (float32), or an Error
// naming the param tiled_bf16 cannot honour.
Tensors attn_bf16_rung(const ladder::precision::Recipe& r, const Tensors& in);

}  // namespace ladder::cuda::precision
