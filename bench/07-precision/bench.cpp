// bench/07-precision/bench.cpp -- stage 07's CPU GEMMs beside oneDNN's matmul, timed in one run (issue 40
// deliverable 5): ladder's int8 GEMM (s8 x s8 -> s32, AVX512-VNNI / AVX-VNNI / portable, chosen at run time)
// against oneDNN's s8s8s32 matmul, and ladder's bf16 GEMM (bf16 x bf16 -> f32, AVX512_BF16 / portable)
// against oneDNN's bf16 matmul (ladder/07-precision/cpu_gemm.hpp, bench/onednn_peer.hpp).
// Shapes (m, k, n), c [m x n] = a [m x k] b [k x n]:
//   0  expert_up    512 x 7168 x 2048  one of 8 DeepSeek-V3 experts' up projection in stage 04's bench layer
//                                      (4096 assignments over 8 experts: 512 rows; D = 7168, F = 2048)
//   1  expert_down  512 x 2048 x 7168  the same expert's down projection
//   2  square       4096 x 4096 x 4096
// BM_int8/<shape>/<0 ladder | 1 oneDNN | 2 ladder's avx2 path>, BM_bf16/<shape>/<impl>; counter GOP/s =
// 2 m k n / time. Impl 0 runs the automatic
// path (the widest this CPU has), impl 2 the AVX2 one forced (what a CPU without AVX-512 and VNNI runs; skipped
// where there is no AVX2). Both sides take row-major operands as they are and pack inside the timed call, on all
// OpenMP threads. Before timing, each shape's int8 results
// are compared with oneDNN's (exact: they must be equal) and the bf16 ones within the float32 summation
// bound, and the avx2 path's with the automatic path's (the same bits); a mismatch fails the benchmark. The
// summary line per shape:
//   precision <shape>: int8 ladder/oneDNN R (x GOP/s vs y); bf16 ...; int8 avx2/oneDNN R2 (...); bf16 avx2 ...
// and how many of oneDNN's bf16 outputs differ in their bits from the contract's (ladder's):
//   precision <shape>: bf16 oneDNN <impl> differs from the contract's bits in P % of outputs (within the bound)
// On an AMX CPU oneDNN runs AMX-BF16, whose TDPBF16PS does not follow the contract (VDPBF16PS's arithmetic; chapter
// 07 §10): scripts/bench-report then runs the bf16 benchmarks a second time under DNNL_MAX_CPU_ISA=AVX512_CORE_BF16
// (oneDNN reads it once per process), for the peer of the same instructions; the peer line names the variable.
// There, too, a line `precision amx_bf16: ...` says how TDPBF16PS's sums differ from the contract
// (amx_bf16_probe.hpp).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../onednn_peer.hpp"
#include "amx_bf16_probe.hpp"
#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/rng.hpp"

