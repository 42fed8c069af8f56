// tests/simt/test_simt_primitives.cpp -- each SIMT primitive against values derived from the CUDA
// programming guide's rules; launch-configuration errors; device buffers; worker-count independence.
// Registered once per schedule (forward, reverse, random:1) and once under TSan: every result here
// must hold in every order the threads can run in.
#include <doctest/doctest.h>

#include <simt.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {
namespace {

// Restores the options on scope exit, so one test case's overrides do not leak into the next.
struct ConfigGuard {
  simt::Config saved = simt::config();
  ~ConfigGuard() { simt::set_config(saved); }
};

__global__ void nothing(int* out) {
  if (out) out[0] = 0;
}

}  // namespace

TEST_CASE("shuffles: sub-warp widths, per-lane sources, 64-bit values") {
  const auto o = shuffle_probe();
  REQUIRE(o.size() == 2 * 64 * shuffle_probe_outputs);
  for (int t = 0; t < 128; ++t) {
    const int lane = t % 32, base = t - lane;
    auto val = [&](int l) { return (base + l) * 10; };
    const int expected[shuffle_probe_outputs] = {
        val(lane ^ 5),                                      // xor stays inside its 8-lane segment
        lane % 16 + 3 < 16 ? val(lane + 3) : val(lane),     // down: past the segment end -> own value
        lane >= 6 ? val(lane - 6) : val(lane),              // up: before lane 0 -> own value
        val(31 - lane),                                     // per-lane source
        val((lane & ~15) + (lane + 37) % 16),               // source lane taken modulo width
        lane % 4 >= 2 ? val(lane - 2) : val(lane),          // up within 4-lane segments
        lane >= 16 ? val(lane - 16) : val(lane),            // xor: earlier segment ok, later -> own value
        lane < 31 ? val(lane + 1) : val(lane),              // down by one, full width
        val(lane),                                          // width 1: every lane reads itself
        4 * (t ^ 1) + 1,                                    // double (t ^ 1) + 0.25, times 4
    };
    for (int k = 0; k < shuffle_probe_outputs; ++k) {
      INFO("thread " << t << ", output " << k);
      CHECK(o[t * shuffle_probe_outputs + k] == expected[k]);
    }
  }
}

TEST_CASE("votes and shuffles with disjoint masks in divergent branches") {
  const auto o = vote_probe();
  unsigned every_third = 0, low_third = 0, high_odd = 0;
  for (int l = 0; l < 32; ++l) {
    if (l % 3 == 0) every_third |= 1u << l;
    if (l % 3 == 0 && l < 16) low_third |= 1u << l;
    if (l % 2 == 1 && l >= 16) high_odd |= 1u << l;
  }
  for (int lane = 0; lane < 32; ++lane) {
    INFO("lane " << lane);
    const int* r = &o[lane * vote_probe_outputs];
    CHECK(static_cast<unsigned>(r[0]) == every_third);
    if (lane < 16) {
      CHECK(static_cast<unsigned>(r[1]) == low_third);  // only lanes of the mask contribute
      CHECK(r[2] == 1);
      CHECK(r[3] == 1);
      CHECK(r[4] == (lane ^ 1));
      CHECK(r[5] == -1);  // source outside the mask: undefined on the GPU, all-ones bits here
    } else {
      CHECK(static_cast<unsigned>(r[1]) == high_odd);
      CHECK(r[2] == 0);
      CHECK(r[3] == 0);
      CHECK(r[4] == (lane < 31 ? lane + 1 : lane));
      CHECK(r[5] == -1);
    }
  }
}

TEST_CASE("__syncwarp orders a warp's shared-memory exchange") {
  std::vector<int> in(64);
  for (int i = 0; i < 64; ++i) in[i] = 100 + 7 * i;
  const auto out = syncwarp_exchange(in);
  for (int i = 0; i < 64; ++i) CHECK(out[i] == in[i ^ 1]);
}

