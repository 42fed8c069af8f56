// bench/04-moe/bench.cpp -- stage 04 (gate -> sort -> ragged dot -> unsort + combine) at DeepSeek-V3 expert
// shapes, fp32, in one run: D = 7168, F = 2048, 4096 assignment rows.
//   ragged/<routing>   moe::ragged_dot (the reference: one ladder::gemm per group, Eigen's GEMM for
//                      float) on lhs [4096, D] x rhs [8, D, F], group sizes balanced or Zipf(s = 1.2)
//   dense_gemm         one Eigen GEMM [4096, D] x [D, F]: the same FLOPs with no groups
//   onednn_sgemm       the same product through oneDNN's f32 matmul (skipped without oneDNN)
//   ragged32 / fallback32   32 local experts, 512 tokens choosing 8 of them (4096 assignments): the
//                      ragged dot vs the dense fallback (every token through every local expert,
//                      E/k = 4 times the FLOPs), one projection each
//   layer_*            one dropless layer (8 experts, 2048 tokens, top-2 = 4096 assignments) split into
//                      gate / permute (sort + gather) / grouped GEMM (3 ragged dots + SwiGLU) / combine
// GFLOP/s count 2 m D F per projection on the routed rows (the fallback: the routed rows too, so its
// rate is "useful work per second"). Summary lines at the end:
//   moe ragged/dense balanced R, zipf S; fallback32/ragged32 time X; layer split: gate a% permute b% ...
// Iterations are few (each is seconds); compare ratios within one run, not across runs.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../onednn_peer.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/04-moe/moe.hpp"

namespace {
using namespace ladder;
using moe::Index;
constexpr Index kD = 7168, kF = 2048, kRows = 4096;

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = scale * static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// Group sizes of `rows` assignments over G experts: balanced, or Zipf(s) by expert rank (largest first).
std::vector<Index> group_sizes(Index G, Index rows, double zipf_s) {
  std::vector<double> p(static_cast<size_t>(G));
  double sum = 0;
  for (Index g = 0; g < G; ++g) sum += (p[static_cast<size_t>(g)] = zipf_s > 0 ? std::pow(double(g + 1), -zipf_s) : 1.0);
  std::vector<Index> gs(static_cast<size_t>(G));
  Index used = 0;
  for (Index g = 0; g < G; ++g) used += (gs[static_cast<size_t>(g)] = Index(std::floor(rows * p[static_cast<size_t>(g)] / sum)));
  gs[0] += rows - used;  // the remainder to the hottest expert
  return gs;
}

struct Projection {
  Index G;
  std::vector<float> lhs, rhs, out;
  Projection(Index G_, Index rows) : G(G_), lhs(random_floats(size_t(rows * kD), 1, 1.0f)),
      rhs(random_floats(size_t(G_ * kD * kF), 2, 0.01f)), out(size_t(rows * kF)) {}
};

Projection& proj8() {
  static Projection p(8, kRows);
  return p;
}

void rate(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * double(st.iterations()), benchmark::Counter::kIsRate);
}

void BM_ragged(benchmark::State& st) {
  const double s = st.range(0) / 10.0;  // Zipf exponent x 10 (0 = balanced)
  Projection& p = proj8();
  const std::vector<Index> gs = group_sizes(p.G, kRows, s);
  for (auto _ : st) {
    moe::ragged_dot(p.lhs.data(), kRows, kD, p.rhs.data(), p.G, kF, gs.data(), p.out.data());
    benchmark::DoNotOptimize(p.out.data());
  }
  rate(st, 2.0 * kRows * kD * kF);
}

void BM_dense_gemm(benchmark::State& st) {
  Projection& p = proj8();
  const Eigen::Map<const Mat<float>> a(p.lhs.data(), kRows, kD), b(p.rhs.data(), kD, kF);
  Eigen::Map<Mat<float>> c(p.out.data(), kRows, kF);
  for (auto _ : st) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(p.out.data());
  }
  rate(st, 2.0 * kRows * kD * kF);
}

