// simt/detail/block.hpp -- the state of the block a worker is running: its CUDA threads (one fiber
// each), what each one waits for, the warps' pending collectives and the dynamic shared memory.
//
// One Block object per OS worker and launch; it runs the worker's blocks one after another, so the
// fibers, shared memory and vectors are allocated once per launch, not once per block.
#pragma once
#include <array>
#include <cstddef>
#include <deque>
#include <cstdint>
#include <memory>
#include <random>
#include <source_location>
#include <string>
#include <vector>

#include "config.hpp"
#include "fiber.hpp"
#include "fiber_pool.hpp"
#include "lang.hpp"

namespace simt::detail {

enum class ThreadState : std::uint8_t { unstarted, runnable, at_barrier, in_warp_collective, exited };

// matrix: a tensor-core collective (ldmatrix, mma.sync; tensor_core.hpp). Each lane passes a pointer
// to its operands as `value` and the emulating function as `arg`; the last lane to arrive runs it once.
enum class WarpOp : std::uint8_t { shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all, syncwarp, matrix };

// A cp.async a thread has issued and whose wait_group has not come yet (tensor_core.hpp): the copy
// is deferred until then, and its destination reads as 0xFF bytes meanwhile.
struct AsyncCopy {
  std::byte* dst;
  const std::byte* src;
  int bytes, src_bytes;  // bytes past src_bytes are zero-filled
  std::source_location at;
};
struct AsyncCopies {
  std::vector<AsyncCopy> open;                    // issued since the last commit_group
  std::deque<std::vector<AsyncCopy>> committed;  // oldest group first
};

// The collectives the lanes of one warp are waiting in. A collective completes when every lane of
// its mask has arrived; disjoint masks may be pending at the same time (divergent branches).
struct Warp {
  unsigned waiting = 0;  // lanes that arrived at a collective that has not completed yet
  unsigned exited = 0;   // lanes whose thread has returned from the kernel
  std::array<WarpOp, 32> op{};
  std::array<unsigned, 32> mask{};
  std::array<int, 32> width{};
  std::array<long long, 32> arg{};  // source lane, delta or lane mask, per lane
  std::array<std::uint64_t, 32> value{};
  std::array<std::uint64_t, 32> result{};
  // TSan sync objects of __syncwarp, keyed by the lowest lane of the mask (disjoint masks never
  // share one) and alternating per generation (a fast lane's next __syncwarp must not release
  // into the object a slow lane has yet to acquire).
  std::array<unsigned, 32> sync_generation{};
  std::array<std::array<char, 2>, 32> tsan_sync{};
};

// Runs the kernel body with the launch's arguments for the current thread.
struct Kernel {
  void (*run)(const void* call);
  const void* call;
};

struct Block {
  Block(const Config& c, dim3 grid, dim3 block, std::size_t shared_bytes, Kernel k)
      : config(c),
        grid_dim(grid),
        block_dim(block),
        size(static_cast<int>(block.x * block.y * block.z)),
        kernel(k),
        dynamic_shared_bytes(shared_bytes),
        dynamic_shared(shared_bytes ? std::make_unique<std::byte[]>(shared_bytes) : nullptr),
        thread_index(size),
        fibers(size),
        state(size),
        waits_at(size),
        waits_in(size),
        order(size),
        warps((size + 31) / 32),
        async(size) {
    // Linear thread id = x + y*Dx + z*Dx*Dy: warps are consecutive runs of 32 linear ids, as on the GPU.
    for (int t = 0; t < size; ++t)
      thread_index[t] = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
  }

  // Fibers are taken before the first block runs: a fiber given back by a worker that has finished
  // cannot then serve another worker's blocks in the same launch (under TSan that would order them).
  void take_fibers(Fiber::Job job) {
    for (int t = 0; t < size; ++t) {
      fibers[t] = FiberPool::instance().take(config.stack_bytes);
      fibers[t]->assign(job, this, t);
    }
  }

  ~Block() {
    for (auto& f : fibers)
      if (f) FiberPool::instance().give(config.stack_bytes, std::move(f));
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  Config config;
  dim3 grid_dim, block_dim;
  int size;
  Kernel kernel;
  std::size_t dynamic_shared_bytes;
  std::unique_ptr<std::byte[]> dynamic_shared;  // operator new[]: aligned for any fundamental type
  std::vector<uint3> thread_index;
  std::vector<std::unique_ptr<Fiber>> fibers;  // one per thread index, for every block of the launch

  std::vector<ThreadState> state;
  std::vector<std::source_location> waits_at;  // where a thread waits (barrier or warp collective)
  std::vector<const char*> waits_in;           // the primitive it waits in, for diagnostics
  std::vector<int> order;                      // the schedule: the sweep order of thread ids
  std::vector<Warp> warps;
  std::vector<AsyncCopies> async;  // per thread: its cp.async copies in flight
  int running = -1;  // thread id of the fiber now running; -1 while the scheduler runs
  int live = 0;      // threads that have not exited
  int at_barrier = 0;
  unsigned barrier_generation = 0;
  std::mt19937_64 rng;
  char tsan_block_start = 0, tsan_block_end = 0;
  std::array<char, 2> tsan_barrier{};
};

// The block this OS worker runs; null outside a launch.
inline thread_local Block* running_block = nullptr;

inline std::string block_name() {
  return cat("block (", blockIdx.x, ",", blockIdx.y, ",", blockIdx.z, ")");
}

inline std::string thread_name(const Block& b, int tid) {
  const uint3 i = b.thread_index[tid];
  return cat("thread (", i.x, ",", i.y, ",", i.z, ")");
}

// The block of the calling CUDA thread; a device function called from host code is an error.
inline Block& current_block(const char* what, const std::source_location& at) {
  if (!running_block || running_block->running < 0)
    fail(what, " called outside a kernel, at ", where(at));
  return *running_block;
}

}  // namespace simt::detail
