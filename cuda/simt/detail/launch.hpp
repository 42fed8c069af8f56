// simt/detail/launch.hpp -- simt::launch under g++: checks the launch configuration like the CUDA
// runtime would, then spreads the grid's blocks over OS workers, each running its blocks one at a
// time (scheduler.hpp). Returns when every block has finished, like a launch followed by
// cudaDeviceSynchronize.
#pragma once
#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <source_location>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "block.hpp"
#include "config.hpp"
#include "func_attributes.hpp"
#include "lang.hpp"
#include "scheduler.hpp"
#include "tsan.hpp"

namespace simt {
namespace detail {

inline std::string text(dim3 d) { return cat("(", d.x, ",", d.y, ",", d.z, ")"); }

// The grid argument of simt::launch, with where the launch is (for the errors that name the kernel): anything
// that converts to dim3, as `kernel<<<grid, ...>>>` takes.
struct LaunchGrid {
  dim3 grid;
  std::source_location at;
  template <class G>
    requires std::convertible_to<G, dim3>
  LaunchGrid(G g, std::source_location where = std::source_location::current()) : grid(dim3(g)), at(where) {}
};

// Host-side errors throw, naming the parameter, its value and the constraint. max_shared: the kernel's dynamic
// shared memory limit (48 KiB, or what cudaFuncSetAttribute set: func_attributes.hpp); `kernel`: its name.
inline void check_launch(dim3 grid, dim3 block, std::size_t shared_bytes, SharedLimit max_shared = {},
                         const std::string& kernel = "") {
  auto require = [](bool ok, const auto&... what) {
    if (!ok) throw std::invalid_argument(cat("simt::launch: ", what...));
  };
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  require(threads >= 1 && threads <= 1024,
          "block = ", text(block), " = ", threads, " threads violates 1 <= threads <= 1024");
  require(block.x <= 1024 && block.y <= 1024 && block.z <= 64,
          "block = ", text(block), " violates x <= 1024, y <= 1024, z <= 64");
  require(grid.x >= 1 && grid.y >= 1 && grid.z >= 1, "grid = ", text(grid), " violates x, y, z >= 1");
  require(grid.x <= 2147483647u && grid.y <= 65535 && grid.z <= 65535,
          "grid = ", text(grid), " violates x <= 2^31-1, y <= 65535, z <= 65535");
  require(shared_bytes <= max_shared.bytes, "smem = ", shared_bytes, " bytes violates smem <= ", max_shared.bytes,
          max_shared.opted_in ? " (the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize)"
                   : cat(" (without the opt-in; up to ", optin_dynamic_shared_bytes, " on the emulated ", emulated_arch,
                         " after cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))"),
          kernel.empty() ? "" : " for ", kernel);
}

inline void run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, Kernel kernel, SharedLimit max_shared,
                     const std::string& kernel_name) {
  if (running_block) fail("simt::launch called inside a kernel (dynamic parallelism is not emulated)");
  check_launch(grid, block, shared_bytes, max_shared, kernel_name);
  const Config config = simt::config();
  const long blocks = 1L * grid.x * grid.y * grid.z;
  const long hardware = std::max(1u, std::thread::hardware_concurrency());
  const long workers = std::min(config.threads > 0 ? config.threads : hardware, blocks);
  // Relaxed: handing out block numbers must not order one worker's blocks after another's, or TSan
  // would miss races between blocks.
  std::atomic<long> next{0};
  auto work = [&] {
    tsan::runtime_begin();
    {
      Block b(config, grid, block, shared_bytes, kernel);
      b.take_fibers(&thread_main);
      running_block = &b;
      blockDim = block;
      gridDim = grid;
      for (long i; (i = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) run_block(b, i);
      running_block = nullptr;
    }
    tsan::runtime_end();
  };
  std::vector<std::jthread> helpers;
  for (long i = 1; i < workers; ++i) helpers.emplace_back(work);
  work();  // the launching thread is worker 0
}

}  // namespace detail

// launch(kernel, grid, block, smem, args...) == kernel<<<grid, block, smem>>>(args...) + synchronize.
// The arguments are converted to the kernel's parameter types once, like kernel parameters; every
// CUDA thread then receives its own copies.
// Above 48 KiB of dynamic shared memory the kernel must opt in first, as on a GPU (func_attributes.hpp).
template <class... P, class... A>
void launch(void (*kernel)(P...), detail::LaunchGrid grid, dim3 block, std::size_t smem, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "simt::launch: the kernel takes a different number of arguments");
  struct Call {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> args;
  };
  const Call call{kernel, std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)};
  const detail::Kernel body{[](const void* c) {
                              const Call& k = *static_cast<const Call*>(c);
                              std::apply(k.kernel, k.args);
                            },
                            &call};
  const detail::SharedLimit max_shared = detail::max_dynamic_shared_bytes(reinterpret_cast<const void*>(kernel));
  detail::run_grid(grid.grid, block, smem, body, max_shared,
                   smem > max_shared.bytes ? detail::kernel_text(kernel, "launched", grid.at) : std::string());
}

}  // namespace simt
