// cuda/src/01-softmax/softmax_host.cpp -- the checked host API of the stage-01 kernels (ladder/cuda/01-softmax/softmax.hpp).
// Sizes are validated here, with ladder::Error naming the parameter, then cuda/src/01-softmax/softmax.cu
// launches. The registry entries are in registry.cpp.
#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/01-softmax/softmax.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder::cuda {
namespace softmax {
namespace {

void check_shape(const float* x, const float* y, int64_t rows, int64_t cols) {
  require(rows >= 0 && rows <= 0x7fffffff, "cuda softmax: rows = {} violates 0 <= rows <= 2^31 - 1", rows);
  require(cols >= 1 && cols <= 0x7fffffff, "cuda softmax: cols = {} violates 1 <= cols <= 2^31 - 1", cols);
  require(rows == 0 || (x != nullptr && y != nullptr), "cuda softmax: null x or y with rows = {}", rows);
}

}  // namespace

#define LADDER_CHECKED_LAUNCH(rung)                                        \
  void rung(const float* x, float* y, int64_t rows, int64_t cols) {        \
    check_shape(x, y, rows, cols);                                         \
    if (rows > 0) detail::launch_##rung(x, y, static_cast<int>(rows), static_cast<int>(cols)); \
  }
LADDER_CHECKED_LAUNCH(v1_naive)
LADDER_CHECKED_LAUNCH(v2_safe)
LADDER_CHECKED_LAUNCH(v3_online)
LADDER_CHECKED_LAUNCH(v4_online_warp)
#undef LADDER_CHECKED_LAUNCH

}  // namespace softmax

}  // namespace ladder::cuda