TEST_CASE("atomics: every overload, from threads of many blocks on several workers") {
  ConfigGuard guard;
  simt::Config c = guard.saved;
  c.threads = 4;  // more workers than cores: blocks really do run concurrently
  simt::set_config(c);
  const int blocks = 8, threads = 128, n = blocks * threads;
  const AtomicTotals r = atomics(blocks, threads);
  unsigned xor_expected = 0;
  for (int t = 0; t < n; ++t) xor_expected ^= 1u << (t % 3);
  CHECK(r.add_int == n);
  CHECK(r.sub_int == -2 * n);
  CHECK(r.max_int == n - 1 - 500);
  CHECK(r.min_int == 500 - (n - 1));
  CHECK(r.cas_int == 2 * n);
  CHECK(r.add_unsigned == 3u * n);
  CHECK(r.max_unsigned == 7u * (n - 1));
  CHECK(r.min_unsigned == 11u);
  CHECK(r.or_unsigned == 0xffffffffu);
  CHECK(r.and_unsigned == 0u);
  CHECK(r.xor_unsigned == xor_expected);
  CHECK(r.add_ull == (static_cast<unsigned long long>(n) << 33));
  CHECK(r.max_ull == (static_cast<unsigned long long>(n - 1) << 40));
  CHECK(r.min_ll == -3LL * (n - 1));
  CHECK(r.add_float == static_cast<float>(n));
  CHECK(r.add_double == 0.5 * n);
  // atomicExch hands each previous value to exactly one thread: nothing lost, nothing duplicated.
  CHECK(r.exch_sum + r.exch_final == static_cast<long long>(n) * (n + 1) / 2);
}

TEST_CASE("threads that exit before __syncthreads do not hold it back") {
  const auto out = early_exit();
  for (int t = 0; t < 128; ++t) CHECK(out[t] == (t < 100 ? 99 - t : 0));
}

TEST_CASE("dynamic shared memory is poisoned with 0xFF bytes (NaN) at the start of every block") {
  const int threads = 64, per_thread = 8;
  const auto bits = shared_poison(threads, per_thread);
  REQUIRE(bits.size() == 4u * threads * per_thread);
  for (std::uint32_t b : bits) CHECK(b == 0xffffffffu);
  float f = 0.0f;
  const std::uint32_t poison = 0xffffffffu;
  std::memcpy(&f, &poison, sizeof f);
  CHECK(std::isnan(f));
}

TEST_CASE("multi-dimensional grids and blocks: built-in variables") {
  const unsigned g[3] = {3, 2, 2}, b[3] = {4, 3, 2};
  const auto o = indices(g[0], g[1], g[2], b[0], b[1], b[2]);
  const unsigned per_block = b[0] * b[1] * b[2];
  for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
      for (unsigned bx = 0; bx < g[0]; ++bx)
        for (unsigned tz = 0; tz < b[2]; ++tz)
          for (unsigned ty = 0; ty < b[1]; ++ty)
            for (unsigned tx = 0; tx < b[0]; ++tx) {
              const unsigned block = bx + g[0] * (by + g[1] * bz), thread = tx + b[0] * (ty + b[1] * tz);
              const unsigned* r = &o[12 * (block * per_block + thread)];
              const unsigned expected[12] = {tx, ty, tz, bx, by, bz, b[0], b[1], b[2], g[0], g[1], g[2]};
              for (int k = 0; k < 12; ++k) CHECK(r[k] == expected[k]);
            }
}

TEST_CASE("warps are runs of 32 consecutive linear thread ids (x fastest)") {
  const auto leaders = warp_leaders(8, 4, 2);
  for (int t = 0; t < 64; ++t) CHECK(leaders[t] == t / 32 * 32);
}

TEST_CASE("block reduction: shared-memory tree, barriers in a loop, warp shuffles") {
  const int rows = 5, cols = 1000;
  std::vector<int> x(rows * cols);
  std::vector<long long> expected(rows, 0);
  for (int i = 0; i < rows * cols; ++i) {
    x[i] = (i * 7919) % 2001 - 1000;
    expected[i / cols] += x[i];
  }
  long long total = 0;
  CHECK(block_sums(x, rows, cols, total) == expected);
  long long expected_total = 0;
  for (long long s : expected) expected_total += s;
  CHECK(total == expected_total);
}

TEST_CASE("every CUDA thread gets its own copy of by-value kernel parameters") {
  const auto out = parameter_copies(7, 64);
  for (int t = 0; t < 64; ++t) CHECK(out[t] == 7 + t);
}

