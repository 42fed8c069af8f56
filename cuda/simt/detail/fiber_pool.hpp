// simt/detail/fiber_pool.hpp -- parked fibers, kept for later launches.
//
// Every CUDA thread of a running block needs its own fiber and stack. Making one (mmap, a guard
// page, first-touch page faults, and under TSan a fiber context) costs more than running a small
// kernel, and tests launch thousands of kernels, so a launch takes its fibers from this process-wide
// pool and gives them back when it ends. The pool keeps as many fibers as were ever in use at once
// (workers x threads per block). Under TSan a fiber keeps its context for life, so the accesses of
// its successive CUDA threads are in program order -- which, separated by whole launches, they are.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "fiber.hpp"
#include "tsan.hpp"

namespace simt::detail {

class FiberPool {
 public:
  static FiberPool& instance() {
    static FiberPool pool;
    return pool;
  }

  std::unique_ptr<Fiber> take(std::size_t stack_bytes) {
    {
      std::lock_guard lock(mutex_);
      auto& parked = parked_[stack_bytes];
      if (!parked.empty()) {
        std::unique_ptr<Fiber> fiber = std::move(parked.back());
        parked.pop_back();
        return fiber;
      }
    }
    return std::make_unique<Fiber>(stack_bytes);
  }

  void give(std::size_t stack_bytes, std::unique_ptr<Fiber> fiber) {
    std::lock_guard lock(mutex_);
    parked_[stack_bytes].push_back(std::move(fiber));
  }

  FiberPool() = default;
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;
  // At exit. Layer bookkeeping, unchecked under TSan like the rest of it.
  ~FiberPool() {
    tsan::runtime_begin();
    parked_.clear();
    tsan::runtime_end();
  }

 private:
  std::mutex mutex_;
  std::map<std::size_t, std::vector<std::unique_ptr<Fiber>>> parked_;  // by stack size
};

}  // namespace simt::detail
