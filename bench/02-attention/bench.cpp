// bench/02-attention/bench.cpp -- stage 02: the tiled forward (fp32; also with Eigen's tile products, as before
// issue 44, at d = 128 and 59) beside naive attention and an Eigen GEMM
// of the same FLOP count, oneDNN's f32 matmul on the attention's two products (BM_onednn_gemm: S = Q K^T,
// O = S V) and a plain Eigen naive attention (the naive rung's peer), in one run, at
// N = 4096, batch 8, one head, head dims 59, 64, 111, 128.
// GFLOP/s count 4 N^2 d per head (the two products) for all three, so the ratios compare times.
// Run: build/bin/bench_02_attention. Repetitions are interleaved at random (so slow phases of a shared
// machine hit every kernel alike) and the medians feed one summary line per head dim:
//   attention N=4096 B=8 d=128: tiled X GFLOP/s, naive Y, gemm Z; tiled/gemm R, tiled/naive S
// Compare ratios within one run, not across runs.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "ladder/02-attention/attention.hpp"
#include "ladder/core/rng.hpp"
#include "../onednn_peer.hpp"

namespace {
using namespace ladder;
using namespace ladder::attention;
constexpr int64_t kN = 4096, kB = 8;

double attention_flops(int64_t d) { return 4.0 * kN * kN * static_cast<double>(d) * kB; }

struct Data {
  Problem p;
  std::vector<float> Q, K, V, O, L;
  explicit Data(int64_t d) : p(Problem::make(kB, 1, kN, kN, d)) {
    const size_t n = static_cast<size_t>(kB * kN * d);
    Rng rng(static_cast<uint64_t>(d));
    for (auto* a : {&Q, &K, &V}) {
      a->resize(n);
      for (auto& v : *a) v = static_cast<float>(rng.normal());
    }
    O.resize(n);
    L.resize(static_cast<size_t>(kB * kN));
  }
};

void BM_tiled(benchmark::State& st) {
  const int64_t d = st.range(0);
  Data x(d);
  const Tiles t = default_tiles<float>(d);
  for (auto _ : st) {
    tiled_forward<float>(x.p, x.Q.data(), x.K.data(), x.V.data(), x.O.data(), x.L.data(), nullptr, t);
    benchmark::DoNotOptimize(x.O.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops(d) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

// The same rung with the float tile products and row exp on Eigen (GEMM, pexp) instead of tile_simd.hpp's
// kernels: the tiled forward as it was before issue 44, timed in the same run (simd::eigen_products_for_bench).
void BM_tiled_eigen(benchmark::State& st) {
  const int64_t d = st.range(0);
  Data x(d);
  const Tiles t = default_tiles<float>(d);
  tile::simd::eigen_products_for_bench = true;
  for (auto _ : st) {
    tiled_forward<float>(x.p, x.Q.data(), x.K.data(), x.V.data(), x.O.data(), x.L.data(), nullptr, t);
    benchmark::DoNotOptimize(x.O.data());
  }
  tile::simd::eigen_products_for_bench = false;
  st.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops(d) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

void BM_naive(benchmark::State& st) {
  const int64_t d = st.range(0);
  Data x(d);
  for (auto _ : st) {
    naive_forward<float>(x.p, x.Q.data(), x.K.data(), x.V.data(), x.O.data(), x.L.data(), nullptr);
    benchmark::DoNotOptimize(x.O.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops(d) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

// The peer of the naive rung: a plain Eigen naive attention of the same shape, one (batch, head) at a
// time -- S = scale Q K^T (Eigen GEMM, Eigen's own OpenMP threads), a vectorised row softmax (Eigen's
// exp), O = P V (Eigen GEMM). What an engineer would write first; the naive rung must not be slower
// than it by more than its extra passes over S and P.
void BM_eigen_naive(benchmark::State& st) {
  const int64_t d = st.range(0);
  Data x(d);
  Mat<float> S(kN, kN);
  const float scale = static_cast<float>(x.p.scale);
  for (auto _ : st) {
    for (int64_t b = 0; b < kB; ++b) {
      const ConstMatMap<float> Q(x.Q.data() + b * kN * d, kN, d), K(x.K.data() + b * kN * d, kN, d),
          V(x.V.data() + b * kN * d, kN, d);
      MatMap<float> O(x.O.data() + b * kN * d, kN, d);
      S.noalias() = scale * Q * K.transpose();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < kN; ++i) {
        auto r = S.row(i).array();
        r = (r - r.maxCoeff()).exp();
        r *= 1.0f / r.sum();
      }
      O.noalias() = S * V;
    }
    benchmark::DoNotOptimize(x.O.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops(d) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

// One square fp32 Eigen GEMM (Eigen's own OpenMP threading) with 2 n^3 = 4 N^2 d B, n rounded to 16.
void BM_gemm(benchmark::State& st) {
  const int64_t d = st.range(0);
  const int64_t n = 16 * std::llround(std::cbrt(attention_flops(d) / 2) / 16);
  const Mat<float> a = Mat<float>::Random(n, n), b = Mat<float>::Random(n, n);
  Mat<float> c(n, n);
  for (auto _ : st) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * std::pow(static_cast<double>(n), 3) * 1e-9 * static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate);
  st.counters["n"] = static_cast<double>(n);
}

// The attention's own two products, unfused, through oneDNN's f32 matmul (bench/onednn_peer.hpp; issue 44's
// stronger peer): per batch entry S = Q K^T [N, N] (K read transposed in place), then O = S V [N, d], one S
// buffer for all B. The same 4 N^2 d B FLOPs as the tiled rung, at the shapes it computes (no softmax). Skipped,
// saying why, in a build without oneDNN.
void BM_onednn_gemm(benchmark::State& st) {
  if (!bench::OnednnMatmul::available()) return st.SkipWithError(bench::OnednnMatmul::missing_reason().c_str());
  const int64_t d = st.range(0);
  Data x(d);
  std::vector<float> S(static_cast<size_t>(kN * kN));
  bench::OnednnMatmul qk(kN, d, kN, bench::OnednnMatmul::Type::f32, true), sv(kN, kN, d, bench::OnednnMatmul::Type::f32);
  for (auto _ : st) {
    for (int64_t b = 0; b < kB; ++b) {
      const size_t off = static_cast<size_t>(b * kN * d);
      qk.run(x.Q.data() + off, x.K.data() + off, S.data());
      sv.run(S.data(), x.V.data() + off, x.O.data() + off);
    }
    benchmark::DoNotOptimize(x.O.data());
  }
  st.SetLabel(qk.impl());
  st.counters["GFLOP/s"] =
      benchmark::Counter(attention_flops(d) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

// Prints the usual table, keeps the medians, and ends with one summary line per head dim.
class Summary : public benchmark::ConsoleReporter {
 public:
  Summary() : ConsoleReporter(OO_Tabular) {}  // no colour codes: the lines stay parseable
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.aggregate_name != "median" && r.aggregate_name != "") continue;
      const std::string name = r.run_name.function_name;  // BM_tiled, BM_naive, BM_gemm
      const int64_t d = std::stoll(r.run_name.args);
      auto it = r.counters.find("GFLOP/s");
      if (it != r.counters.end() && (r.aggregate_name == "median" || !rate_[d].count(name)))
        rate_[d][name] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const double ref = rate_.count(128) && rate_[128].count("BM_tiled") ? rate_[128]["BM_tiled"] : 0;
    for (auto& [d, m] : rate_) {
      auto get = [&m](const char* k) { return m.count(k) ? m[k] : 0.0; };
      auto num = [](double v, const char* f) { return v > 0 ? fmt::format(fmt::runtime(f), v) : std::string("-"); };
      const double tiled = get("BM_tiled"), naive = get("BM_naive"), gemm = get("BM_gemm"), plain = get("BM_eigen_naive"),
                   dnnl = get("BM_onednn_gemm"), old = get("BM_tiled_eigen");
      fmt::print(
          "attention N={} B={} d={}: tiled {} GFLOP/s, tiled (Eigen products) {}, naive {}, eigen naive {}, gemm {}, "
          "onednn {}; tiled/gemm {}, tiled/onednn {}, tiled/tiled (Eigen products) {}, tiled/naive {}, naive/eigen naive {}, "
          "tiled vs tiled(d=128) {}\n",
          kN, kB, d, num(tiled, "{:.1f}"), num(old, "{:.1f}"), num(naive, "{:.1f}"), num(plain, "{:.1f}"), num(gemm, "{:.1f}"),
          num(dnnl, "{:.1f}"), num(gemm > 0 ? tiled / gemm : 0, "{:.2f}"), num(dnnl > 0 ? tiled / dnnl : 0, "{:.2f}"),
          num(old > 0 ? tiled / old : 0, "{:.2f}"), num(naive > 0 ? tiled / naive : 0, "{:.2f}"),
          num(plain > 0 ? naive / plain : 0, "{:.2f}"),
          num(ref > 0 ? tiled / ref : 0, "{:.2f}"));  // "-" where a filter left a kernel out
    }
  }

 private:
  std::map<int64_t, std::map<std::string, double>> rate_;
};
}  // namespace

BENCHMARK(BM_tiled)->Arg(128)->Arg(111)->Arg(64)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_tiled_eigen)->Arg(128)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_naive)->Arg(128)->Arg(111)->Arg(64)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_eigen_naive)->Arg(128)->Arg(111)->Arg(64)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm)->Arg(128)->Arg(111)->Arg(64)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_onednn_gemm)->Arg(128)->Arg(111)->Arg(64)->Arg(59)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  // Defaults (overridable on the command line): 5 repetitions, interleaved at random, medians only.
  std::vector<char*> args(argv, argv + argc);
  std::string reps = "--benchmark_repetitions=5", mix = "--benchmark_enable_random_interleaving=true",
              agg = "--benchmark_report_aggregates_only=true";
  args.insert(args.begin() + 1, {reps.data(), mix.data(), agg.data()});
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  Summary summary;
  benchmark::RunSpecifiedBenchmarks(&summary);
  benchmark::Shutdown();
  return 0;
}
