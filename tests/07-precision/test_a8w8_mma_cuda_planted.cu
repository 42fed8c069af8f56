// tests/07-precision/test_a8w8_mma_cuda_planted.cu -- mistakes planted in the tensor-core A8W8 GEMM kernel itself
// (a8w8_mma_kernel<I8Plant> of cuda/src/07-precision/a8w8_mma.cuh; I8Plant::none is the kernel the host API
// launches), each caught in every schedule by what test_a8w8_mma_cuda.cpp checks (acc equal to the exact sums,
// nothing written past M x N):
//   a_lane      A's ldmatrix lane address one row down (lane l addresses row (l + 1) % 16 of its fragment);
//   k32_order   A's fragment registers 1 and 2 swapped (rows g + 8 at k 0-15 taken for rows g at k 16-31);
//   store_mask  the store's row mask off by one (row <= M): row M is written, past acc, into the guard;
//   no_wait     the K loop's cp.async.wait_group removed: the first ldmatrix reads a slice still in flight,
//               and SIMT stops the run ("is still copying"), so it runs in a forked child.
// And the shared-memory swizzle: every ldmatrix and cp.async phase conflict-free (the plain layout: 4-way).
// Skipped in the TSan build (the no_wait child would be a TSan process; the others are not races).
#include <doctest/doctest.h>
#include <simt.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../../cuda/src/07-precision/a8w8_mma.cuh"
#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "fork_child.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

namespace pr = ladder::cuda::precision;
using pr::I8Plant;

constexpr int M = 77, N = 45, K = 48;
constexpr size_t kCells = static_cast<size_t>(M * N), kGuard = static_cast<size_t>(N + 64);

struct Run {
  std::vector<int32_t> acc;  // M x N
  bool guard_kept = false;
};

// a [M, K], b [N, K] (the kernel's layout), unit scales.
template <I8Plant P>
Run run(const std::vector<int8_t>& a, const std::vector<int8_t>& b) {
  ladder::cuda::DeviceBuffer<int8_t> da(a), db(b);
  ladder::cuda::DeviceBuffer<float> xs(std::vector<float>(M, 1.0f)), ws(std::vector<float>(N, 1.0f)),
      y(kCells + kGuard);
  ladder::cuda::DeviceBuffer<int32_t> acc(std::vector<int32_t>(kCells + kGuard, -1));
  simt::launch(pr::a8w8_mma_kernel<P>, dim3(1, 1), dim3(pr::kI8Threads), 0, da.data(), db.data(), xs.data(),
               ws.data(), M, N, K, acc.data(), y.data());
  Run r;
  r.acc = acc.to_host();
  r.guard_kept = true;
  for (size_t i = kCells; i < r.acc.size(); ++i) r.guard_kept = r.guard_kept && r.acc[i] == -1;
  r.acc.resize(kCells);
  return r;
}


}  // namespace

TEST_CASE("planted bugs: the int8 mma GEMM with an A lane off by one, k32 fragments swapped, a store mask off by one, "
          "or no wait_group") {
  ladder::Rng rng(4008);
  std::vector<int8_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(N * K));
  for (int8_t& v : a) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(256)) - 128);
  for (int8_t& v : b) v = static_cast<int8_t>(static_cast<int>(rng.uniform_int(256)) - 128);
  std::vector<int32_t> exact(kCells);  // the exact sums, in int64 then narrowed (|sum| <= 48 x 2^14)
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int k = 0; k < K; ++k) s += int64_t{a[static_cast<size_t>(m * K + k)]} * b[static_cast<size_t>(n * K + k)];
      exact[static_cast<size_t>(m * N + n)] = static_cast<int32_t>(s);
    }
  ladder::test::each_schedule([&](simt::Schedule) {
    const Run good = run<I8Plant::none>(a, b);  // the harness tells them apart: the kernel itself passes
    CHECK(good.guard_kept);
    CHECK(good.acc == exact);
    const Run lane = run<I8Plant::a_lane>(a, b);
    CHECK(lane.acc != exact);
    const Run order = run<I8Plant::k32_order>(a, b);
    CHECK(order.acc != exact);
    const Run mask = run<I8Plant::store_mask>(a, b);
    CHECK_FALSE(mask.guard_kept);
    const ladder::test::Child child = ladder::test::in_child([&] {  // SIMT stops the run: in a child
      run<I8Plant::no_wait>(a, b);
      return 0;  // not reached when SIMT catches the read
    });
    INFO(child.text);
    CHECK(child.signal == SIGABRT);
    CHECK(child.text.find("is still copying") != std::string::npos);
  });
}

namespace {

// The largest number of distinct 16-byte chunks of one 8-lane phase that fall on the same 4 banks (1: no
// conflict): 8 lanes x 16 bytes = 128 bytes, all 32 banks exactly once when conflict-free. offset(l) is lane l's
// byte offset in a slice.
int phase_ways(const std::function<int(int)>& offset) {
  int uses[32] = {};
  for (int l = 0; l < 8; ++l)
    for (int w = 0; w < 4; ++w) ++uses[(offset(l) / 4 + w) % 32];
  int worst = 0;
  for (int u : uses) worst = u > worst ? u : worst;
  return worst;
}

}  // namespace

TEST_CASE("the int8 mma GEMM's swizzle: every ldmatrix phase and every cp.async phase is conflict-free") {
  const auto plain = [](int row, int chunk) { return row * pr::kI8Step + 16 * chunk; };  // the unswizzled layout
  int worst = 0, worst_plain = 0;
  for (int wm : {0, 64})
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < pr::kI8Mi; ++i)
        for (int phase = 0; phase < 4; ++phase) {
          // A: lane l of the x4 addresses row wm + 16 i + l % 16, chunk 2 h + l / 16; B (rows of n): row
          // wn + 16 i + l % 8 + 8 (l / 16), chunk 2 h + (l / 8) % 2 (wn takes the values wm takes).
          const auto a = [&](auto layout) {
            return [&, layout](int l8) {
              const int l = 8 * phase + l8;
              return layout(wm + 16 * i + (l & 15), 2 * h + (l >> 4));
            };
          };
          const auto b = [&](auto layout) {
            return [&, layout](int l8) {
              const int l = 8 * phase + l8;
              return layout(wm + 16 * i + (l & 7) + ((l >> 4) << 3), 2 * h + ((l >> 3) & 1));
            };
          };
          worst = std::max({worst, phase_ways(a(pr::i8_swizzle)), phase_ways(b(pr::i8_swizzle))});
          worst_plain = std::max({worst_plain, phase_ways(a(plain)), phase_ways(b(plain))});
        }
  CHECK(worst == 1);
  CHECK(worst_plain == 4);  // without the swizzle rows r, r + 2, r + 4, r + 6 share banks: the check can fail
  int worst_copy = 0;       // cp.async: thread id copies chunk id % 4 of row id / 4, 8 threads per phase
  for (int i = 0; i < pr::kI8Copies; ++i)
    for (int phase = 0; phase < pr::kI8Threads / 8; ++phase)
      worst_copy = std::max(worst_copy, phase_ways([&](int l8) {
                              const int id = 8 * phase + l8 + i * pr::kI8Threads;
                              return pr::i8_swizzle(id >> 2, id & 3);
                            }));
  CHECK(worst_copy == 1);
}

#endif
