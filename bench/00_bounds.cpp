// bench/00_bounds.cpp -- the two machine bounds every stage's rate is compared against, measured by
// the same `make bench` run as the rungs (these machines are shared and noisy; a bound from a data
// sheet would not be one this run could reach):
//   BM_fma_peak  fp32 FMAs on register-resident packets, every OpenMP thread: the compute bound
//                (2 flops per lane per FMA, the machine's vector width from Eigen's packet type).
//   BM_copy/1    memcpy of 256 MiB split over the threads: the memory bound, bytes read + written / s,
//                from buffers advised for huge pages (core/huge_pages.hpp), as the rungs' large arrays
//                are; BM_copy/0 the same from plain 4 KiB pages, shown beside it (2-4x slower on a VM
//                with shadow page tables: bench/reports/cpu-history.md, 2026-11-29).
// Run: build/bin/bench_00_bounds. Counters: GFLOP/s, bytes_per_second.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "ladder/core/eigen.hpp"
#include "ladder/core/huge_pages.hpp"

namespace {
namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int kLanes = ei::packet_traits<float>::size;
// Independent accumulators: enough to cover the FMA latency (4-5 cycles) times two FMA ports.
constexpr int kAcc = 12;
constexpr int64_t kIters = 1 << 22;

float fma_loop(float seed) {
  Packet acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = ei::pset1<Packet>(seed + static_cast<float>(i));
  const Packet a = ei::pset1<Packet>(0.999999f), b = ei::pset1<Packet>(1e-7f);
  for (int64_t it = 0; it < kIters; ++it)
    for (int i = 0; i < kAcc; ++i) acc[i] = ei::pmadd(acc[i], a, b);
  Packet s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = ei::padd(s, acc[i]);
  return ei::predux(s);
}

void BM_fma_peak(benchmark::State& st) {
  const int threads = omp_get_max_threads();
  std::vector<float> sink(static_cast<size_t>(threads));
  for (auto _ : st) {
#pragma omp parallel for schedule(static, 1)
    for (int t = 0; t < threads; ++t) sink[static_cast<size_t>(t)] = fma_loop(static_cast<float>(t));
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = 2.0 * kLanes * kAcc * static_cast<double>(kIters) * threads;
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(st.iterations()),
                                              benchmark::Counter::kIsRate);
  st.counters["lanes"] = kLanes;
  st.counters["threads"] = threads;
}

void BM_copy(benchmark::State& st) {  // bytes read + written per second
  const int64_t n = int64_t{1} << 26;
  std::vector<float> x, y;
  if (st.range(0) == 1) {
    ladder::assign_advised(x, static_cast<size_t>(n), 1.0f);
    ladder::assign_advised(y, static_cast<size_t>(n), 0.0f);
  } else {
    x.assign(static_cast<size_t>(n), 1.0f);
    y.assign(static_cast<size_t>(n), 0.0f);
  }
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) {
      const int64_t lo = n * c / 64, hi = n * (c + 1) / 64;
      std::memcpy(y.data() + lo, x.data() + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["bytes_per_second"] = benchmark::Counter(2.0 * 4.0 * static_cast<double>(n) * static_cast<double>(st.iterations()),
                                                       benchmark::Counter::kIsRate);
}
}  // namespace

BENCHMARK(BM_fma_peak)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_copy)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
