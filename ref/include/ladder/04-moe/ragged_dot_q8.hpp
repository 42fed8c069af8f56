// ladder/04-moe/ragged_dot_q8.hpp -- ragged_dot with int8 rhs, the int8 option of the JAX code: rhs
// stored as int8 with one scale per output channel (per group, per column n), dequantised in the
// product: out = (lhs q[g]) * scale[g, n]. The rung dropless_int8 (sorted.hpp) runs it. Kept out of
// ragged_dot.hpp, the file lab 04's students write (a finished sibling would be their answer).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ladder/core/gemm.hpp"
#include "ladder/04-moe/config.hpp"
#include "ladder/04-moe/quant.hpp"
#include "ladder/04-moe/ragged_dot.hpp"

namespace ladder::moe {

// ragged_dot with int8 rhs: the integer codes enter the product, the scale multiplies each output column.
template <class T>
void ragged_dot_q8(const T* lhs, Index m, const QuantizedRhs& rhs, const Index* group_sizes, T* out) {
  const Index K = rhs.K, N = rhs.N;
  check_ragged(m, K, rhs.G, N, group_sizes);
  std::vector<T> codes;
  Index start = 0;
  for (Index g = 0; g < rhs.G; ++g) {
    const Index rows = group_sizes[g];
    if (rows > 0) {
      codes.assign(rhs.q.begin() + g * K * N, rhs.q.begin() + (g + 1) * K * N);
      gemm<T>(rows, N, K, T(1), lhs + start * K, K, Op::N, codes.data(), N, Op::N, out + start * N, N);
      for (Index i = start; i < start + rows; ++i)
        for (Index n = 0; n < N; ++n) out[i * N + n] *= T(rhs.scale[static_cast<size_t>(g * N + n)]);
    }
    start += rows;
  }
  std::fill(out + start * N, out + m * N, T(0));
}

}  // namespace ladder::moe
