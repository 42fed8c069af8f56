// ref/src/fp64_bound.cpp -- the float64 heuristic kept for stages without a derived bound (core/contract.hpp).
#include <cmath>

#include "ladder/core/contract.hpp"

namespace ladder {

Array<double> fp64_baseline(const Array<double>& oracle, Array<double> b) {
  require(b.shape == oracle.shape, "fp64_baseline: baseline shape {} where the oracle's is {}", shape_str(b.shape),
          shape_str(oracle.shape));
  for (int64_t i = 0; i < b.size(); ++i)
    if (std::isfinite(oracle.data[i]) && std::isfinite(b.data[i]))
      b.data[i] = oracle.data[i] + (b.data[i] - oracle.data[i]) * 0x1p-29;
  return b;
}

}  // namespace ladder