namespace {
using namespace ladder;
using bench::OnednnMatmul;

struct Dims {
  const char* name;
  int64_t m, k, n;
};
const Dims kDims[] = {{"expert_up", 512, 7168, 2048}, {"expert_down", 512, 2048, 7168}, {"square", 4096, 4096, 4096}};

struct Operands {
  std::vector<int8_t> a8, b8;
  std::vector<uint16_t> a16, b16;
  std::vector<int32_t> c32;
  std::vector<float> cf;
};

Operands& operands(int s) {
  static std::map<int, Operands> cache;
  auto it = cache.find(s);
  if (it != cache.end()) return it->second;
  if (!cache.empty()) cache.clear();  // one shape's operands at a time (the square one is ~200 MB)
  const Dims d = kDims[s];
  Operands& o = cache[s];
  Rng r(uint64_t(s) + 1);
  o.a8.resize(size_t(d.m * d.k)), o.b8.resize(size_t(d.k * d.n));
  for (auto& x : o.a8) x = int8_t(int(r.next() % 256) - 128);
  for (auto& x : o.b8) x = int8_t(int(r.next() % 256) - 128);
  o.a16.resize(o.a8.size()), o.b16.resize(o.b8.size());
  for (auto& x : o.a16) x = formats::to_bf16(float(r.normal()));
  for (auto& x : o.b16) x = formats::to_bf16(float(r.normal()) * 0.01f);
  o.c32.resize(size_t(d.m * d.n)), o.cf.resize(size_t(d.m * d.n));
  return o;
}

void rate(benchmark::State& st, const Dims& d) {
  st.counters["GOP/s"] = benchmark::Counter(2.0 * double(d.m) * double(d.k) * double(d.n) * 1e-9 *
                                                double(st.iterations()), benchmark::Counter::kIsRate);
}

// ladder's result against oneDNN's on the shape (once per shape and type): int8 exactly, bf16 within
// gamma_k(2^-24) sum |a b| over a sample of outputs (both are float32 chains of exact products).
std::map<std::pair<int, bool>, std::string> g_checked;
std::map<std::string, std::string> g_bits;  // "<shape>/<impl>" -> the share of bf16 outputs whose bits differ
std::string cross_check(int s, bool int8, OnednnMatmul& mm) {
  auto key = std::make_pair(s, int8);
  if (g_checked.count(key)) return g_checked[key];
  const Dims d = kDims[s];
  Operands& o = operands(s);
  std::string err;
  if (int8) {
    std::vector<int32_t> peer(o.c32.size());
    precision::gemm_s8s8s32_cpu(o.a8.data(), o.b8.data(), o.c32.data(), d.m, d.k, d.n);
    mm.run(o.a8.data(), o.b8.data(), peer.data());
    if (peer != o.c32)  // e.g. oneDNN's kernels without VNNI, which saturate (chapter 07 §10)
      err = fmt::format("int8: ladder's sums differ from oneDNN's s8s8s32 ({})", mm.impl());
  } else {
    std::vector<float> peer(o.cf.size());
    precision::gemm_bf16_cpu(o.a16.data(), o.b16.data(), o.cf.data(), d.m, d.k, d.n);
    mm.run(o.a16.data(), o.b16.data(), peer.data());
    const double g = double(d.k) * 0x1p-24 / (1 - double(d.k) * 0x1p-24);
    for (int64_t i = 0; i < d.m && err.empty(); i += 97)
      for (int64_t j = 0; j < d.n; j += 13) {
        double mag = 0;
        for (int64_t kk = 0; kk < d.k; ++kk)
          mag += std::fabs(double(formats::from_bf16(o.a16[size_t(i * d.k + kk)])) *
                           formats::from_bf16(o.b16[size_t(kk * d.n + j)]));
        const size_t at = size_t(i * d.n + j);
        if (std::fabs(double(o.cf[at]) - peer[at]) > 2 * g * mag) {
          err = fmt::format("bf16: ladder {} vs oneDNN {} at ({}, {}) beyond 2 gamma_k sum|ab| = {}", o.cf[at],
                            peer[at], i, j, 2 * g * mag);
          break;
        }
      }
    size_t differ = 0;
    for (size_t at = 0; at < peer.size(); ++at)
      differ += std::bit_cast<uint32_t>(peer[at]) != std::bit_cast<uint32_t>(o.cf[at]);
    if (err.empty())
      g_bits[fmt::format("{}/{}", d.name, mm.impl())] =
          fmt::format("{:.1f}", 100.0 * double(differ) / double(peer.size()));
  }
  return g_checked[key] = err;
}

// The avx2 path's result against the automatic path's (once per shape and type): the same bits.
std::string avx2_check(int s, bool int8) {
  auto key = std::make_pair(s + 100, int8);
  if (g_checked.count(key)) return g_checked[key];
  const Dims d = kDims[s];
  Operands& o = operands(s);
  bool same;
  if (int8) {
    std::vector<int32_t> ours(o.c32.size());
    precision::gemm_s8s8s32_cpu(o.a8.data(), o.b8.data(), o.c32.data(), d.m, d.k, d.n);
    precision::gemm_s8s8s32_cpu(o.a8.data(), o.b8.data(), ours.data(), d.m, d.k, d.n, precision::CpuPath::avx2);
    same = ours == o.c32;
  } else {
    std::vector<float> ours(o.cf.size());
    precision::gemm_bf16_cpu(o.a16.data(), o.b16.data(), o.cf.data(), d.m, d.k, d.n);
    precision::gemm_bf16_cpu(o.a16.data(), o.b16.data(), ours.data(), d.m, d.k, d.n, precision::CpuPath::avx2);
    same = std::equal(ours.begin(), ours.end(), o.cf.begin(), [](float x, float y) {
      return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
    });
  }
  return g_checked[key] = same ? "" : fmt::format("{}: the avx2 path differs from the automatic one",
                                                   int8 ? "int8" : "bf16");
}

// oneDNN's matmul, or none where it has no implementation (oneDNN 2.6 has no bf16 matmul below AVX-512,
// e.g. on an AVX2-only CPU or under DNNL_MAX_CPU_ISA=AVX2: creating it throws).
std::unique_ptr<OnednnMatmul> make_peer(const Dims& d, OnednnMatmul::Type t) {
  try {
    return std::make_unique<OnednnMatmul>(d.m, d.k, d.n, t);
  } catch (const std::exception&) {
    return nullptr;
  }
}

void BM_int8(benchmark::State& st) {
  const int s = int(st.range(0));
  const Dims d = kDims[s];
  Operands& o = operands(s);
  if (st.range(1) != 1) {
    const bool avx2 = st.range(1) == 2;
    if (avx2 && !precision::int8_path_available(precision::CpuPath::avx2)) return st.SkipWithError("no AVX2");
    if (const std::string e = avx2 ? avx2_check(s, true) : ""; !e.empty()) return st.SkipWithError(e.c_str());
    const auto path = avx2 ? precision::CpuPath::avx2 : precision::CpuPath::automatic;
    for (auto _ : st) {
      precision::gemm_s8s8s32_cpu(o.a8.data(), o.b8.data(), o.c32.data(), d.m, d.k, d.n, path);
      benchmark::DoNotOptimize(o.c32.data());
    }
    st.SetLabel(precision::cpu_path_name(avx2 ? path : precision::int8_path()));
  } else {
    if (!OnednnMatmul::available()) return st.SkipWithError(OnednnMatmul::missing_reason().c_str());
    const auto mm = make_peer(d, OnednnMatmul::Type::s8s8s32);
    if (!mm) return st.SkipWithError("oneDNN has no s8s8s32 matmul on this CPU");
    if (const std::string e = cross_check(s, true, *mm); !e.empty()) return st.SkipWithError(e.c_str());
    for (auto _ : st) {
      mm->run(o.a8.data(), o.b8.data(), o.c32.data());
      benchmark::DoNotOptimize(o.c32.data());
    }
    st.SetLabel(mm->impl());
  }
  rate(st, d);
}

void BM_bf16(benchmark::State& st) {
  const int s = int(st.range(0));
  const Dims d = kDims[s];
  Operands& o = operands(s);
  if (st.range(1) == 0 || st.range(1) == 2) {
    const bool avx2 = st.range(1) == 2;
    if (avx2 && !precision::bf16_path_available(precision::CpuPath::avx2)) return st.SkipWithError("no AVX2");
    if (const std::string e = avx2 ? avx2_check(s, false) : ""; !e.empty()) return st.SkipWithError(e.c_str());
    const auto path = avx2 ? precision::CpuPath::avx2 : precision::CpuPath::automatic;
    for (auto _ : st) {
      precision::gemm_bf16_cpu(o.a16.data(), o.b16.data(), o.cf.data(), d.m, d.k, d.n, path);
      benchmark::DoNotOptimize(o.cf.data());
    }
    st.SetLabel(precision::cpu_path_name(avx2 ? path : precision::bf16_path()));
  } else {
    if (!OnednnMatmul::available()) return st.SkipWithError(OnednnMatmul::missing_reason().c_str());
    const auto mm = make_peer(d, OnednnMatmul::Type::bf16f32);
    if (!mm) return st.SkipWithError("oneDNN has no bf16 matmul on this CPU");
    if (const std::string e = cross_check(s, false, *mm); !e.empty()) return st.SkipWithError(e.c_str());
    for (auto _ : st) {
      mm->run(o.a16.data(), o.b16.data(), o.cf.data());
      benchmark::DoNotOptimize(o.cf.data());
    }
    st.SetLabel(mm->impl());
  }
  rate(st, d);
}

// Shape-major, so one shape's operands serve all six of its benchmarks.
void args(benchmark::internal::Benchmark* b) {
  for (int s = 0; s < 3; ++s) b->Args({s, 0})->Args({s, 1})->Args({s, 2});
}

class Summary : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (!r.error_occurred && r.counters.count("GOP/s") &&  // runs, or their medians (aggregates only)
          (r.run_type == Run::RT_Iteration || r.aggregate_name == "median"))
        rates_[r.run_name.function_name + "/" + r.run_name.args].push_back(r.counters.at("GOP/s"));
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto med = [&](const std::string& k) {
      auto v = rates_[k];
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const char* cap = std::getenv("DNNL_MAX_CPU_ISA");
    fmt::print("precision peer: {}{}\n", OnednnMatmul::version(),
               cap ? fmt::format(" (DNNL_MAX_CPU_ISA={})", cap) : std::string());
    if (const std::string probe = bench::amx_bf16_probe(); !probe.empty())  // AMX-BF16 CPUs: chapter 07 §10
      fmt::print("precision amx_bf16: {}\n", probe);
    for (int s = 0; s < 3; ++s) {
      std::string line = fmt::format("precision {}:", kDims[s].name);
      for (int impl : {0, 2})
        for (const char* t : {"BM_int8", "BM_bf16"}) {
          const double ours = med(fmt::format("{}/{}/{}", t, s, impl)), peer = med(fmt::format("{}/{}/1", t, s));
          line += fmt::format(" {} {}/oneDNN {} ({:.0f} vs {:.0f} GOP/s);", t + 3, impl ? "avx2" : "ladder",
                              peer > 0 ? fmt::format("{:.2f}", ours / peer) : std::string("- (no peer)"), ours, peer);
        }
      fmt::print("{}\n", line);
      for (const auto& [k, v] : g_bits)
        if (k.starts_with(std::string(kDims[s].name) + "/"))
          fmt::print("precision {}: bf16 oneDNN {} differs from the contract's bits in {} % of outputs (within the "
                     "bound)\n", kDims[s].name, k.substr(k.find('/') + 1), v);
    }
  }

 private:
  std::map<std::string, std::vector<double>> rates_;
};

}  // namespace

BENCHMARK(BM_int8)->Apply(args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_bf16)->Apply(args)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Summary summary;
  benchmark::RunSpecifiedBenchmarks(&summary);
  benchmark::Shutdown();
  return 0;
}
