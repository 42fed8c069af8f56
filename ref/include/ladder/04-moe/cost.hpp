// ladder/04-moe/cost.hpp -- what each stage-04 rung costs, as a formula of the shape {T, D, F, E, k, Fs}.
//
// FLOPs: a GEMM of [m, K] x [K, N] is 2 m K N; an expert row (SwiGLU) is 6 D F + 4 F (two [1, D] x
// [D, F] products, silu as exp + add + divide, the multiply by the up projection, one [1, F] x [F, D]
// product); the combine is 2 D per assignment. Bytes at fp32 (4 per element, 8 per index): x, the
// weights of the experts a rung touches (at most min(E, T k) routed experts; the dense fallback
// touches all E), the routing, y. extra_bytes: scratch beyond inputs and outputs.
// The routed rungs do the same arithmetic (T k expert rows); the dense fallback does T E expert rows,
// E/k times more -- the multiple the JAX README complains about, visible in `ladder reproduce 04-moe`.
#pragma once
#include <algorithm>

#include "ladder/core/cost.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::moe {

struct CostShape {
  double T, D, F, E, k, Fs;
};

inline CostShape cost_shape(const Shape& s) {
  require(s.size() == 6, "moe: cost shape {} violates shape == {{T, D, F, E, k, Fs}}", shape_str(s));
  return {double(s[0]), double(s[1]), double(s[2]), double(s[3]), double(s[4]), double(s[5])};
}

inline double expert_row_flops(double D, double F) { return 6 * D * F + 4 * F; }

inline Cost gate_cost(const Shape& shape) {
  const CostShape s = cost_shape(shape);
  // logits 2 D E, sigmoid 3 E, bias add E, group and top-k selection not counted, weights 3 k.
  return Cost{s.T * (2 * s.D * s.E + 4 * s.E + 3 * s.k), 4 * (s.T * s.D + s.E * s.D + s.E), s.T * s.k * (8 + 4), 0};
}

// Routed rungs (dense loop, dropless, ep_sharded; dropping at most): T k expert rows + combine + shared.
inline Cost routed_cost(const Shape& shape, bool sorted) {
  const CostShape s = cost_shape(shape);
  const double rows = s.T * s.k, experts = std::min(s.E, rows);
  Cost c;
  c.flops = rows * (expert_row_flops(s.D, s.F) + 2 * s.D) + s.T * expert_row_flops(s.D, s.Fs) + (s.Fs > 0 ? s.T * s.D : 0);
  c.bytes_read = 4 * (s.T * s.D + experts * 3 * s.D * s.F + 3 * s.D * s.Fs) + s.T * s.k * (8 + 4);
  c.bytes_written = 4 * s.T * s.D;
  // sorted: gathered rows [T k, D], h1 and h3 [T k, F], expert outputs [T k, D]; three index vectors.
  c.extra_bytes = sorted ? 4 * rows * (2 * s.D + 2 * s.F) + 8 * 3 * rows : 4 * (2 * s.F + s.D);
  return c;
}

inline Cost fallback_cost(const Shape& shape) {
  const CostShape s = cost_shape(shape);
  Cost c;
  c.flops = s.T * s.E * (expert_row_flops(s.D, s.F) + 2 * s.D) + s.T * expert_row_flops(s.D, s.Fs) +
            (s.Fs > 0 ? s.T * s.D : 0);
  c.bytes_read = 4 * (s.T * s.D + s.E * 3 * s.D * s.F + 3 * s.D * s.Fs) + s.T * s.k * (8 + 4);
  c.bytes_written = 4 * s.T * s.D;
  c.extra_bytes = 4 * (s.T * s.E + s.T * (2 * s.F + s.D));  // the dense [T, E] mask, one expert's scratch
  return c;
}

}  // namespace ladder::moe
