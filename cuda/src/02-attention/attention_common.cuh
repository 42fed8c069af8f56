// cuda/src/02-attention/attention_common.cuh -- stage 02: what the attention kernels' .cu files share
// (attention.cu, attention_tiled.cu, attention_tiled_wide.cu, attention_backward.cu, attention_bf16.cuh): the
// mask's last key per query row, the grid size, and the store of a fully masked Q tile. Private to cuda/src, never installed (ladder/cuda/02-attention/attention_kernels.hpp is the
// plain C++ side, free of device code). Internal linkage: each .cu gets its own copy, as when each
// defined them itself. Compiled by nvcc and, through cuda/simt, by g++.
#pragma once
#include <math.h>
#include <stddef.h>

#include "ladder/cuda/02-attention/attention_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::attention {
namespace {

// The last key query row i may attend (< 0: the row is fully masked), problem.hpp's rule.
__device__ __forceinline__ int last_key(const Dims& p, int i) {
  return p.causal ? min(p.Nk - 1, i + p.Nk - p.Nq) : p.Nk - 1;
}

inline unsigned blocks_for(size_t n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

// A Q tile whose rows all see no key (causal, Nq > Nk): O = 0, L = m = -inf, by the block's nt threads
// (they all return after it, before any barrier).
__device__ inline void write_masked_tile(const Dims& p, size_t bh, int r0, int br, float* Oh, float* L, float* m, int nt) {
  const int t = threadIdx.x, dv = p.dv > 0 ? p.dv : p.d;  // O's rows hold d_v entries
  for (int e = t; e < br * dv; e += nt) Oh[e] = 0.0f;
  if (t < br) {
    L[bh * p.Nq + r0 + t] = -INFINITY;
    if (m) m[bh * p.Nq + r0 + t] = -INFINITY;
  }
}

}  // namespace
}  // namespace ladder::cuda::attention
