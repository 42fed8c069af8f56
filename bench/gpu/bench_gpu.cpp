// bench/gpu/bench_gpu.cpp -- the GPU benchmark (built only by LADDER_CUDA=GPU): every CUDA rung at the
// shapes of the first H100 run, timed with CUDA events around the host API (its per-call scratch
// included: stream-ordered allocations from the memory pool, ladder/cuda/device.hpp) after warm-up,
// on random non-zero inputs, beside two floors measured in the same run -- a device-to-device copy
// (bytes floor) and an FMA-bound kernel (fp32 FLOP floor) -- and beside cuBLAS SGEMM for the
// GEMM-shaped steps; the project GEMM in both its K-loop schedules
// (pipelined, the default, and the old two-barrier one). One table; ratios only within this run.
//   bench_gpu [--json FILE] [--reps N] [--only GROUP]
//     median of N timed calls (default 10) after 2 warm-ups; GROUP = softmax, attention, mla or gemm runs
//     that group's rows alone (e.g. under a profiler: ncu --metrics gpu__time_duration.sum bench_gpu --only mla)
// The gemm group also times the tensor-core GEMMs, bf16 and int8, beside cuBLAS's (bench_gpu_lowp.cpp).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_gpu.hpp"
#include "floors.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"
#include "ladder/cuda/01-softmax/softmax.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/03-mla/cost.hpp"
#include "ladder/03-mla/flash.hpp"

using namespace ladder;
using cuda::DeviceBuffer;
namespace bg = ladder::bench_gpu;

int g_reps = 10;  // bench_gpu.hpp: time_ms's repetitions (--reps)

void bg::check_cublas(cublasStatus_t s, const char* call) {
  require(s == CUBLAS_STATUS_SUCCESS, "{}: cuBLAS status {}", call, static_cast<int>(s));
}

// Median of g_reps calls of f, each between two CUDA events, after two untimed calls.
double bg::time_ms(const std::function<void()>& f) {
  cudaEvent_t a, b;
  cuda::check(cudaEventCreate(&a), "cudaEventCreate");
  cuda::check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 2; ++i) f();
  cuda::sync();
  std::vector<double> t;
  for (int i = 0; i < g_reps; ++i) {
    cuda::check(cudaEventRecord(a), "cudaEventRecord");
    f();
    cuda::check(cudaEventRecord(b), "cudaEventRecord");
    cuda::sync();
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

DeviceBuffer<float> bg::random_buffer(std::size_t n, std::uint64_t seed, float lo, float hi) {
  DeviceBuffer<float> b(n);
  bg::fill_random(b.data(), n, seed, lo, hi);
  return b;
}

namespace {

using bg::check_cublas;
using bg::random_buffer;
using bg::Row;
using bg::time_ms;

double g_gemm_old_over_new = NAN;  // gemm_rows: the old schedule's time over the pipelined one's at 4096^3
double g_tiled_old_over_wide = NAN;  // attention_rows: tiled 16x16's time over tiled (64 x 64)'s at B8 N4096 d128

struct Floors {
  double copy_gbs = 0, fma_tflops = 0;
  double floor_ms(const Row& r) const {
    return r.kind == "bytes" ? r.work / (copy_gbs * 1e9) * 1e3 : r.work / (fma_tflops * 1e12) * 1e3;
  }
};

Floors measure_floors() {
  Floors f;
  const std::size_t n = std::size_t(1) << 28;  // 1 GiB of floats each way
  DeviceBuffer<float> src = random_buffer(n, 1), dst(n);
  const double copy_ms = time_ms([&] {
    cuda::check(cudaMemcpyAsync(dst.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice), "cudaMemcpy");
  });
  f.copy_gbs = 2.0 * double(n * sizeof(float)) / (copy_ms * 1e-3) / 1e9;  // read + write
  int sms = 0;
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  DeviceBuffer<float> sink(1);
  double flops = 0;
  const double fma_ms = time_ms([&] { flops = bg::launch_fma_chain(sink.data(), sms * 32, 1 << 14); });
  f.fma_tflops = flops / (fma_ms * 1e-3) / 1e12;
  return f;
}

// C_z = A_z B_z^T for z < batch, row-major A [M,K], B [N,K], C [M,N] (cuBLAS is column-major: C^T = B A^T).
void sgemm_nt(cublasHandle_t h, int M, int N, int K, const float* A, long long sA, const float* B, long long sB,
              float* C, long long sC, int batch) {
  const float one = 1, zero = 0;
  check_cublas(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, B, K, sB, A, K, sA, &zero, C, N,
                                         sC, batch),
               "cublasSgemmStridedBatched");
}
// C_z = A_z B_z, row-major A [M,K], B [K,N] with row stride ldb >= N, C [M,N].
void sgemm_nn(cublasHandle_t h, int M, int N, int K, const float* A, long long sA, const float* B, int ldb,
              long long sB, float* C, long long sC, int batch) {
  const float one = 1, zero = 0;
  check_cublas(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, ldb, sB, A, K, sA, &zero, C,
                                         N, sC, batch),
               "cublasSgemmStridedBatched");
}

