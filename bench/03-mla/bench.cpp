// bench/03-mla/bench.cpp -- the stage-03 reference rungs at DeepSeek-V2 shapes (fp32), one decode step per
// iteration, beside the two bounds they are judged against: an Eigen GEMM of the latent products'
// shape (B x [H, kv_lora] x [kv_lora, L], both ways: the compute bound of A_CC_ME and flash_mla; the same
// through oneDNN's f32 matmul, BM_latent_onednn, the stronger peer) and a copy (the memory bound of CD). Counters from each rung's Cost: flops/s and bytes_read/s.
// Run: build/bin/bench_03_mla [--benchmark_filter=A_CC_ME]. Weights are made once (~5 s, 0.6 GB; AM's
// absorbed matrices another 1.8 GB and ~10 s, on first use). Compare within one run: shared machine;
// OMP_WAIT_POLICY=passive helps when other processes are busy.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstring>
#include <memory>
#include <vector>

#include "ladder/core/huge_pages.hpp"
#include "ladder/core/recycle.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/03-mla/mla.hpp"
#include "../onednn_peer.hpp"

namespace {
using namespace ladder;
using namespace ladder::mla;

const Weights<float>& model() {
  static const Weights<float> W = random_weights(deepseek_v2(), 1);
  return W;
}
// The process's CPU time so far, all threads, user + system, and its minor page faults (getrusage(2)).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return sec(u.ru_utime) + sec(u.ru_stime);
}
double process_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_minflt);
}
const std::shared_ptr<const Absorbed<float>>& absorbed() {
  static const std::shared_ptr<const Absorbed<float>> a = absorb_weights(model());
  return a;
}

// decode returns a new Output every step: scores and attn are [B, H, L] each (64 MiB apiece at B = 32,
// L = 4096), flash_mla's split partials 134 MB. glibc serves a block over its mmap threshold (at most 32 MiB)
// with a new mapping and unmaps it on free, so a fresh array costs the kernel's zero-fill of every page on
// first touch (12 % of A_CC_ME's step on a 2-core Xeon; on a Zen 5 VM, where a page fault traps to the
// hypervisor, decode ran 1.7-3.6x slower than decode_into). An Output that dies gives those arrays to a
// per-thread bin (core/recycle.hpp) and the next decode takes them back, so decode reuses storage too.
// range(2) = 1 decodes into one Output kept across the steps (decode_into, as a serving loop would; its first
// step, which allocates, runs before the timed loop, as the latent-GEMM bound allocates outside its loop);
// 0 calls decode, a new Output per step (the default API: `out = decode(...)`); 2 is 0 with the bin emptied
// before every step (decode as it was before the bin: fresh pages every step); 3 (CD only) is 0 with the
// decompressed K and V in plain 4 KiB pages, as before prepare_cd advised huge pages (cache.hpp), the
// weights unchanged. cpu_seconds_per_step: the process's CPU time (all threads, user + system: page faults
// count there) per step, steadier than the wall time on a shared machine; page_faults_per_step: its minor
// page faults per step. make bench reports 0 and 1 (CD: 0 and 3).
void BM_rung(benchmark::State& st, const std::string& id) {
  const int64_t B = st.range(0), L = st.range(1), mode = st.range(2);
  const Rung& r = registry().find(kStage, "ref", id);
  const auto& f = r.fn<RungFns>().f32;
  const Inputs in = make_inputs(model(), InputSpec{std::vector<int64_t>(static_cast<size_t>(B), L), 2, false, 0, false});
  Prepared<float> p;
  if (id == "AM") {
    p = prepare_compressed(model(), in.cache);
    p.absorbed = absorbed();
  } else {
    p = f.prepare(model(), in.cache);
  }
  if (mode == 3) {  // CD as before huge pages: its K and V copied into plain (4 KiB-page) storage, same bits
    p.K.data = std::vector<float>(p.K.data);
    p.V.data = std::vector<float>(p.V.data);
  }
  Output<float> out;
  // The loop's first steps, untimed: the steady state is timed. decode_into allocates on its first step; a loop of
  // `out = decode(...)` on its first two (the second step's arrays are made while out still holds the first's).
  if (mode == 1) decode_into(f, model(), p, in.step, out);
  for (int k = 0; k < 2 && (mode == 0 || mode == 3); ++k) out = f.decode(model(), p, in.step);
  if (mode == 2) recycle_release<float>();
  const double cpu0 = process_cpu_seconds(), faults0 = process_page_faults();
  for (auto _ : st) {
    if (mode == 1) {
      decode_into(f, model(), p, in.step, out);
    } else {
      if (mode == 2) recycle_release<float>();
      out = f.decode(model(), p, in.step);  // the previous step's arrays die here, as a caller's would
    }
    benchmark::DoNotOptimize(out.u.data());
  }
  const double n = static_cast<double>(st.iterations());
  st.counters["cpu_seconds_per_step"] = (process_cpu_seconds() - cpu0) / n;
  st.counters["page_faults_per_step"] = (process_page_faults() - faults0) / n;
  const Cost c = r.cost(cost_shape(model().cfg, B, L));
  st.counters["flops_per_second"] = benchmark::Counter(c.flops * n, benchmark::Counter::kIsRate);
  st.counters["bytes_read_per_second"] = benchmark::Counter(c.bytes_read * n, benchmark::Counter::kIsRate);
}