TEST_CASE("__dp4a: both overloads against the PTX ISA's scalar formula, extremes, byte order and the 2^32 wrap") {
  // The formula, written from the PTX ISA's dp4a semantics (d = c; d += Va[i] * Vb[i], byte i = bits 8i..8i+7,
  // sign- or zero-extended), in int64 and reduced modulo 2^32 at the end.
  auto want = [](std::uint32_t a, std::uint32_t b, std::uint32_t c, bool is_signed) {
    long long d = is_signed ? static_cast<long long>(static_cast<std::int32_t>(c)) : static_cast<long long>(c);
    for (int i = 0; i < 4; ++i) {
      const int ab = (a >> (8 * i)) & 0xFF, bb = (b >> (8 * i)) & 0xFF;
      d += is_signed ? static_cast<long long>(static_cast<std::int8_t>(ab)) * static_cast<std::int8_t>(bb)
                     : static_cast<long long>(ab) * bb;
    }
    return static_cast<std::uint32_t>(static_cast<unsigned long long>(d));
  };
  std::vector<std::uint32_t> a, b, c;
  auto add = [&](std::uint32_t x, std::uint32_t y, std::uint32_t z) { a.push_back(x), b.push_back(y), c.push_back(z); };
  const std::uint32_t edges[] = {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0x7F7F7F7Fu, 0x80808080u, 0x01020304u};
  for (std::uint32_t x : {0x80808080u, 0x7F7F7F7Fu, 0xFFFFFFFFu, 0x01020304u, 0x807F01FFu})
    for (std::uint32_t y : {0x80808080u, 0x7F7F7F7Fu, 0xFFFFFFFFu, 0x01000000u, 0x000000FFu})
      for (std::uint32_t z : edges) add(x, y, z);
  std::uint32_t s = 12345;
  for (int i = 0; i < 1000; ++i) {  // xorshift32: every byte value, mixed signs
    auto next = [&s] { return s ^= s << 13, s ^= s >> 17, s ^= s << 5; };
    add(next(), next(), next());
  }
  std::vector<std::uint32_t> got_s, got_u;
  dp4a_probe(a, b, c, got_s, got_u);
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (got_s[i] != want(a[i], b[i], c[i], true) || got_u[i] != want(a[i], b[i], c[i], false))
      if (wrong++ == 0) first = i;
  INFO("first mismatch: a " << a[first] << " b " << b[first] << " c " << c[first]);
  CHECK(wrong == 0);
  // The extremes by hand: (-128)(-128) 4 = 65536; 127 (-128) 4 = -65024; 255^2 4 = 260100; the wrap past
  // INT32_MAX; byte order (only byte 3 of b is set, so only byte 3 of a counts: 1, not 4).
  const std::size_t last = a.size();
  add(0x80808080u, 0x80808080u, 0u);
  add(0x7F7F7F7Fu, 0x80808080u, 0u);
  add(0xFFFFFFFFu, 0xFFFFFFFFu, 0u);
  add(0x80808080u, 0x80808080u, 0x7FFFFFFFu);
  add(0x01020304u, 0x01000000u, 0u);
  dp4a_probe(a, b, c, got_s, got_u);
  CHECK(static_cast<std::int32_t>(got_s[last]) == 65536);
  CHECK(static_cast<std::int32_t>(got_s[last + 1]) == -65024);
  CHECK(static_cast<std::int32_t>(got_s[last + 2]) == 4);  // signed: 0xFF is -1, (-1)(-1) 4
  CHECK(got_u[last + 2] == 260100u);
  CHECK(static_cast<std::int32_t>(got_s[last + 3]) == static_cast<std::int32_t>(0x7FFFFFFFu + 65536u));  // wrapped
  CHECK(got_s[last + 4] == 1u);
}

