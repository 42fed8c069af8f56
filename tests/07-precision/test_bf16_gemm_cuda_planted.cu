// tests/07-precision/test_bf16_gemm_cuda_planted.cu -- mistakes planted in the bf16 tensor-core GEMM kernel
// itself (bf16_gemm_kernel<Plant> of cuda/src/07-precision/bf16_gemm.cuh; Plant::none is the kernel the host
// API launches), each caught by what test_bf16_gemm_cuda.cpp checks, in every schedule:
//   ldmatrix_row  A's ldmatrix lane address one row down (lane l addresses row (l + 1) % 16 of its 16-row
//                 fragment): every output lands outside the derived bound;
//   store_mask    the store's row mask off by one (row <= M): row M is written, past C, into the guard;
//   no_wait       the cp.async.wait_group of the K loop removed: the first ldmatrix reads a slice still in
//                 flight, and SIMT stops the run ("is still copying"), so it runs in a forked child.
// The same three in every tile configuration (bf16_gemm_kernel<P, C>), and one planted launch: a configuration
// whose ring is past 48 KiB of dynamic shared memory launched without cudaFuncSetAttribute (Plant::no_optin, the
// kernel itself in an instantiation never opted in), which SIMT refuses as a GPU does.
// Skipped in the TSan build (the no_wait child would be a TSan process; the other two are not races).
#include <doctest/doctest.h>
#include <simt.hpp>

#include <csignal>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../cuda/src/07-precision/bf16_gemm.cuh"
#include "bf16_gemm_check.hpp"
#include "each_schedule.hpp"
#include "fork_child.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

namespace pr = ladder::cuda::precision;
using pr::Plant;

constexpr int M = 77, N = 45, K = 40;

struct Run {
  std::vector<float> c;  // M x N
  bool guard_kept = false;
};

template <Plant P>
Run run(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  const size_t cells = static_cast<size_t>(M * N), guard = static_cast<size_t>(N + 64);
  const std::vector<float> nan(cells + guard, std::numeric_limits<float>::quiet_NaN());
  ladder::cuda::DeviceBuffer<uint16_t> da(a), db(b);
  ladder::cuda::DeviceBuffer<float> dc(nan);
  simt::launch(pr::bf16_gemm_kernel<P>, dim3(1, 1), dim3(pr::kBfThreads), 0, da.data(), db.data(), M, N, K, dc.data());
  Run r;
  r.c = dc.to_host();
  r.guard_kept = std::memcmp(r.c.data() + cells, nan.data() + cells, guard * sizeof(float)) == 0;
  r.c.resize(cells);
  return r;
}


// The same as run<P> for configuration C, with the opt-in a launch of C needs (none for Plant::no_optin).
template <Plant P, class C>
Run run_cfg(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  const size_t cells = static_cast<size_t>(M * N), guard = static_cast<size_t>(N + 64);
  const std::vector<float> nan(cells + guard, std::numeric_limits<float>::quiet_NaN());
  ladder::cuda::DeviceBuffer<uint16_t> da(a), db(b);
  ladder::cuda::DeviceBuffer<float> dc(nan);
  const auto kernel = pr::bf16_gemm_kernel<P, C>;
  if (C::kDynamic && P != Plant::no_optin)
    REQUIRE(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes) == cudaSuccess);
  simt::launch(kernel, dim3(1, 1), dim3(C::kThreads), C::kDynamic ? C::kSmemBytes : 0, da.data(), db.data(), M, N, K,
               dc.data());
  Run r;
  r.c = dc.to_host();
  r.guard_kept = std::memcmp(r.c.data() + cells, nan.data() + cells, guard * sizeof(float)) == 0;
  r.c.resize(cells);
  return r;
}

template <class C>
void planted_in(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  CAPTURE(C::kBM);
  CAPTURE(C::kBN);
  CAPTURE(C::kStep);
  const Run good = run_cfg<Plant::none, C>(a, b);
  CHECK(good.guard_kept);
  CHECK(ladder::test_bf16::judge(a, b, good.c, M, N, K).outside == 0);
  CHECK(ladder::test_bf16::judge(a, b, run_cfg<Plant::ldmatrix_row, C>(a, b).c, M, N, K).outside > 0);
  CHECK_FALSE(run_cfg<Plant::store_mask, C>(a, b).guard_kept);
  const ladder::test::Child child = ladder::test::in_child([&] {
    run_cfg<Plant::no_wait, C>(a, b);
    return 0;
  });
  INFO(child.text);
  CHECK(child.signal == SIGABRT);
  CHECK(child.text.find("is still copying") != std::string::npos);
}

std::string launch_error(auto&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

}  // namespace

TEST_CASE("planted bugs: the bf16 GEMM with an ldmatrix row off by one, a store mask off by one, or no wait_group") {
  ladder::Rng rng(4006);
  const std::vector<uint16_t> a = ladder::test_bf16::random_bf16(rng, M, K);
  const std::vector<uint16_t> b = ladder::test_bf16::random_bf16(rng, N, K);
  ladder::test::each_schedule([&](simt::Schedule) {
    const Run good = run<Plant::none>(a, b);  // the harness tells them apart: the kernel itself passes
    CHECK(good.guard_kept);
    CHECK(ladder::test_bf16::judge(a, b, good.c, M, N, K).outside == 0);
    const Run row = run<Plant::ldmatrix_row>(a, b);
    CHECK(ladder::test_bf16::judge(a, b, row.c, M, N, K).outside > 0);
    const Run mask = run<Plant::store_mask>(a, b);
    CHECK_FALSE(mask.guard_kept);
    const ladder::test::Child child = ladder::test::in_child([&] {  // SIMT stops the run: in a child
      run<Plant::no_wait>(a, b);
      return 0;  // not reached when SIMT catches the read
    });
    INFO(child.text);
    CHECK(child.signal == SIGABRT);
    CHECK(child.text.find("is still copying") != std::string::npos);
  });
}

TEST_CASE("planted bugs: the same three in every tile configuration, and a big one launched without its opt-in") {
  ladder::Rng rng(4008);
  const std::vector<uint16_t> a = ladder::test_bf16::random_bf16(rng, M, K);
  const std::vector<uint16_t> b = ladder::test_bf16::random_bf16(rng, N, K);
  ladder::test::each_schedule([&](simt::Schedule) {
    planted_in<pr::BfDefault>(a, b);
    planted_in<pr::Bf128x256>(a, b);
    planted_in<pr::Bf256x128>(a, b);
    planted_in<pr::Bf128x256k64>(a, b);
    // 96 KiB of ring without cudaFuncSetAttribute: refused before any thread runs, naming the kernel.
    const std::string e = launch_error([&] { run_cfg<Plant::no_optin, pr::Bf128x256>(a, b); });
    INFO(e);
    CHECK(e.starts_with("simt::launch: smem = 98304 bytes violates smem <= 49152 (without the opt-in"));
    CHECK(e.find("bf16_gemm_kernel<") != std::string::npos);
    CHECK(launch_error([&] { run_cfg<Plant::no_optin, pr::Bf128x256k64>(a, b); })
              .starts_with("simt::launch: smem = 147456 bytes violates smem <= 49152"));
  });
}

#endif
