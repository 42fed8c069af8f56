// ladder/04-moe/ragged_dot.hpp -- stage 04 rung "ragged dot": one GEMM per expert over its packed rows.
//
// The contract, as JAX documents jax.lax.ragged_dot:
//   ragged_dot(lhs [m, K], rhs [G, K, N], group_sizes [G]) -> out [m, N]
//   rows [o_g, o_g + group_sizes[g]) of lhs (o_g = sum of the sizes before g) are multiplied by rhs[g];
//   rows past sum(group_sizes) are ZERO in the output; sum(group_sizes) <= m is required.
// An empty group costs nothing and no group is padded to the largest; the generic lowering that
// expands it to a dense masked [G, m, K] product (G times the FLOPs) is the dense-fallback rung.
// fp64 runs each product through ladder::gemm's fixed order (goldens are bytewise reproducible).
// ragged_dot_q8 (the int8 option of the JAX code) is in ragged_dot_q8.hpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/core/gemm.hpp"
#include "ladder/04-moe/config.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::moe {

inline void check_ragged(Index m, Index K, Index G, Index N, const Index* group_sizes) {
  require(m >= 0 && K >= 1 && G >= 1 && N >= 1, "moe::ragged_dot: m = {}, K = {}, G = {}, N = {} violate m >= 0, "
          "K, G, N >= 1", m, K, G, N);
  Index total = 0;
  for (Index g = 0; g < G; ++g) {
    require(group_sizes[g] >= 0, "moe::ragged_dot: group_sizes[{}] = {} violates group_sizes >= 0", g, group_sizes[g]);
    total += group_sizes[g];
  }
  require(total <= m, "moe::ragged_dot: sum(group_sizes) = {} violates sum(group_sizes) <= m = {}", total, m);
}

// out [m, N] = ragged_dot(lhs [m, K], rhs [G, K, N], group_sizes [G]); all row-major.
// ([[maybe_unused]]: the lab's starter leaves their use to the student; the build treats warnings as errors.)
template <class T>
LADDER_LAB_ENTRY void ragged_dot([[maybe_unused]] const T* lhs, Index m, Index K, [[maybe_unused]] const T* rhs, Index G,
                                 Index N, const Index* group_sizes, [[maybe_unused]] T* out) {
  check_ragged(m, K, G, N, group_sizes);
  // lab:todo(ragged_dot_group_loop) one product per group over its packed rows; zero the rows past sum(group_sizes)
  Index start = 0;
  for (Index g = 0; g < G; ++g) {
    const Index rows = group_sizes[g];
    if (rows > 0) gemm<T>(rows, N, K, T(1), lhs + start * K, K, Op::N, rhs + g * K * N, N, Op::N, out + start * N, N);
    start += rows;
  }
  std::fill(out + start * N, out + m * N, T(0));
  // lab:end
}

}  // namespace ladder::moe
