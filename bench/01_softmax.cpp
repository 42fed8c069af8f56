// bench/01_softmax.cpp -- the stage-01 reference rungs (scalar and vectorised) and a copy (the memory
// bound), side by side in one run, with bytes/s from each rung's Cost. Run: build/bin/bench_01_softmax
// (--benchmark_filter=64M for the large size only). Compare ratios within one run, not across runs.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/softmax.hpp"

namespace {
constexpr int64_t kCols = 4096;
constexpr int64_t kLongCols = int64_t(1) << 24;

struct Data {
  std::vector<float> x, y;
  explicit Data(int64_t n) : x(static_cast<size_t>(n)), y(static_cast<size_t>(n)) {
    ladder::Rng rng(1);
    for (auto& v : x) v = static_cast<float>(3.0 * rng.uniform(-1, 1));
  }
};

void run_softmax(benchmark::State& st, const std::string& id, int64_t cols) {
  const int64_t n = st.range(0), rows = n / cols;
  const ladder::Rung& r = ladder::registry().find("01-softmax", "ref", id);
  const auto& fn = r.fn<ladder::softmax::RowsFns>().f32;
  Data d(n);
  for (auto _ : st) {
    fn(d.x.data(), d.y.data(), rows, cols);
    benchmark::DoNotOptimize(d.y.data());
  }
  st.counters["bytes_per_second"] =
      benchmark::Counter(r.cost({rows, cols}).bytes() * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

void BM_softmax(benchmark::State& st, const std::string& id) { run_softmax(st, id, kCols); }

// Rows of 2^24 floats (64 MiB each, larger than any last-level cache here): the regime of Milakov &
// Gimelshein's section 5, where each pass over a row goes to DRAM and online's saved pass shows. With
// rows of 4096 floats (16 KiB, in L1) safe's extra pass is nearly free and both rungs are bound by
// their two exps per element.
void BM_softmax_long_rows(benchmark::State& st, const std::string& id) { run_softmax(st, id, kLongCols); }

void BM_copy(benchmark::State& st) {  // bytes read + written per second: the memory bound
  const int64_t n = st.range(0);
  Data d(n);
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) {
      const int64_t lo = n * c / 64, hi = n * (c + 1) / 64;
      std::memcpy(d.y.data() + lo, d.x.data() + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
    benchmark::DoNotOptimize(d.y.data());
  }
  st.counters["bytes_per_second"] =
      benchmark::Counter(2.0 * 4.0 * static_cast<double>(n) * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}
}  // namespace

BENCHMARK(BM_copy)->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, naive, std::string("naive"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, safe, std::string("safe"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, online, std::string("online"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
// The vectorised pair (softmax_vec.hpp): the fair comparison of two passes against three.
BENCHMARK_CAPTURE(BM_softmax, safe_vec, std::string("safe_vec"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, online_vec, std::string("online_vec"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax_long_rows, safe_vec, std::string("safe_vec"))->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax_long_rows, online_vec, std::string("online_vec"))->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