void softmax_rows(std::vector<Row>& rows) {
  const int64_t R = 16384, C = 4096;
  DeviceBuffer<float> x = random_buffer(std::size_t(R * C), 2, 0.1f, 4.0f), y(std::size_t(R * C));
  const std::string shape = fmt::format("{}x{} fp32", R, C);
  const double bytes = 2.0 * double(R * C) * sizeof(float);
  for (auto [name, fn] : {std::pair{"softmax v1_naive", &cuda::softmax::v1_naive},
                          std::pair{"softmax v2_safe", &cuda::softmax::v2_safe},
                          std::pair{"softmax v3_online", &cuda::softmax::v3_online},
                          std::pair{"softmax v4_online_warp", &cuda::softmax::v4_online_warp}})
    rows.push_back({name, shape, "bytes", time_ms([&, fn = fn] { fn(x.data(), y.data(), R, C); }), bytes});
}

void attention_rows(std::vector<Row>& rows, cublasHandle_t h) {
  const auto p = attention::Problem::make(8, 1, 4096, 4096, 128);
  const std::size_t q = std::size_t(p.B * p.H * p.Nq * p.d), kv = std::size_t(p.B * p.H * p.Nk * p.d),
                    l = std::size_t(p.B * p.H * p.Nq);
  DeviceBuffer<float> Q = random_buffer(q, 3), K = random_buffer(kv, 4), V = random_buffer(kv, 5), O(q), L(l), m(l);
  DeviceBuffer<float> dO = random_buffer(q, 6), dQ(q), dK(kv), dV(kv), D(l);
  const std::string shape = "B8 H1 N4096 d128 fp32";
  const double nnd = double(p.B * p.H) * double(p.Nq) * double(p.Nk) * double(p.d);
  // cuBLAS for the forward's two GEMMs (S = Q K^T, O = P V), batched over B x H; softmax not included.
  DeviceBuffer<float> S(std::size_t(p.B * p.H * p.Nq * p.Nk));
  const int N = int(p.Nq), d = int(p.d), bh = int(p.B * p.H);
  const double cublas_fwd = time_ms([&] {
    sgemm_nt(h, N, N, d, Q.data(), (long long)N * d, K.data(), (long long)N * d, S.data(), (long long)N * N, bh);
    sgemm_nn(h, N, d, N, S.data(), (long long)N * N, V.data(), d, (long long)N * d, O.data(), (long long)N * d, bh);
  });
  // Both tiled forward kernels in the same run (issue 13): "attention fwd tiled" is the default,
  // tiled_wide (64 x 64 tiles, the row scripts/gpu-check-report.py judges), and the 16 x 16 kernel
  // before it gets its own row; main() prints their ratio under the table.
  for (auto [name, fn] : {std::pair{"attention fwd naive", &cuda::attention::naive},
                          std::pair{"attention fwd flash (warp per row)", &cuda::attention::flash},
                          std::pair{"attention fwd tiled", &cuda::attention::tiled_wide},
                          std::pair{"attention fwd tiled 16x16 (old kernel)", &cuda::attention::tiled_16}}) {
    Row r{name, shape, "flops", time_ms([&, fn = fn] { fn(p, Q.data(), K.data(), V.data(), O.data(), L.data(), m.data()); }),
          4 * nnd};
    r.cublas_ms = cublas_fwd;
    rows.push_back(r);
  }
  g_tiled_old_over_wide = rows[rows.size() - 1].ms / rows[rows.size() - 2].ms;
  cuda::attention::tiled(p, Q.data(), K.data(), V.data(), O.data(), L.data(), m.data());  // O and L for the backward
  rows.push_back({"attention bwd recompute", shape, "flops", time_ms([&] {
                    cuda::attention::backward_recompute(p, Q.data(), K.data(), V.data(), O.data(), dO.data(), L.data(),
                                                        dQ.data(), dK.data(), dV.data(), D.data());
                  }),
                  10 * nnd});
  // The tensor-core forward (issue 42): bf16 Q, K, V (the same uniform [0.1, 1) draws, rounded to nearest even),
  // fp32 O and L, causal and not; scripts/gpu-check-report.py judges it against SDPA's flash backend in bf16
  // (scripts/gpu-torch-peers.py). Causal rows count the FLOPs of the visible half, 2 nnd, as FlashAttention does.
  {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> draw(0.1f, 1.0f);
    auto bf16_buffer = [&](std::size_t n) {
      std::vector<std::uint16_t> h(n);
      for (auto& b : h) b = formats::to_bf16(draw(gen));
      return DeviceBuffer<std::uint16_t>(h);
    };
    DeviceBuffer<std::uint16_t> Qb = bf16_buffer(q), Kb = bf16_buffer(kv), Vb = bf16_buffer(kv);
    for (bool causal : {false, true}) {
      auto pc = p;
      pc.causal = causal;
      rows.push_back({causal ? "attention fwd bf16 mma (FA2) causal" : "attention fwd bf16 mma (FA2)",
                      causal ? "B8 H1 N4096 d128 bf16 causal" : "B8 H1 N4096 d128 bf16", "flops", time_ms([&] {
                        cuda::attention::tiled_bf16(pc, Qb.data(), Kb.data(), Vb.data(), O.data(), L.data());
                      }),
                      causal ? 2 * nnd : 4 * nnd});
    }
  }
}