// The latent products of B sequences at length L: S = Q C^T [H, L], O = S C [H, kv_lora].
void BM_latent_gemm(benchmark::State& st) {
  const int64_t B = st.range(0), L = st.range(1), H = 128, R = 512;
  const Mat<float> Q = Mat<float>::Random(H, R), C = Mat<float>::Random(L, R);
  std::vector<Mat<float>> S(static_cast<size_t>(B), Mat<float>(H, L)), O(static_cast<size_t>(B), Mat<float>(H, R));
  for (auto _ : st) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t b = 0; b < B; ++b) {
      S[b].noalias() = Q * C.transpose();
      O[b].noalias() = S[b] * C;
    }
    benchmark::DoNotOptimize(O[0].data());
  }
  st.counters["flops_per_second"] =
      benchmark::Counter(4.0 * static_cast<double>(B * H * L * R) * static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate);
}

// The same latent products through oneDNN's f32 matmul (bench/onednn_peer.hpp; issue 44's stronger peer):
// S = Q C^T (C read transposed in place), O = S C, per sequence, each product threaded by oneDNN itself. Skipped, saying why, in a build without oneDNN.
void BM_latent_onednn(benchmark::State& st) {
  if (!bench::OnednnMatmul::available()) return st.SkipWithError(bench::OnednnMatmul::missing_reason().c_str());
  const int64_t B = st.range(0), L = st.range(1), H = 128, R = 512;
  const Mat<float> Q = Mat<float>::Random(H, R), C = Mat<float>::Random(L, R);  // row-major: oneDNN's "ab"
  std::vector<Mat<float>> S(static_cast<size_t>(B), Mat<float>(H, L)), O(static_cast<size_t>(B), Mat<float>(H, R));
  bench::OnednnMatmul qc(H, R, L, bench::OnednnMatmul::Type::f32, true), sc(H, L, R, bench::OnednnMatmul::Type::f32);
  for (auto _ : st) {
    for (int64_t b = 0; b < B; ++b) {
      qc.run(Q.data(), C.data(), S[b].data());
      sc.run(S[b].data(), C.data(), O[b].data());
    }
    benchmark::DoNotOptimize(O[0].data());
  }
  st.SetLabel(qc.impl());
  st.counters["flops_per_second"] =
      benchmark::Counter(4.0 * static_cast<double>(B * H * L * R) * static_cast<double>(st.iterations()),
                         benchmark::Counter::kIsRate);
}

// Bytes read + written per second. range(1) = 1: buffers advised for huge pages (core/huge_pages.hpp), as the
// CD cache and the weights are -- the bound CD is judged against; 0: plain 4 KiB pages (shown beside it: on a
// VM with shadow page tables the two differ by 2-4x, cpu-history 2026-11-29).
void BM_copy(benchmark::State& st) {
  const int64_t n = st.range(0);
  std::vector<float> a, b;
  if (st.range(1) == 1) {
    assign_advised(a, static_cast<size_t>(n), 1.0f);
    assign_advised(b, static_cast<size_t>(n), 0.0f);
  } else {
    a.assign(static_cast<size_t>(n), 1.0f);
    b.assign(static_cast<size_t>(n), 0.0f);
  }
  for (auto _ : st) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) {
      const int64_t lo = n * c / 64, hi = n * (c + 1) / 64;
      std::memcpy(b.data() + lo, a.data() + lo, static_cast<size_t>(hi - lo) * sizeof(float));
    }
    benchmark::DoNotOptimize(b.data());
  }
  st.counters["bytes_per_second"] = benchmark::Counter(8.0 * static_cast<double>(n) * static_cast<double>(st.iterations()),
                                                       benchmark::Counter::kIsRate);
}
}  // namespace

BENCHMARK(BM_copy)->Args({1 << 26, 1})->Args({1 << 26, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_latent_gemm)->Args({1, 4096})->Args({32, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_latent_onednn)->Args({32, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, CD, std::string("CD"))->Args({1, 1024, 0})->Args({1, 16384, 0})->Args({1, 16384, 3})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, CC, std::string("CC"))->Args({1, 1024, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, A_CC, std::string("A_CC"))->Args({1, 1024, 0})->Args({1, 4096, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, A_CC_ME, std::string("A_CC_ME"))->Args({1, 1024, 0})->Args({1, 16384, 0})->Args({32, 4096, 0})->Args({32, 4096, 1})->Args({32, 4096, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, AM, std::string("AM"))->Args({1, 1024, 0})->Args({32, 4096, 0})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_rung, flash_mla, std::string("flash_mla"))->Args({1, 1024, 0})->Args({1, 16384, 0})->Args({32, 4096, 0})->Args({32, 4096, 1})->Args({32, 4096, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
