// simt/detail/tensor_core.hpp -- the CPU emulation behind tensor_core.hpp: ldmatrix and mma.sync as
// warp collectives, cp.async as per-thread copies deferred until their wait_group.
//
// Fragment layouts follow the PTX ISA (sections named where they are used); groupID = lane / 4 and
// threadID_in_group = lane % 4 as there. Within a 32-bit register, the element with the lower index
// sits in the lower bits (a0 below a1 in an .f16x2 / .bf16x2 register, a0..a3 from the low byte up
// in a .b32 of four .s8 / .e4m3), as the fragment tables order them.
//
// Arithmetic of the emulated mma (the hardware's own order is not documented; a GPU run compares):
// - bf16 / fp16 / e4m3 inputs are decoded exactly to float (ladder/core/formats.hpp); each product
//   a*b is exact in fp32 (at most 8 x 8, 11 x 11 or 4 x 4 significand bits) unless it overflows or
//   underflows fp32's range;
// - d[i][j] = c[i][j], then d += a[i][k] * b[k][j] for k = 0, 1, ..., K-1, each addition rounded to
//   nearest even in fp32 (IEEE: NaN and inf propagate, subnormals kept, no flush to zero);
// - s8: exact products and sums in 32-bit two's complement, wrapping on overflow (no .satfinite).
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <utility>
#include <vector>

#include "block.hpp"
#include "config.hpp"
#include "ladder/core/formats.hpp"
#include "tsan.hpp"
#include "warp.hpp"

namespace simt::detail {

// ---- fragment positions, in the register form: (row, column) of element `half` (0 = low bits) of
// register `reg` held by `lane`. Tests compare these with the ISA's tables in their element form.

struct Position {
  int row, col;
};

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": A is 16 x 16, four .b32
// registers of two 16-bit elements; B is 16 x 8, two registers; C and D are 16 x 8, four fp32.
inline Position m16n8k16_a(int lane, int reg, int half) {
  return {lane / 4 + 8 * (reg & 1), 2 * (lane % 4) + half + 8 * (reg >> 1)};
}
inline Position m16n8k16_b(int lane, int reg, int half) { return {2 * (lane % 4) + half + 8 * reg, lane / 4}; }
// C and D of m16n8k16 and m16n8k32 alike: c0, c1 in row groupID, c2, c3 in row groupID + 8.
inline Position m16n8_c(int lane, int i) { return {lane / 4 + 8 * (i >> 1), 2 * (lane % 4) + (i & 1)}; }

// PTX ISA, "Matrix Fragments for mma.m16n8k32" (.s8 / .u8 / .e4m3 / .e5m2): A is 16 x 32, four
// registers of four 8-bit elements; B is 32 x 8, two registers.
inline Position m16n8k32_a(int lane, int reg, int byte) {
  return {lane / 4 + 8 * (reg & 1), 4 * (lane % 4) + byte + 16 * (reg >> 1)};
}
inline Position m16n8k32_b(int lane, int reg, int byte) { return {4 * (lane % 4) + byte + 16 * reg, lane / 4}; }

// ---- the warp collectives: each lane's operands, on its own (suspended) fiber stack.
struct MatrixLane {
  std::uint32_t in[10];  // mma: a[4], b[2], c[4]; ldmatrix: the 16-byte row this lane addresses
  std::uint32_t out[4];  // d[4] or the loaded registers
};

inline MatrixLane& lane_of(void* const* lanes, int l) { return *static_cast<MatrixLane*>(lanes[l]); }

// Every lane of the warp must arrive, at the same call, with the same shape and type (the full mask
// of warp.hpp's collectives: a partial warp, a lane that exited or waits elsewhere is an error).
inline void run_matrix(const char* name, void (*emulate)(void* const*), MatrixLane& self,
                       const std::source_location& at) {
  collective(WarpOp::matrix, name, 0xffffffffu, reinterpret_cast<std::uint64_t>(&self),
             static_cast<long long>(reinterpret_cast<std::uintptr_t>(emulate)), 32, at);
}

// PTX ISA, "Warp-level matrix load instruction: ldmatrix": matrix m (of N) is the 8 x 8 b16 tile
// whose rows lanes 8m..8m+7 address; lane l receives in register m the elements (row l/4,
// columns 2(l%4) and 2(l%4)+1), or with .trans (rows 2(l%4) and 2(l%4)+1, column l/4).
template <int N, bool Trans>
void ldmatrix_emulate(void* const* lanes) {
  const auto element = [&](int m, int row, int col) -> std::uint32_t {
    const std::uint32_t word = lane_of(lanes, 8 * m + row).in[col / 2];
    return col % 2 ? word >> 16 : word & 0xFFFFu;
  };
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < N; ++m) {
      const int g = l / 4, t = l % 4;
      lane_of(lanes, l).out[m] = Trans ? element(m, 2 * t, g) | element(m, 2 * t + 1, g) << 16
                                       : element(m, g, 2 * t) | element(m, g, 2 * t + 1) << 16;
    }
}