void mla_rows(std::vector<Row>& rows, cublasHandle_t h) {
  const mla::Config c = mla::deepseek_v2();
  const int64_t B = 64, Lc = 4096, H = c.n_heads, R = c.kv_dim(), page = 64;  // flash_mla pages: 64 rows (ladder/cuda/03-mla/mla.hpp)
  auto weight = [](int64_t out, int64_t in, std::uint64_t seed) {
    const float s = 1.0f / std::sqrt(float(in));
    return random_buffer(std::size_t(out * in), seed, 0.1f * s, s);
  };
  DeviceBuffer<float> W_DQ = weight(c.q_lora_rank, c.hidden, 10), q_norm = random_buffer(std::size_t(c.q_lora_rank), 11, 0.5f, 1.5f),
                      W_UQ = weight(H * c.qk_nope, c.q_lora_rank, 12), W_QR = weight(H * c.qk_rope, c.q_lora_rank, 13),
                      kv_b = weight(H * c.kv_b_rows(), c.kv_lora_rank, 14), W_O = weight(c.hidden, H * c.v_head, 15);
  cuda::mla::Weights W{c, W_DQ.data(), q_norm.data(), W_UQ.data(), W_QR.data(), kv_b.data(), W_O.data()};
  DeviceBuffer<float> hs = random_buffer(std::size_t(B * c.hidden), 16), rope = random_buffer(std::size_t(B * c.qk_rope), 17);
  DeviceBuffer<int64_t> seqlens(std::vector<int64_t>(std::size_t(B), Lc));
  DeviceBuffer<float> kv = random_buffer(std::size_t(B * Lc * R), 18), u(std::size_t(B * c.hidden)),
                      scores(std::size_t(B * H * Lc)), attn(std::size_t(B * H * Lc)), lse(std::size_t(B * H));
  const cuda::mla::Step s{B, Lc, hs.data(), rope.data(), seqlens.data()};
  const std::string shape = fmt::format("DeepSeek-V2 B{} L{} fp32", B, Lc);
  // cuBLAS for the step's two attention GEMMs per sequence: scores [H, L] = q [H, R] kv^T, o [H, kv_lora] = a kv.
  DeviceBuffer<float> qa = random_buffer(std::size_t(B * H * R), 19), o(std::size_t(B * H * c.kv_lora_rank));
  const double cublas_ms = time_ms([&] {
    sgemm_nt(h, int(H), int(Lc), int(R), qa.data(), H * R, kv.data(), Lc * R, scores.data(), H * Lc, int(B));
    sgemm_nn(h, int(H), int(c.kv_lora_rank), int(Lc), attn.data(), H * Lc, kv.data(), int(R), Lc * R, o.data(),
             H * c.kv_lora_rank, int(B));
  });
  Row r{"MLA A_CC_ME full step", shape, "flops", time_ms([&] {
          cuda::mla::a_cc_me(W, s, kv.data(), {u.data(), scores.data(), attn.data(), nullptr});
        }),
        mla::step_cost(mla::Variant::A_CC_ME, mla::cost_shape(c, B, Lc)).flops};
  r.cublas_ms = cublas_ms;
  rows.push_back(r);
  // flash_mla: the same cache in pages of `page` rows, pages shuffled as a paged allocator leaves them.
  const int64_t per_seq = Lc / page, num_blocks = B * per_seq;
  std::vector<int32_t> table(static_cast<std::size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(20));
  DeviceBuffer<int32_t> block_table(table);
  // split_blocks pages per split: 4 and 16 split each sequence (16 and 4 splits), 64 = Lc / page does not
  // (one split per sequence: at B = 64 the 4 head groups already give 256 blocks for 2 x 132 slots).
  for (int64_t split : {int64_t(4), int64_t(16), per_seq}) {
    Row f{fmt::format("MLA flash_mla full step (split {})", split), shape, "flops", time_ms([&] {
            cuda::mla::flash_mla(W, s, kv.data(), num_blocks, block_table.data(), per_seq, split,
                                 {u.data(), nullptr, nullptr, lse.data()});
          }),
          mla::step_cost(mla::Variant::flash_mla, mla::cost_shape(c, B, Lc)).flops};
    f.cublas_ms = cublas_ms;
    rows.push_back(f);
  }
}

