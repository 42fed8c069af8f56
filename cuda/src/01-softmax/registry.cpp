// cuda/src/01-softmax/registry.cpp -- the stage-01 CUDA rungs in the registry (backend "cuda"). Each entry's f32
// function copies x to a device buffer, runs the kernel and copies y back, so tests, the CLI and notebooks
// call a CUDA rung exactly like a reference rung. (f64 is empty: fp32 kernels.)
#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/01-softmax/softmax.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder::cuda {

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

// Called by the list CMake generates from the folders cuda/src/NN-stage/ (cuda/CMakeLists.txt).
void rungs_01_softmax(Registry& r) {
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
