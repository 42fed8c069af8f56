// cuda/src/01_softmax_host.cpp -- the checked host API of the stage-01 kernels (ladder/cuda/softmax.hpp)
// and their registry entries. Sizes are validated here, with ladder::Error naming the parameter, then
// cuda/src/01_softmax.cu launches. Each registry entry's f32 function copies x to a device buffer, runs the kernel and copies y back, so tests,
// the CLI and notebooks call a CUDA rung exactly like a reference rung. (f64 is empty: fp32 kernels.)
#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/softmax.hpp"
#include "ladder/softmax.hpp"

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

namespace {

using Kernel = void (*)(const float*, float*, int64_t, int64_t);

ladder::softmax::RowsFns host_wrapper(Kernel k) {
  return {[k](const float* x, float* y, int64_t rows, int64_t cols) {
            ladder::softmax::check_rows(x, y, rows, cols);
            const size_t n = static_cast<size_t>(rows * cols);
            DeviceBuffer<float> dx(x, n), dy(n);
            k(dx.data(), dy.data(), rows, cols);
            sync();
            dy.copy_to_host(y, n);
          },
          nullptr};
}

}  // namespace

void register_softmax_cuda(Registry& r) {
  namespace sm = ladder::softmax;
  r.add({"01-softmax", "v1_naive", "naive, thread per row", "each thread loops over its row twice (sum of exp, divide)",
         "cuda", host_wrapper(&softmax::v1_naive), &sm::naive_cost, "as ref naive: 3 accesses/elem"});
  r.add({"01-softmax", "v2_safe", "safe, block per row", "max and sum-of-exp as block reductions (shuffles + shared)",
         "cuda", host_wrapper(&softmax::v2_safe), &sm::safe_cost, "as ref safe: 4 accesses/elem"});
  r.add({"01-softmax", "v3_online", "online, block per row", "per-thread (m, d) pairs merged by shuffles + shared",
         "cuda", host_wrapper(&softmax::v3_online), &sm::online_cost, "as ref online: 3 accesses/elem"});
  r.add({"01-softmax", "v4_online_warp", "online, warp per row", "short rows: (m, d) merged by shuffles only",
         "cuda", host_wrapper(&softmax::v4_online_warp), &sm::online_cost, "as ref online: 3 accesses/elem"});
}

}  // namespace ladder::cuda