TEST_CASE("results do not depend on the number of OS workers (SIMT_THREADS=1 vs 2)") {
  ConfigGuard guard;
  const int rows = 23, cols = 517;
  std::vector<int> x(rows * cols);
  for (int i = 0; i < rows * cols; ++i) x[i] = (i * 31) % 97 - 48;
  std::vector<std::vector<long long>> sums;
  std::vector<long long> totals;
  std::vector<std::vector<int>> shuffles;
  for (int workers : {1, 2}) {
    simt::Config c = guard.saved;
    c.threads = workers;
    simt::set_config(c);
    long long total = 0;
    sums.push_back(block_sums(x, rows, cols, total));
    totals.push_back(total);
    shuffles.push_back(shuffle_probe());
  }
  CHECK(sums[0] == sums[1]);
  CHECK(totals[0] == totals[1]);
  CHECK(shuffles[0] == shuffles[1]);
}

TEST_CASE("invalid launch configurations throw, naming the parameter and the constraint") {
  auto message = [](dim3 grid, dim3 block, std::size_t smem) -> std::string {
    try {
      simt::launch(nothing, grid, block, smem, nullptr);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  CHECK(message(dim3(1), dim3(2048), 0) == "simt::launch: block = (2048,1,1) = 2048 threads violates 1 <= threads <= 1024");
  CHECK(message(dim3(1), dim3(0), 0) == "simt::launch: block = (0,1,1) = 0 threads violates 1 <= threads <= 1024");
  CHECK(message(dim3(1), dim3(32, 33), 0) == "simt::launch: block = (32,33,1) = 1056 threads violates 1 <= threads <= 1024");
  CHECK(message(dim3(1), dim3(1, 1, 65), 0) == "simt::launch: block = (1,1,65) violates x <= 1024, y <= 1024, z <= 64");
  CHECK(message(dim3(0), dim3(32), 0) == "simt::launch: grid = (0,1,1) violates x, y, z >= 1");
  CHECK(message(dim3(1, 65536), dim3(32), 0) ==
        "simt::launch: grid = (1,65536,1) violates x <= 2^31-1, y <= 65535, z <= 65535");
  CHECK(message(dim3(1), dim3(32), 49153)
            .starts_with("simt::launch: smem = 49153 bytes violates smem <= 49152 (without the opt-in"));
  CHECK(message(dim3(2, 3, 4), dim3(32, 2, 2), 49152) == "no exception");
}

TEST_CASE("DeviceBuffer: poisoned on allocation, round trip, zero fill, moves, bounds") {
  using ladder::cuda::DeviceBuffer;
  DeviceBuffer<float> a(5);
  CHECK(a.size() == 5);
  CHECK(a.bytes() == 5 * sizeof(float));
  for (float v : a.to_host()) CHECK(std::isnan(v));  // nobody wrote it yet
  const std::vector<float> host = {1, 2, 3, 4, 5};
  a.copy_from_host(host.data(), host.size());
  CHECK(a.to_host() == host);
  std::vector<float> two(2);
  a.copy_to_host(two.data(), 2);
  CHECK(two == std::vector<float>{1, 2});
  a.fill_zero();
  CHECK(a.to_host() == std::vector<float>(5, 0.0f));

  DeviceBuffer<float> b(std::move(a));
  CHECK(b.size() == 5);
  CHECK(a.size() == 0);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  CHECK(a.data() == nullptr);
  a = DeviceBuffer<float>(host);
  CHECK(a.to_host() == host);

  const std::vector<float> six(6, 1.0f);
  CHECK_THROWS_WITH_AS(a.copy_from_host(six.data(), six.size()),
                       "DeviceBuffer::copy_from_host: n = 6 violates n <= size() = 5", ladder::Error);
  CHECK_THROWS_WITH_AS(a.copy_to_host(nullptr, 1),
                       "DeviceBuffer::copy_to_host: n = 1 with host = nullptr violates host != nullptr", ladder::Error);
  DeviceBuffer<int> empty(0);
  CHECK(empty.to_host().empty());
  ladder::cuda::sync();  // a no-op under SIMT, but part of the API both builds share
}

TEST_CASE("simt::config / set_config round trip") {
  ConfigGuard guard;
  simt::Config c;
  c.schedule = simt::Schedule::random;
  c.seed = 42;
  c.threads = 3;
  c.stack_bytes = 256 * 1024;
  simt::set_config(c);
  const simt::Config r = simt::config();
  CHECK(r.schedule == simt::Schedule::random);
  CHECK(r.seed == 42);
  CHECK(r.threads == 3);
  CHECK(r.stack_bytes == 256 * 1024);
}

}  // namespace simt_tests
