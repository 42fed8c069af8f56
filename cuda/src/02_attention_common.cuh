// cuda/src/02_attention_common.cuh -- stage 02: what the attention kernels' .cu files share
// (02_attention.cu, 02_attention_tiled.cu, 02_attention_backward.cu): the mask's last key per query row
// and the grid size. Private to cuda/src, never installed (ladder/cuda/attention_kernels.hpp is the
// plain C++ side, free of device code). Internal linkage: each .cu gets its own copy, as when each
// defined them itself. Compiled by nvcc and, through cuda/simt, by g++.
#pragma once
#include <stddef.h>

#include "ladder/cuda/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

// The last key query row i may attend (< 0: the row is fully masked), problem.hpp's rule.
__device__ __forceinline__ int last_key(const Dims& p, int i) {
  return p.causal ? min(p.Nk - 1, i + p.Nk - p.Nq) : p.Nk - 1;
}

inline unsigned blocks_for(size_t n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

}  // namespace
}  // namespace ladder::cuda::attention