// The same product through oneDNN's f32 matmul (bench/onednn_peer.hpp), the stronger peer of issue 44's
// compute-bound figures; skipped, saying why, in a build without oneDNN.
void BM_onednn_sgemm(benchmark::State& st) {
  if (!bench::OnednnMatmul::available()) return st.SkipWithError(bench::OnednnMatmul::missing_reason().c_str());
  Projection& p = proj8();
  bench::OnednnMatmul mm(kRows, kD, kF, bench::OnednnMatmul::Type::f32);
  for (auto _ : st) {
    mm.run(p.lhs.data(), p.rhs.data(), p.out.data());
    benchmark::DoNotOptimize(p.out.data());
  }
  st.SetLabel(mm.impl());
  rate(st, 2.0 * kRows * kD * kF);
}

// 32 local experts, 512 tokens x top-8 of them = 4096 assignments.
constexpr Index kE32 = 32, kT32 = 512, kK32 = 8;
Projection& proj32() {
  static Projection p(kE32, kT32);  // lhs = the 512 tokens
  return p;
}

void BM_ragged32(benchmark::State& st) {
  Projection& p = proj32();
  // token t chooses experts (t + 4 j) mod 32, j < 8: 128 rows per expert; rows gathered expert-major.
  std::vector<float> xs(size_t(kRows * kD)), o(size_t(kRows * kF));
  std::vector<Index> gs(kE32, kRows / kE32);
  Index row = 0;
  for (Index e = 0; e < kE32; ++e)
    for (Index t = 0; t < kT32; ++t)
      if (t % 4 == e % 4)
        std::copy_n(p.lhs.data() + t * kD, kD, xs.data() + (row++) * kD);
  for (auto _ : st) {
    moe::ragged_dot(xs.data(), kRows, kD, p.rhs.data(), kE32, kF, gs.data(), o.data());
    benchmark::DoNotOptimize(o.data());
  }
  rate(st, 2.0 * kRows * kD * kF);
}

void BM_fallback32(benchmark::State& st) {  // every token through every local expert (one GEMM each)
  Projection& p = proj32();
  std::vector<float> o(size_t(kT32 * kF));
  for (auto _ : st) {
    for (Index e = 0; e < kE32; ++e) {
      gemm<float>(kT32, kF, kD, 1.0f, p.lhs.data(), kD, Op::N, p.rhs.data() + e * kD * kF, kF, Op::N, o.data(), kF);
      benchmark::DoNotOptimize(o.data());
    }
  }
  rate(st, 2.0 * kRows * kD * kF);  // useful (routed) FLOPs: E/k = 4 times fewer than it does
}

// One dropless layer, split into the four steps sorted_dropless runs (ladder/04-moe/sorted.hpp).
struct Layer {
  moe::Weights<float> w;
  Mat<float> x;
  moe::Routing<float> r;
  moe::Permutation p;
  Mat<float> xs, o, y;
  Layer() {
    const Index E = 8, T = kRows / 2;
    w.cfg = moe::Config{kD, kF, E, 2, 1, 1, 1.0, moe::GateKind::v3_sigmoid, 0};
    w.W_gate = Eigen::Map<const Mat<float>>(random_floats(size_t(E * kD), 3, 0.01f).data(), E, kD);
    w.bias.assign(size_t(E), 0.0f);
    w.w1 = random_floats(size_t(E * kD * kF), 4, 0.01f);
    w.w3 = random_floats(size_t(E * kD * kF), 5, 0.01f);
    w.w2 = random_floats(size_t(E * kF * kD), 6, 0.01f);
    x = Eigen::Map<const Mat<float>>(random_floats(size_t(T * kD), 7, 1.0f).data(), T, kD);
    r = moe::gate(w, x);
    p = moe::sort_by_expert(r.topk_idx, E);
    xs = moe::gather_rows(x, p.sort_idx, 2, kRows);
    o = moe::expert_products(w, 0, xs, p.group_sizes);
  }
};
Layer& layer() {
  static Layer l;
  return l;
}

