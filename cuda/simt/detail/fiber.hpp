// simt/detail/fiber.hpp -- the execution context of one CUDA thread: a Boost.Context fiber.
//
// A fiber runs a job (one CUDA thread's kernel body) each time the scheduler starts it and may
// suspend itself in the middle of the job (at __syncthreads or a warp collective). Between jobs it
// waits, parked, at the end of its loop; it serves the same thread index for every block of a
// launch, and later launches through the pool (fiber_pool.hpp), possibly on another OS worker.
// That move is safe because a parked fiber holds no frame that has touched thread-local storage:
// every job starts with fresh frames.
#pragma once
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <cstddef>
#include <memory>
#include <utility>

#include "tsan.hpp"

namespace simt::detail {

class Fiber {
 public:
  using Job = void (*)(void* context, int tid);

  // The stack has a guard page: a kernel whose locals overflow it dies with SIGSEGV instead of
  // silently corrupting a neighbour (raise SIMT_STACK_KB).
  explicit Fiber(std::size_t stack_bytes)
      : tsan_(tsan::create_fiber()),
        fiber_(std::allocator_arg, boost::context::protected_fixedsize_stack(stack_bytes),
               [this](boost::context::fiber&& scheduler) { return main(std::move(scheduler)); }) {}
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Only called when the fiber is parked (or never started): it leaves its loop and ends.
  ~Fiber() {
    stop_ = true;
    resume();
    tsan::destroy_fiber(tsan_);
  }

  // The job the next start runs.
  void assign(Job job, void* context, int tid) {
    job_ = job;
    context_ = context;
    tid_ = tid;
  }

  // Scheduler -> fiber. Returns when the fiber suspends (mid-job or after finishing its job).
  void resume() {
    scheduler_tsan_ = tsan::current_fiber();
    tsan::switch_to(tsan_);
    fiber_ = std::move(fiber_).resume();
    if (!fiber_) tsan::switch_to(scheduler_tsan_);  // the fiber ended: see main()
  }

  // Fiber -> scheduler. Called only on this fiber's own stack.
  void suspend() {
    tsan::switch_to(scheduler_tsan_);
    scheduler_ = std::move(scheduler_).resume();
  }

 private:
  boost::context::fiber main(boost::context::fiber&& scheduler) {
    tsan::runtime_begin();  // loop bookkeeping is layer code; the job re-enables checks for the kernel
    scheduler_ = std::move(scheduler);
    while (!stop_) {
      job_(context_, tid_);
      suspend();
    }
    tsan::runtime_end();  // a TSan fiber must not be destroyed with ignores enabled
    // TSan stays on this fiber's context until the switch has happened (resume() switches back), so
    // the frames left on the way out are popped from this fiber's shadow stack.
    return std::move(scheduler_);
  }

  Job job_ = nullptr;
  void* context_ = nullptr;
  int tid_ = -1;
  bool stop_ = false;
  void* scheduler_tsan_ = nullptr;
  void* tsan_;
  boost::context::fiber scheduler_;  // valid while the fiber runs: where suspend() returns to
  boost::context::fiber fiber_;      // valid while the fiber is suspended: where resume() continues
};

}  // namespace simt::detail
