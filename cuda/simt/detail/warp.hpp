// simt/detail/warp.hpp -- warp collectives: __syncwarp, __shfl*_sync, __ballot_sync, __any_sync,
// __all_sync.
//
// Each collective is a rendezvous of the lanes named in its mask: a lane that arrives early suspends
// until the last one arrives; the last one computes every lane's result. The layer is stricter than
// the hardware, on purpose: every lane named in the mask must exist, be alive and call the same
// collective (same source position) with the same mask and width. Otherwise the process stops with
// "simt: error" and the source line -- the usual cause is a full mask (0xffffffff) inside a branch
// that only some lanes take, or a warp that the block size leaves partial.
#pragma once
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <source_location>
#include <string>
#include <type_traits>

#include "block.hpp"
#include "config.hpp"
#include "tsan.hpp"

namespace simt::detail {

inline constexpr const char* partial_branch_hint =
    "a branch taken by only some lanes must pass the mask of exactly those lanes";
inline constexpr const char* whole_warp_hint = "ldmatrix and mma.sync.aligned need all 32 lanes of the warp";

inline const char* hint(WarpOp op) { return op == WarpOp::matrix ? whole_warp_hint : partial_branch_hint; }

inline std::string hex(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

// "lanes 0-15, 20" for a lane mask.
inline std::string lane_list(unsigned mask) {
  std::string s;
  for (int lo = 0; lo < 32; ++lo) {
    if (!(mask >> lo & 1u)) continue;
    int hi = lo;
    while (hi + 1 < 32 && (mask >> (hi + 1) & 1u)) ++hi;
    s += cat(s.empty() ? "" : ", ", lo);
    if (hi > lo) s += cat("-", hi);
    lo = hi;
  }
  return cat(std::popcount(mask) == 1 ? "lane " : "lanes ", s);
}

inline bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

// Lanes that exist in warp `w` (the last warp of a block is partial when the size is not a multiple of 32).
inline unsigned lanes_in_warp(const Block& b, int w) {
  const int n = b.size - 32 * w;
  return n >= 32 ? ~0u : (1u << n) - 1u;
}

// The lane whose value `lane` receives, per the CUDA programming guide: `width` splits the warp into
// segments; shfl wraps the source lane within the segment, up/down return the caller's own value
// when the source falls outside it, xor may read earlier segments but not later ones.
inline int source_lane(WarpOp op, int lane, long long arg, int width) {
  const int base = lane & ~(width - 1);
  switch (op) {
    case WarpOp::shfl:
      return base + static_cast<int>(arg & (width - 1));
    case WarpOp::shfl_up:
      return lane - base >= arg ? lane - static_cast<int>(arg) : lane;
    case WarpOp::shfl_down:
      return lane - base + arg < width ? lane + static_cast<int>(arg) : lane;
    case WarpOp::shfl_xor: {
      const long long src = lane ^ arg;
      return src < 0 || src >= base + width ? lane : static_cast<int>(src);
    }
    default:
      return lane;
  }
}

// The last lane of `mask` has arrived: compute every lane's result and wake the others.
inline void complete(Block& b, Warp& warp, int w, unsigned mask) {
  if (warp.op[std::countr_zero(mask)] == WarpOp::matrix) {  // every lane of the mask: checked on arrival
    void* lanes[32] = {};
    for (unsigned m = mask; m; m &= m - 1) {
      const int l = std::countr_zero(m);
      lanes[l] = reinterpret_cast<void*>(warp.value[l]);
    }
    reinterpret_cast<void (*)(void* const*)>(warp.arg[std::countr_zero(mask)])(lanes);
  }
  unsigned ballot = 0;
  for (unsigned m = mask; m; m &= m - 1) {
    const int l = std::countr_zero(m);
    if (warp.value[l]) ballot |= 1u << l;
  }
  for (unsigned m = mask; m; m &= m - 1) {
    const int l = std::countr_zero(m);
    std::uint64_t r = 0;
    switch (warp.op[l]) {
      case WarpOp::ballot: r = ballot; break;
      case WarpOp::any: r = ballot != 0; break;
      case WarpOp::all: r = ballot == mask; break;
      case WarpOp::syncwarp: break;
      case WarpOp::matrix: break;  // the emulation wrote each lane's operands
      default: {
        // Reading a lane outside the mask is undefined on the GPU: all-ones bits (NaN, -1) make it loud.
        const int src = source_lane(warp.op[l], l, warp.arg[l], warp.width[l]);
        r = (mask >> src & 1u) ? warp.value[src] : ~std::uint64_t{0};
      }
    }
    warp.result[l] = r;
    const int tid = 32 * w + l;
    if (tid != b.running) b.state[tid] = ThreadState::runnable;
  }
  warp.waiting &= ~mask;
}

inline std::uint64_t collective(WarpOp op, const char* name, unsigned mask, std::uint64_t value, long long arg,
                                int width, const std::source_location& at) {
  tsan::runtime_begin();
  Block& b = current_block(name, at);
  const int t = b.running, w = t / 32, lane = t % 32;
  const unsigned self = 1u << lane;
  Warp& warp = b.warps[w];
  // Built only on the way to an error: collectives are the hot path of reductions.
  const auto here = [&] {
    return cat(name, " at ", where(at), " in ", block_name(), ", warp ", w, ", mask ", hex(mask), ": ");
  };
  if (!(mask & self)) fail(here(), "the calling lane ", lane, " is not in the mask");
  if (const unsigned missing = mask & ~lanes_in_warp(b, w))
    fail(here(), "the mask names ", lane_list(missing), ", which do not exist (the block has ", b.size,
         " threads, so this warp has ", lane_list(lanes_in_warp(b, w)),
         op == WarpOp::matrix ? cat("; ", whole_warp_hint, ")") : std::string(")"));
  if (width < 1 || width > 32 || !std::has_single_bit(static_cast<unsigned>(width)))
    fail(here(), "width ", width, " is not a power of two in [1, 32]");
  // Waiting lanes of the same collective were checked against each other on arrival, so one of
  // them stands for all; lanes of other masks (divergent branches) are rarer and checked one by one.
  const unsigned others = warp.waiting & ~mask;
  for (unsigned m = others ? warp.waiting : warp.waiting & mask; m; m &= m - 1) {
    const int l = std::countr_zero(m);
    if (!(warp.mask[l] & mask)) continue;  // a collective of a disjoint branch
    const int other = 32 * w + l;
    if (warp.mask[l] != mask)
      fail(here(), "lane ", l, " waits in ", b.waits_in[other], " at ", where(b.waits_at[other]),
           " with the overlapping mask ", hex(warp.mask[l]));
    if (warp.op[l] != op || (op != WarpOp::syncwarp && !same_place(b.waits_at[other], at)))
      fail(here(), "lane ", l, " waits in a different collective, ", b.waits_in[other], " at ",
           where(b.waits_at[other]));
    if (warp.width[l] != width)
      fail(here(), "lane ", l, " passed width ", warp.width[l], ", this lane ", width);
    if (op == WarpOp::matrix && warp.arg[l] != arg)
      fail(here(), "lane ", l, " waits in ", b.waits_in[other], " with another shape or type, this lane in ", name);
    if (!others) break;
  }
  if (const unsigned gone = mask & warp.exited)
    fail(here(), "the mask names ", lane_list(gone), ", which exited (", hint(op), ")");
  warp.op[lane] = op;
  warp.mask[lane] = mask;
  warp.width[lane] = width;
  warp.arg[lane] = arg;
  warp.value[lane] = value;
  warp.waiting |= self;
  b.waits_at[t] = at;
  b.waits_in[t] = name;

  // Only __syncwarp orders memory among its lanes; shuffles and votes exchange registers.
  const int leader = std::countr_zero(mask);
  char* sync = &warp.tsan_sync[leader][warp.sync_generation[leader] & 1u];
  if (op == WarpOp::syncwarp) tsan::release(sync);
  if ((warp.waiting & mask) == mask) {
    complete(b, warp, w, mask);
    if (op == WarpOp::syncwarp) ++warp.sync_generation[leader];
  } else {
    b.state[t] = ThreadState::in_warp_collective;
    b.fibers[t]->suspend();
  }
  if (op == WarpOp::syncwarp) tsan::acquire(sync);
  const std::uint64_t result = warp.result[lane];
  tsan::runtime_end();
  return result;
}

// A lane exits: lanes waiting for it in a collective would wait forever.
inline void lane_exited(Block& b, int tid) {
  Warp& warp = b.warps[tid / 32];
  warp.exited |= 1u << (tid % 32);
  const unsigned self = 1u << (tid % 32);
  for (unsigned m = warp.waiting; m; m &= m - 1) {
    const int l = std::countr_zero(m), other = 32 * (tid / 32) + l;
    if (warp.mask[l] & self)
      fail(b.waits_in[other], " at ", where(b.waits_at[other]), " in ", block_name(), ", warp ", tid / 32, ", mask ",
           hex(warp.mask[l]), ": lane ", tid % 32, " exited without calling it (", hint(warp.op[l]), ")");
  }
}

template <class T>
std::uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}

template <class T>
T from_bits(std::uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

}  // namespace simt::detail

// ---- the CUDA names. The trailing source_location parameter records the caller's line.

inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location at = std::source_location::current()) {
  simt::detail::collective(simt::detail::WarpOp::syncwarp, "__syncwarp", mask, 0, 0, 32, at);
}

template <class T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize,
              std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return from_bits<T>(collective(WarpOp::shfl, "__shfl_sync", mask, to_bits(var), srcLane, width, at));
}

template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                 std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return from_bits<T>(collective(WarpOp::shfl_up, "__shfl_up_sync", mask, to_bits(var), delta, width, at));
}

template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize,
                   std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return from_bits<T>(collective(WarpOp::shfl_down, "__shfl_down_sync", mask, to_bits(var), delta, width, at));
}

template <class T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize,
                  std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return from_bits<T>(collective(WarpOp::shfl_xor, "__shfl_xor_sync", mask, to_bits(var), laneMask, width, at));
}

inline unsigned __ballot_sync(unsigned mask, int predicate, std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return static_cast<unsigned>(collective(WarpOp::ballot, "__ballot_sync", mask, predicate != 0, 0, 32, at));
}

inline int __any_sync(unsigned mask, int predicate, std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return static_cast<int>(collective(WarpOp::any, "__any_sync", mask, predicate != 0, 0, 32, at));
}

inline int __all_sync(unsigned mask, int predicate, std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  return static_cast<int>(collective(WarpOp::all, "__all_sync", mask, predicate != 0, 0, 32, at));
}