void BM_layer_gate(benchmark::State& st) {
  Layer& l = layer();
  for (auto _ : st) benchmark::DoNotOptimize(moe::gate(l.w, l.x).topk_idx.data.data());
}
void BM_layer_permute(benchmark::State& st) {
  Layer& l = layer();
  for (auto _ : st) {
    const moe::Permutation p = moe::sort_by_expert(l.r.topk_idx, l.w.cfg.n_experts);
    l.xs = moe::gather_rows(l.x, p.sort_idx, 2, kRows);
    benchmark::DoNotOptimize(l.xs.data());
  }
}
void BM_layer_grouped_gemm(benchmark::State& st) {
  Layer& l = layer();
  for (auto _ : st) {
    l.o = moe::expert_products(l.w, 0, l.xs, l.p.group_sizes);
    benchmark::DoNotOptimize(l.o.data());
  }
  rate(st, 3 * 2.0 * kRows * kD * kF);
}
void BM_layer_combine(benchmark::State& st) {
  Layer& l = layer();
  for (auto _ : st) {
    l.y = moe::unsort_combine(l.o, l.p, l.r, l.x.rows(), 2);
    benchmark::DoNotOptimize(l.y.data());
  }
}

class Summary : public benchmark::ConsoleReporter {
 public:
  Summary() : ConsoleReporter(OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.aggregate_name != "median" && r.aggregate_name != "") continue;
      const std::string& args = r.run_name.args;
      const std::string name = r.run_name.function_name + (args.empty() ? "" : "/" + args);
      if (r.aggregate_name == "median" || !time_.count(name)) {
        time_[name] = r.GetAdjustedRealTime();
        cpu_[name] = r.GetAdjustedCPUTime();
        auto it = r.counters.find("GFLOP/s");
        if (it != r.counters.end()) gflops_[name] = it->second.value;
      }
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    // Ratios of times for the same FLOPs, by wall clock and by CPU time (the machine is shared: the
    // two differ when other processes take the cores).
    auto ratio = [&](const char* a, const char* b, std::map<std::string, double>& t) {
      return t.count(a) && t.count(b) && t[a] > 0 ? t[b] / t[a] : 0.0;
    };
    auto g = [&](const char* k) { return gflops_.count(k) ? gflops_[k] : 0.0; };
    fmt::print("moe D={} F={} rows={} fp32: ragged balanced {:.1f} GFLOP/s, zipf1.2 {:.1f}, dense gemm {:.1f}; "
               "ragged/dense (rate) balanced {:.2f} (cpu {:.2f}), zipf {:.2f} (cpu {:.2f})\n",
               kD, kF, kRows, g("BM_ragged/0"), g("BM_ragged/12"), g("BM_dense_gemm"),
               ratio("BM_ragged/0", "BM_dense_gemm", time_), ratio("BM_ragged/0", "BM_dense_gemm", cpu_),
               ratio("BM_ragged/12", "BM_dense_gemm", time_), ratio("BM_ragged/12", "BM_dense_gemm", cpu_));
    fmt::print("moe 32 local experts, 512 tokens x top-8: fallback/ragged time {:.2f} (cpu {:.2f}); FLOP multiple E/k = 4\n",
               ratio("BM_ragged32", "BM_fallback32", time_), ratio("BM_ragged32", "BM_fallback32", cpu_));
    auto t = [&](const char* k) { return time_.count(k) ? time_[k] : 0.0; };
    const double tg = t("BM_layer_gate"), tp = t("BM_layer_permute"), tm = t("BM_layer_grouped_gemm"),
                 tc = t("BM_layer_combine"), tot = tg + tp + tm + tc;
    if (tot > 0)
      fmt::print("moe layer split (8 experts, 2048 tokens x top-2): gate {:.2f}% permute {:.2f}% grouped_gemm {:.2f}% "
                 "combine {:.2f}% (permute + combine {:.2f}%)\n",
                 100 * tg / tot, 100 * tp / tot, 100 * tm / tot, 100 * tc / tot, 100 * (tp + tc) / tot);
  }

 private:
  std::map<std::string, double> time_, cpu_, gflops_;
};
}  // namespace

BENCHMARK(BM_ragged)->Arg(0)->Arg(12)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_dense_gemm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_onednn_sgemm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_ragged32)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_fallback32)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_layer_gate)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_layer_permute)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_layer_grouped_gemm)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_layer_combine)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

int main(int argc, char** argv) {
  // Defaults (overridable): 3 repetitions interleaved at random, medians only.
  std::vector<char*> args(argv, argv + argc);
  std::string reps = "--benchmark_repetitions=3", mix = "--benchmark_enable_random_interleaving=true",
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
