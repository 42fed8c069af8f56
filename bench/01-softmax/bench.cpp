// bench/01-softmax/bench.cpp -- the stage-01 reference rungs (scalar and vectorised) and a copy (the memory
// bound), side by side in one run, with bytes/s from each rung's Cost. Run: build/bin/bench_01_softmax
// (--benchmark_filter=64M for the large size only). Compare ratios within one run, not across runs.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <cstring>
#include <vector>

#include "ladder/core/huge_pages.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/01-softmax/softmax.hpp"
#include "ladder/01-softmax/softmax_vec.hpp"

namespace {
constexpr int64_t kCols = 4096;
constexpr int64_t kLongCols = int64_t(1) << 24;

// The rows, advised for huge pages (core/huge_pages.hpp) as the copy bound's buffers are (advised = false: plain
// 4 KiB pages, BM_copy/N/0 only).
struct Data {
  std::vector<float> x, y;
  explicit Data(int64_t n, bool advised = true) {
    if (advised) {
      ladder::assign_advised(x, static_cast<size_t>(n), 0.0f);
      ladder::assign_advised(y, static_cast<size_t>(n), 0.0f);
    } else {
      x.assign(static_cast<size_t>(n), 0.0f);
      y.assign(static_cast<size_t>(n), 0.0f);
    }
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

// Where the time of the vectorised rungs goes, pass by pass, with the rows in the cache: each thread
// works on its own kCachedRows rows of 4096 floats (x and y: 2 x 256 KiB, within one core's L2 here),
// kRowOps row passes per iteration in all -- as many rows as the 64M benchmark has. So these are the
// passes' compute costs without memory traffic; the 64M rows (BM_softmax) add their reads and writes.
// Per row: safe_vec = max + exp_sum + normalise, online_vec = online_state + normalise (softmax_vec.hpp).
// If online's one pass cost no more than safe's exp_sum, online / safe would be
// (max + exp_sum + normalise) / (exp_sum + normalise): what removing the max pass can buy where the
// row is in the cache (scripts/bench-report prints it).
constexpr int64_t kCachedRows = 16, kRowOps = (int64_t(1) << 26) / kCols;

template <class F>
void run_cached(benchmark::State& st, F&& pass) {
  const int threads = omp_get_max_threads();
  Data d(int64_t(threads) * kCachedRows * kCols);
  float sink = 0;
  for (auto _ : st) {
#pragma omp parallel reduction(+ : sink)
    {
      const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
      for (int64_t k = t; k < kRowOps; k += n) {
        const int64_t r = t * kCachedRows + (k / n) % kCachedRows;
        sink += pass(d.x.data() + r * kCols, d.y.data() + r * kCols);
      }
    }
    benchmark::DoNotOptimize(sink);
  }
  st.counters["rows_per_second"] =
      benchmark::Counter(static_cast<double>(kRowOps) * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

namespace sv = ladder::softmax::vec;
void BM_cached_max(benchmark::State& st) { run_cached(st, [](const float* x, float*) { return sv::max_pass(x, kCols); }); }
void BM_cached_exp_sum(benchmark::State& st) {
  run_cached(st, [](const float* x, float*) { return sv::exp_sum_pass(x, kCols, 3.0f); });
}
void BM_cached_normalise(benchmark::State& st) {
  run_cached(st, [](const float* x, float* y) {
    sv::normalise(x, y, kCols, 3.0f, 100.0f);
    return y[0];
  });
}
void BM_cached_online_state(benchmark::State& st) {
  run_cached(st, [](const float* x, float*) {
    float m, dd;
    sv::online_state(x, kCols, m, dd);
    return m + dd;
  });
}
void BM_cached_safe_vec(benchmark::State& st) {
  run_cached(st, [](const float* x, float* y) {
    ladder::softmax::safe_vec_row(x, y, kCols);
    return y[0];
  });
}
void BM_cached_online_vec(benchmark::State& st) {
  run_cached(st, [](const float* x, float* y) {
    ladder::softmax::online_vec_row(x, y, kCols);
    return y[0];
  });
}

void BM_copy(benchmark::State& st) {  // bytes read + written per second: the memory bound (range(1): advised)
  const int64_t n = st.range(0);
  Data d(n, st.range(1) == 1);
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

BENCHMARK(BM_copy)->Args({1 << 20, 1})->Args({1 << 26, 1})->Args({1 << 26, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, naive, std::string("naive"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, safe, std::string("safe"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, online, std::string("online"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
// The vectorised pair (softmax_vec.hpp): the fair comparison of two passes against three.
BENCHMARK_CAPTURE(BM_softmax, safe_vec, std::string("safe_vec"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax, online_vec, std::string("online_vec"))->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax_long_rows, safe_vec, std::string("safe_vec"))->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_softmax_long_rows, online_vec, std::string("online_vec"))->Arg(1 << 26)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_max)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_exp_sum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_normalise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_online_state)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_safe_vec)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_cached_online_vec)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
