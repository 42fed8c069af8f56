// cuda/src/03-mla/mla_common.cuh -- stage 03: what the MLA kernels' .cu files share (mla.cu and
// mla_gemm.cu): the grid size of a grid-stride launch. Private to cuda/src, never installed
// (ladder/cuda/03-mla/mla_kernels.hpp is the plain C++ side). Internal linkage: each .cu gets its own copy, as
// when mla.cu held both. Compiled by nvcc and, through cuda/simt, by g++.
#pragma once
#include <stdint.h>

namespace ladder::cuda::mla {
namespace {

inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return (unsigned)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace
}  // namespace ladder::cuda::mla