void gemm_rows(std::vector<Row>& rows, cublasHandle_t h) {
  const int64_t n = 4096;
  DeviceBuffer<float> A = random_buffer(std::size_t(n * n), 21), Bm = random_buffer(std::size_t(n * n), 22), C(std::size_t(n * n));
  cuda::mla::Gemm g;
  g.M = g.N = g.K = n;
  g.A = A.data(), g.a_m = n, g.a_k = 1;
  g.B = Bm.data(), g.b_n = n, g.b_k = 1;
  g.C = C.data(), g.c_m = n, g.c_n = 1;
  const double cublas_ms =
      time_ms([&] { sgemm_nt(h, int(n), int(n), int(n), A.data(), 0, Bm.data(), 0, C.data(), 0, 1); });
  // Both K-loop schedules of gemm_batched in the same run (Gemm::pipeline): the default, pipelined one
  // (next step's loads in flight during this step's FMAs, one barrier per step) and the one before
  // issue 13 (copy, barrier, FMAs, barrier), whose ratio main() prints under the table.
  for (auto [pipeline, name] :
       {std::pair{-1, "project GEMM kernel (128x128 tiles, 8x8 per thread, pipelined), C = A B^T"},
        std::pair{0, "project GEMM kernel (same, old two-barrier schedule), C = A B^T"}}) {
    g.pipeline = pipeline;
    Row r{name, fmt::format("{0}x{0}x{0} fp32", n), "flops", time_ms([&] { cuda::mla::gemm(g); }),
          2.0 * double(n) * double(n) * double(n)};
    r.cublas_ms = cublas_ms;
    rows.push_back(r);
  }
  g_gemm_old_over_new = rows[rows.size() - 1].ms / rows[rows.size() - 2].ms;

  bg::lowp_gemm_rows(rows, h, n, C.data());  // bf16 and int8 on tensor cores (bench_gpu_lowp.cpp)
}

}  // namespace