// Stops the run when [p, p + bytes) overlaps a cp.async of this block whose wait has not come.
inline void check_not_in_flight(const Block& b, const void* p, int bytes, const char* what,
                                const std::source_location& at) {
  const auto* lo = static_cast<const std::byte*>(p);
  const auto check = [&](const AsyncCopy& c, int tid) {
    if (lo < c.dst + c.bytes && c.dst < lo + bytes)
      fail(what, " at ", where(at), " in ", block_name(), ", ", thread_name(b, b.running),
           ": reads bytes that the cp.async of ",
           thread_name(b, tid), " at ", where(c.at),
           " is still copying (no cp.async.wait_group of that thread has completed it yet)");
  };
  for (int tid = 0; tid < b.size; ++tid) {
    for (const AsyncCopy& c : b.async[tid].open) check(c, tid);
    for (const auto& group : b.async[tid].committed)
      for (const AsyncCopy& c : group) check(c, tid);
  }
}

template <int N, bool Trans>
void ldmatrix(std::uint32_t* d, const void* row, const char* name, const std::source_location& at) {
  MatrixLane self{};
  tsan::runtime_begin();
  Block& b = current_block(name, at);
  const int lane = b.running % 32;
  const bool addresses = lane < 8 * N;  // .x1: lanes 0-7 give row addresses, .x2: 0-15, .x4: all
  if (addresses && reinterpret_cast<std::uintptr_t>(row) % 16 != 0)
    fail(name, " at ", where(at), " in ", block_name(), ", lane ", lane, ": row address ", row,
         " is not 16-byte aligned");
  if (addresses) check_not_in_flight(b, row, 16, name, at);
  tsan::runtime_end();
  if (addresses) std::memcpy(self.in, row, 16);  // the lane's own read: TSan sees it at the caller
  run_matrix(name, &ldmatrix_emulate<N, Trans>, self, at);
  for (int m = 0; m < N; ++m) d[m] = self.out[m];
}

enum class Input { bf16, fp16, e4m3, s8 };

template <Input In>
float decode(std::uint32_t word, int i) {
  namespace f = ladder::formats;
  if constexpr (In == Input::bf16) return f::from_bf16(static_cast<std::uint16_t>(word >> (16 * i)));
  if constexpr (In == Input::fp16) return f::from_fp16(static_cast<std::uint16_t>(word >> (16 * i)));
  if constexpr (In == Input::e4m3) return f::from_e4m3(static_cast<std::uint8_t>(word >> (8 * i)));
  return 0.0f;
}

