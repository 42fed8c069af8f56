// bench/06-disagg/bench.cpp -- stage 06: simulated requests per second of wall time, and memory O(in-flight).
//
// BM_simulate/<placement>/<requests>: the DistServe Fig. 1 workload (512 in, 64 out, Poisson) on a
// colocated worker at 1.5 req/s and on 1P1D at 5 req/s (both below their goodput, so queues stay
// bounded), DistServe's fitted step model. Counter requests_per_s = simulated requests / wall second.
// BM_simulate_big runs 10^7 requests once (--benchmark_filter=big) and reports the peak in-flight
// requests and the process's peak RSS (VmHWM): it stays flat as requests grow, since the simulator
// recycles request slots and keeps no per-request record unless asked.
// Run: build/bin/bench_06_disagg [--benchmark_filter=simulate/]. Timings never go into tests.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/presets.hpp"

namespace {
using namespace ladder::disagg;

double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string k;
  while (f >> k)
    if (k == "VmHWM:") {
      double kb = 0;
      f >> kb;
      return kb / 1024;
    }
  return 0;
}

Cluster placement(bool colocated) {
  Cluster c;
  if (colocated) c.colocated = 1;
  else c.prefill = 1, c.decode = 1;
  c.kv_capacity_tokens = 65536;
  c.prefill_token_budget = 4096;
  return c;
}

void run(benchmark::State& st, bool colocated, int64_t requests) {
  const DistServeModel m(distserve_opt13b_a100());
  const Cluster c = placement(colocated);
  Workload w{colocated ? 1.5 : 5.0, 1.0, LengthDist::fixed(512), LengthDist::fixed(64), {}, requests, 1, {}};
  Summary s;
  for (auto _ : st) {
    s = simulate(m, c, w, Slo{400, 40}).summary;
    benchmark::DoNotOptimize(s);
  }
  st.counters["requests_per_s"] = benchmark::Counter(static_cast<double>(requests) * static_cast<double>(st.iterations()),
                                                     benchmark::Counter::kIsRate);
  st.counters["attainment"] = s.attainment();
  st.counters["max_in_flight"] = static_cast<double>(s.max_in_flight);
  st.counters["peak_rss_MB"] = peak_rss_mb();
}

void BM_simulate(benchmark::State& st) { run(st, st.range(0) == 1, st.range(1)); }
void BM_simulate_big(benchmark::State& st) { run(st, st.range(0) == 1, 10000000); }

}  // namespace

BENCHMARK(BM_simulate)->ArgNames({"colocated", "requests"})->Args({1, 100000})->Args({0, 100000})
    ->Args({1, 1000000})->Args({0, 1000000})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_simulate_big)->ArgNames({"colocated"})->Arg(1)->Arg(0)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