int main(int argc, char** argv) try {
  std::string json_path, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--reps" && i + 1 < argc) g_reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else
      throw Error(
          fmt::format("bench_gpu: argument '{}' violates usage [--json FILE] [--reps N] [--only GROUP]", a));
  }
  int dev_count = 0;
  const cudaError_t status = cudaGetDeviceCount(&dev_count);
  if (status != cudaSuccess || dev_count == 0)
    throw Error(fmt::format("bench_gpu: no CUDA device: {}",
                            status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found 0"));
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cublasHandle_t h;
  check_cublas(cublasCreate(&h), "cublasCreate");
  check_cublas(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");  // true fp32: no TF32

  const Floors f = measure_floors();
  std::vector<Row> rows;
  require(only.empty() || only == "softmax" || only == "attention" || only == "mla" || only == "gemm",
          "bench_gpu: --only {} violates GROUP in {{softmax, attention, mla, gemm}}", only);
  const auto want = [&](const char* group) { return only.empty() || only == group; };
  if (want("softmax")) softmax_rows(rows);
  if (want("attention")) attention_rows(rows, h);
  if (want("mla")) mla_rows(rows, h);
  if (want("gemm")) gemm_rows(rows, h);
  cublasDestroy(h);

  fmt::print("# bench_gpu on {} ({} SMs), median of {} calls after 2 warm-ups\n", prop.name,
             prop.multiProcessorCount, g_reps);
  fmt::print("floors measured in this run: device-to-device copy {:.0f} GB/s (read + write); fp32 FMA chain "
             "{:.1f} TFLOP/s\n\n",
             f.copy_gbs, f.fma_tflops);
  fmt::print("| rung | shape | ms | rate | floor ms | ÷ floor | cuBLAS ms (GEMM steps) | ÷ cuBLAS |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  nlohmann::json j{{"device", prop.name},
                   {"sms", prop.multiProcessorCount},
                   {"reps", g_reps},
                   {"copy_gbs", f.copy_gbs},
                   {"fma_tflops", f.fma_tflops},
                   {"rows", nlohmann::json::array()}};
  for (Row& r : rows) {
    r.floor_ms = f.floor_ms(r);
    const double rate = r.kind == "bytes" ? r.work / (r.ms * 1e-3) / 1e9 : r.work / (r.ms * 1e-3) / 1e12;
    const std::string unit = r.kind == "bytes" ? "GB/s" : "TFLOP/s";
    const bool has_cublas = !std::isnan(r.cublas_ms);
    fmt::print("| {} | {} | {:.3f} | {:.2f} {} | {:.3f} | {:.2f} | {} | {} |\n", r.rung, r.shape, r.ms, rate, unit,
               r.floor_ms, r.ms / r.floor_ms, has_cublas ? fmt::format("{:.3f}", r.cublas_ms) : "-",
               has_cublas ? fmt::format("{:.2f}", r.ms / r.cublas_ms) : "-");
    j["rows"].push_back({{"rung", r.rung}, {"shape", r.shape}, {"ms", r.ms}, {"rate", rate}, {"unit", unit},
                         {"floor_ms", r.floor_ms}, {"over_floor", r.ms / r.floor_ms},
                         {"cublas_ms", has_cublas ? nlohmann::json(r.cublas_ms) : nlohmann::json()}});
  }
  fmt::print("\nattention fwd at B8 N4096 d128: tiled 16x16 (old kernel) / tiled (64x64) = {:.2f} (time ratio; > 1: "
             "the 64 x 64 kernel is faster)\n",
             g_tiled_old_over_wide);
  j["tiled_old_over_wide"] = g_tiled_old_over_wide;
  fmt::print("project GEMM at 4096^3: old two-barrier schedule / pipelined = {:.2f} (time ratio; > 1: the "
             "pipelined one is faster)\n",
             g_gemm_old_over_new);
  j["gemm_old_over_pipelined"] = g_gemm_old_over_new;
  if (!json_path.empty()) std::ofstream(json_path) << j.dump(2) << "\n";
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "{}\n", e.what());
  return 1;
}