// D = A B + C on one 16 x 8 tile, K = 16 (bf16, fp16) or 32 (e4m3, s8), in the order stated above.
template <Input In>
void mma_emulate(void* const* lanes) {
  constexpr int K = In == Input::bf16 || In == Input::fp16 ? 16 : 32, per_word = K / 8;  // elements per register
  constexpr bool integer = In == Input::s8;
  float fa[16][32], fb[32][8], fc[16][8];
  std::int32_t ia[16][32], ib[32][8], ic[16][8];
  for (int l = 0; l < 32; ++l) {
    const MatrixLane& x = lane_of(lanes, l);
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < per_word; ++e) {
        const Position p = K == 16 ? m16n8k16_a(l, r, e) : m16n8k32_a(l, r, e);
        if constexpr (integer) ia[p.row][p.col] = static_cast<std::int8_t>(x.in[r] >> (8 * e));
        else fa[p.row][p.col] = decode<In>(x.in[r], e);
      }
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < per_word; ++e) {
        const Position p = K == 16 ? m16n8k16_b(l, r, e) : m16n8k32_b(l, r, e);
        if constexpr (integer) ib[p.row][p.col] = static_cast<std::int8_t>(x.in[4 + r] >> (8 * e));
        else fb[p.row][p.col] = decode<In>(x.in[4 + r], e);
      }
    for (int i = 0; i < 4; ++i) {
      const Position p = m16n8_c(l, i);
      if constexpr (integer) ic[p.row][p.col] = static_cast<std::int32_t>(x.in[6 + i]);
      else fc[p.row][p.col] = std::bit_cast<float>(x.in[6 + i]);
    }
  }
  for (int l = 0; l < 32; ++l)
    for (int i = 0; i < 4; ++i) {
      const Position p = m16n8_c(l, i);
      std::uint32_t& out = lane_of(lanes, l).out[i];
      if constexpr (integer) {
        std::uint32_t d = static_cast<std::uint32_t>(ic[p.row][p.col]);
        for (int k = 0; k < K; ++k)
          d += static_cast<std::uint32_t>(ia[p.row][k] * ib[k][p.col]);  // |product| <= 2^14: no overflow
        out = d;
      } else {
        float d = fc[p.row][p.col];
        for (int k = 0; k < K; ++k) {
          // The product is formed in double (exact there, and exact when narrowed to float unless
          // out of fp32's range), so FMA contraction cannot change the result.
          const float product = static_cast<float>(static_cast<double>(fa[p.row][k]) * fb[k][p.col]);
          d += product;
        }
        out = std::bit_cast<std::uint32_t>(d);
      }
    }
}

template <Input In>
void mma(std::uint32_t* d, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c, const char* name,
         const std::source_location& at) {
  MatrixLane self{};
  for (int i = 0; i < 4; ++i) self.in[i] = a[i], self.in[6 + i] = c[i];
  self.in[4] = b[0], self.in[5] = b[1];
  run_matrix(name, &mma_emulate<In>, self, at);
  for (int i = 0; i < 4; ++i) d[i] = self.out[i];
}

// ---- cp.async: the copy happens at the wait_group that covers it; meanwhile the destination holds
// 0xFF bytes (NaN as float / bf16 / fp16, -1 as integers), so a read before the wait is wrong data,
// and an ldmatrix of it stops the run.
inline void cp_async(void* dst, const void* src, int bytes, int src_bytes, const char* name,
                     const std::source_location& at) {
  tsan::runtime_begin();
  Block& b = current_block(name, at);
  const auto here = [&] { return cat(name, " at ", where(at), " in ", block_name(), ", ", thread_name(b, b.running)); };
  if (src_bytes < 0 || src_bytes > bytes)
    fail(here(), ": src_bytes = ", src_bytes, " violates 0 <= src_bytes <= ", bytes);
  if (reinterpret_cast<std::uintptr_t>(dst) % static_cast<unsigned>(bytes) != 0)
    fail(here(), ": destination ", dst, " is not ", bytes, "-byte aligned");
  if (reinterpret_cast<std::uintptr_t>(src) % static_cast<unsigned>(bytes) != 0)
    fail(here(), ": source ", src, " is not ", bytes, "-byte aligned");
  b.async[b.running].open.push_back(
      AsyncCopy{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes, src_bytes, at});
  tsan::runtime_end();
  std::memset(dst, 0xFF, static_cast<std::size_t>(bytes));  // the in-flight write, seen by TSan here
}

inline void cp_async_commit(const std::source_location& at) {
  tsan::runtime_begin();
  Block& b = current_block("cp.async.commit_group", at);
  AsyncCopies& a = b.async[b.running];
  a.committed.push_back(std::move(a.open));  // an empty group is allowed, as in PTX
  a.open.clear();
  tsan::runtime_end();
}

// Completes every committed group but the newest `pending`.
inline void cp_async_wait(int pending, const char* name, const std::source_location& at) {
  tsan::runtime_begin();
  Block& b = current_block(name, at);
  AsyncCopies& a = b.async[b.running];
  while (static_cast<int>(a.committed.size()) > pending) {
    const std::vector<AsyncCopy> group = std::move(a.committed.front());
    a.committed.pop_front();
    for (const AsyncCopy& c : group) {
      tsan::runtime_end();  // the deferred write, by this thread, seen by TSan at the wait
      std::memcpy(c.dst, c.src, static_cast<std::size_t>(c.src_bytes));
      std::memset(c.dst + c.src_bytes, 0, static_cast<std::size_t>(c.bytes - c.src_bytes));
      tsan::runtime_begin();
    }
  }
  tsan::runtime_end();
}

}  // namespace simt::detail
