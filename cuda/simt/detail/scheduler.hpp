// simt/detail/scheduler.hpp -- runs one block: its CUDA threads as fibers on this OS worker, in the
// order the schedule asks for, with __syncthreads as the barrier between sweeps.
//
// A sweep resumes every runnable thread once, in schedule order; a thread runs until it exits or
// blocks (barrier or warp collective). When no thread can run: if every live thread waits at
// __syncthreads, the barrier opens (all of them at the same source line, or the barrier is
// divergent); otherwise the block is deadlocked. Threads that exited do not hold a barrier back.
// Forward and reverse order make "thread i ran before thread j" hold for opposite pairs, so a
// missing barrier hidden by one order is exposed by the other; random draws a new order per barrier.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <source_location>
#include <string>
#include <tuple>

#include "block.hpp"
#include "config.hpp"
#include "lang.hpp"
#include "tsan.hpp"
#include "warp.hpp"

namespace simt::detail {

// The fiber's job: one CUDA thread of one block. Layer code runs with TSan checks off, the kernel on.
inline void thread_main(void* context, int tid) {
  Block& b = *static_cast<Block*>(context);
  tsan::acquire(&b.tsan_block_start);  // the host's writes and earlier blocks on this worker
  tsan::runtime_end();
  b.kernel.run(b.kernel.call);
  tsan::runtime_begin();
  tsan::release(&b.tsan_block_end);
  lane_exited(b, tid);
  b.state[tid] = ThreadState::exited;
  --b.live;
}

inline void resume(Block& b, int tid) {
  b.state[tid] = ThreadState::runnable;
  b.running = tid;
  threadIdx = b.thread_index[tid];
  b.fibers[tid]->resume();
  b.running = -1;
}

inline void draw_order(Block& b) {
  std::iota(b.order.begin(), b.order.end(), 0);
  if (b.config.schedule == Schedule::reverse) std::reverse(b.order.begin(), b.order.end());
  if (b.config.schedule == Schedule::random) std::shuffle(b.order.begin(), b.order.end(), b.rng);
}

// Every live thread waits at a barrier: check they wait at the same one, then let them all go.
inline void open_barrier(Block& b) {
  int first = -1;
  for (int t = 0; t < b.size; ++t) {
    if (b.state[t] != ThreadState::at_barrier) continue;
    if (first < 0) {
      first = t;
    } else if (!same_place(b.waits_at[t], b.waits_at[first])) {
      fail("divergent __syncthreads in ", block_name(), ": ", thread_name(b, first), " waits at ",
           where(b.waits_at[first]), ", ", thread_name(b, t), " at ", where(b.waits_at[t]),
           " (a barrier must be reached by all threads of the block, or by none)");
    }
    b.state[t] = ThreadState::runnable;
  }
  b.at_barrier = 0;
  ++b.barrier_generation;
  if (b.config.schedule == Schedule::random) draw_order(b);
}

// No thread can run and the barrier cannot open: say who waits where.
[[noreturn]] inline void report_deadlock(const Block& b) {
  std::map<std::tuple<std::string, std::string>, std::pair<int, int>> groups;  // (what, where) -> (count, first)
  for (int t = 0; t < b.size; ++t) {
    if (b.state[t] == ThreadState::exited) continue;
    std::string what = b.state[t] == ThreadState::at_barrier ? "__syncthreads" : b.waits_in[t];
    if (b.state[t] == ThreadState::in_warp_collective) {
      const Warp& warp = b.warps[t / 32];
      what += cat(" (warp ", t / 32, ", waiting for ", lane_list(warp.mask[t % 32] & ~warp.waiting), ")");
    }
    auto& g = groups[{what, where(b.waits_at[t])}];
    if (g.first++ == 0) g.second = t;
  }
  std::string text = cat("deadlock in ", block_name(), ", no thread can continue:");
  for (const auto& [key, g] : groups)
    text += cat("\n  ", g.first, " thread(s) from ", thread_name(b, g.second), " wait in ", std::get<0>(key), " at ",
                std::get<1>(key));
  fail(text);
}

inline void run_block(Block& b, long linear_index) {
  const long gx = b.grid_dim.x, gxy = gx * b.grid_dim.y;
  blockIdx = uint3{static_cast<unsigned>(linear_index % gx), static_cast<unsigned>(linear_index / gx % b.grid_dim.y),
                   static_cast<unsigned>(linear_index / gxy)};
  // Per-block seed: the same block sees the same order whichever worker runs it.
  b.rng.seed(b.config.seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(linear_index));
  std::fill(b.state.begin(), b.state.end(), ThreadState::unstarted);
  for (auto& w : b.warps) w.waiting = w.exited = 0;
  for (auto& a : b.async) a.open.clear(), a.committed.clear();  // copies never waited for are dropped
  b.live = b.size;
  b.at_barrier = 0;
  // Uninitialised shared memory reads as NaN (float, double) or -1 (integers), never as a lucky 0.
  if (b.dynamic_shared) std::memset(b.dynamic_shared.get(), 0xFF, b.dynamic_shared_bytes);
  draw_order(b);
  tsan::release(&b.tsan_block_start);
  for (;;) {
    bool ran = false;
    for (int i = 0; i < b.size; ++i) {
      const int t = b.order[i];
      if (b.state[t] == ThreadState::unstarted || b.state[t] == ThreadState::runnable) {
        resume(b, t);
        ran = true;
      }
    }
    if (ran) continue;
    if (b.live == 0) break;
    if (b.at_barrier != b.live) report_deadlock(b);
    open_barrier(b);
  }
  tsan::acquire(&b.tsan_block_end);  // passed on to the next block's threads through tsan_block_start
}

inline void syncthreads(const std::source_location& at) {
  tsan::runtime_begin();
  Block& b = current_block("__syncthreads", at);
  const int t = b.running;
  char* sync = &b.tsan_barrier[b.barrier_generation & 1u];
  tsan::release(sync);
  b.state[t] = ThreadState::at_barrier;
  b.waits_at[t] = at;
  b.waits_in[t] = "__syncthreads";
  ++b.at_barrier;
  b.fibers[t]->suspend();
  tsan::acquire(sync);
  tsan::runtime_end();
}

template <class T>
T* dynamic_shared(const std::source_location& at) {
  return reinterpret_cast<T*>(current_block("SIMT_DYNAMIC_SHARED", at).dynamic_shared.get());
}

}  // namespace simt::detail

inline void __syncthreads(std::source_location at = std::source_location::current()) {
  simt::detail::syncthreads(at);
}
