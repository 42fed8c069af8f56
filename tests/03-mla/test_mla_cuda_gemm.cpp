// tests/03-mla/test_mla_cuda_gemm.cpp -- stage 03's one GEMM (cuda/src/03-mla/mla_gemm.cu, run on the CPU
// through SIMT) against Eigen: its kernels (gemm_small, gemm_batched, gemm_batched split-K), each in both
// K-loop schedules, on awkward shapes, every operand layout, batched with an inner index, lens and
// accumulate; split-K with K clipped per sequence and empty slices; the kernel choice from the shapes.
// The rungs with each kernel forced (ForceGemm) are in test_mla_cuda.cpp. CTest runs this binary under
// SIMT_SCHEDULE=forward, reverse and random:1, and once more in the TSan build, so a missing
// __syncthreads fails at least one of them. Tiny shapes: every CUDA thread is a fiber here.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"

using namespace ladder;

namespace {
#if defined(SIMT_TSAN)
// libgomp is not built with TSan, so its barriers are invisible to it and host-side OpenMP (Eigen's
// products, built with OpenMP) would be reported as races. The TSan pass is about the kernels: the host
// side runs on one thread (as in test_mla_cuda.cpp).
const bool kOneOmpThread = [] {
  omp_set_num_threads(1);
  return true;
}();
#endif

std::vector<float> normals(Rng& rng, int64_t n) {  // n standard-normal floats
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(rng.normal());
  return v;
}
}  // namespace

TEST_CASE("the GEMM kernels vs Eigen: awkward M, N, K; batched with an inner index; lens; accumulate; A B form") {
  Rng rng(5);
  auto rnd = [&rng](int64_t n) { return normals(rng, n); };
  // The TSan pass (one run, every CUDA thread a TSan fiber: ~10x the time) keeps every kernel path and load
  // order and the shapes a race could hide in -- one tile and several, partial tiles, a split-K with empty
  // slices (K = 1) and a ragged last slice (K = 40); the values of the other shapes are checked in the
  // three schedules of the normal build.
#if defined(SIMT_TSAN)
  const std::vector<int64_t> Ms = {17, 130}, Ns = {16, 131}, Ks = {1, 40};
#else
  const std::vector<int64_t> Ms = {1, 17, 130}, Ns = {1, 16, 33, 131}, Ks = {1, 15, 40};
#endif
  for (int64_t M : Ms) {
    for (int64_t N : Ns) {
      for (int64_t K : Ks) {
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        const int64_t outer = 2, inner = 3, Z = outer * inner;
        const std::vector<float> A = rnd(Z * M * K), Bm = rnd(Z * N * K), C0 = rnd(Z * M * N);
        const std::vector<int64_t> lens = {N, (N + 1) / 2};  // sequence 1 uses half of N
        cuda::DeviceBuffer<float> dA(A), dB(Bm), dC(C0);
        cuda::DeviceBuffer<int64_t> dl(lens);
        std::vector<std::vector<float>> results(20);
        for (int variant = 0; variant < 20; ++variant) {
          // B as [N, K] or [K, N] (nn), A as [M, K] or [K, M] (at): each kernel's two load orders
          const bool nn = variant & 1, at = variant & 2;
          // the five paths: gemm_small; gemm_batched and gemm_batched split-K over 3 slices of K (slices
          // of 8, 8, 16 k for K = 1, 15, 40: K = 1 leaves two slices empty, K = 15 one, K = 40 ends
          // ragged), each in its pipelined schedule (the default) and the old two-barrier one
          const int kernel = variant / 4;
          const int tile = kernel == 0 ? cuda::mla::kGemmSmallTile : cuda::mla::kGemmTile;
          const int split = kernel == 2 || kernel == 4 ? 3 : 0;
          const int pipeline = kernel >= 3 ? 0 : -1;
          CAPTURE(nn);
          CAPTURE(at);
          CAPTURE(tile);
          CAPTURE(split);
          CAPTURE(pipeline);
          dC.copy_from_host(C0.data(), C0.size());
          cuda::mla::Gemm g;
          g.tile = tile, g.split_k = split, g.pipeline = pipeline;
          g.M = M, g.N = N, g.K = K, g.batch = Z, g.inner = inner, g.alpha = 0.5f, g.accumulate = true;
          g.A = dA.data(), g.a_o = inner * M * K, g.a_i = M * K, g.a_m = at ? 1 : K, g.a_k = at ? M : 1;
          g.B = dB.data(), g.b_o = inner * N * K, g.b_i = N * K, g.b_n = nn ? 1 : K, g.b_k = nn ? N : 1;
          g.C = dC.data(), g.c_o = inner * M * N, g.c_i = M * N, g.c_m = N;
          g.lens = dl.data(), g.lens_on_n = true;
          cuda::mla::gemm(g);
          const std::vector<float> got = dC.to_host();
          double err = 0;
          for (int64_t z = 0; z < Z; ++z) {
            const int64_t n_used = lens[size_t(z / inner)];
            const Mat<float> a = at ? Mat<float>(ConstMatMap<float>(&A[size_t(z * M * K)], K, M).transpose())
                                    : Mat<float>(ConstMatMap<float>(&A[size_t(z * M * K)], M, K));
            const Mat<float> b = nn ? Mat<float>(ConstMatMap<float>(&Bm[size_t(z * N * K)], K, N).transpose())
                                    : Mat<float>(ConstMatMap<float>(&Bm[size_t(z * N * K)], N, K));
            const Mat<double> want = a.cast<double>() * b.cast<double>().transpose() * 0.5;
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const size_t at = size_t(z * M * N + m * N + n);
                const double w = n < n_used ? want(m, n) + C0[at] : C0[at];  // C past N_z untouched
                const double d = std::abs(double(got[at]) - w);
                err = std::max(err, std::isnan(d) ? HUGE_VAL : d);  // std::max alone drops a NaN (read poison)
              }
          }
          CHECK(err < 1e-5 * double(K + 1));
          // the two schedules sum k = 0, 1, ..., K-1 in the same order into one accumulator: the same bits
          results[size_t(variant)] = got;
          if (kernel >= 3)
            CHECK(std::memcmp(got.data(), results[size_t(variant - 8)].data(), got.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("split-K GEMM vs Eigen: K clipped per sequence (lens on K), slices past K_z, no accumulate, S = 1..7") {
  // M = 33, N = 20 (one ragged 128-tile), K = 203 (neither a multiple of the K step nor of S); sequence
  // 1 uses K = 50 only, so most of its slices are empty and must still contribute exact zeros. C starts
  // random: without accumulate it is overwritten where used. Slices: S = 1: 203 (26 K steps, the last of
  // 3 k); S = 2: 104 + 99; S = 5: 48 x 4 + 11; S = 7: 32 x 6 + 11. Each in both gemm_batched schedules.
  Rng rng(6);
  auto rnd = [&rng](int64_t n) { return normals(rng, n); };
  const int64_t M = 33, N = 20, K = 203, Z = 2;
  const std::vector<int64_t> lens = {K, 50};
  const std::vector<float> A = rnd(Z * M * K), Bm = rnd(Z * K * N), C0 = rnd(Z * M * N);
  cuda::DeviceBuffer<float> dA(A), dB(Bm), dC(C0);
  cuda::DeviceBuffer<int64_t> dl(lens);
  CHECK(cuda::mla::gemm_split_slice(K, 2) == 104);
  CHECK(cuda::mla::gemm_split_slice(K, 5) == 48);
  CHECK(cuda::mla::gemm_split_slice(K, 7) == 32);
  std::vector<std::vector<float>> results(8);
  for (int variant = 0; variant < 8; ++variant) {
    // S = 1: gemm_batched unsplit (forced), with K clipped per sequence too; each S in both schedules
    const int split = std::array{1, 2, 5, 7}[size_t(variant % 4)], pipeline = variant < 4 ? -1 : 0;  // default, old
    CAPTURE(split);
    CAPTURE(pipeline);
    dC.copy_from_host(C0.data(), C0.size());
    cuda::mla::Gemm g;  // C = -0.75 A B with B [K, N] row-major
    g.split_k = split, g.pipeline = pipeline;
    g.M = M, g.N = N, g.K = K, g.batch = Z, g.alpha = -0.75f;
    g.A = dA.data(), g.a_o = M * K, g.a_m = K;
    g.B = dB.data(), g.b_o = K * N, g.b_n = 1, g.b_k = N;
    g.C = dC.data(), g.c_o = M * N, g.c_m = N;
    g.lens = dl.data(), g.lens_on_k = true;
    CHECK(cuda::mla::gemm_workspace(g) == (split > 1 ? split * Z * M * N : 0));
    cuda::mla::gemm(g);
    const std::vector<float> got = dC.to_host();
    double err = 0;
    for (int64_t z = 0; z < Z; ++z) {
      const int64_t k_used = lens[size_t(z)];
      const Mat<double> a = ConstMatMap<float>(&A[size_t(z * M * K)], M, K).leftCols(k_used).cast<double>();
      const Mat<double> b = ConstMatMap<float>(&Bm[size_t(z * K * N)], K, N).topRows(k_used).cast<double>();
      const Mat<double> want = a * b * -0.75;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          const double d = std::abs(double(got[size_t(z * M * N + m * N + n)]) - want(m, n));
          err = std::max(err, std::isnan(d) ? HUGE_VAL : d);  // NaN: an empty slice's partial left unwritten
        }
    }
    CHECK(err < 1e-5 * double(K + 1));
    results[size_t(variant)] = got;  // the old schedule's bits are the pipelined one's
    if (variant >= 4)
      CHECK(std::memcmp(got.data(), results[size_t(variant - 4)].data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the GEMM's kernel choice from the shapes: split-K for DeepSeek-V2's B = 64 projections") {
  using namespace cuda::mla;
  const auto plan = [](int64_t M, int64_t N, int64_t K, int64_t batch) {
    Gemm g;
    g.M = M, g.N = N, g.K = K, g.batch = batch;
    return std::pair<int, int64_t>{gemm_tile(g), gemm_split(g)};
  };
  using P = std::pair<int, int64_t>;
  // deepseek_v2(): hidden 5120, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128
  CHECK(plan(64, 5120, 16384, 1) == P{kGemmTile, 4});    // W_O: 40 tiles -> 160 blocks of K = 4096
  CHECK(plan(64, 1536, 5120, 1) == P{kGemmTile, 11});    // W_DQ: 12 tiles -> 132 blocks of K = 472 (last 400)
  CHECK(plan(64, 16384, 1536, 1) == P{kGemmTile, 2});    // W_UQ: 128 tiles -> 256 blocks of K = 768
  CHECK(plan(64, 8192, 1536, 1) == P{kGemmTile, 3});     // W_QR: 64 tiles -> 192 blocks of K = 512
  CHECK(plan(64, 128, 512, 128) == P{kGemmTile, 2});     // W_UV per head: 128 tiles -> 256 blocks of K = 256
  CHECK(plan(64, 512, 128, 128) == P{kGemmTile, 1});     // W_UK absorption: 512 tiles, unsplit
  CHECK(plan(64, 5120, 65536, 1) == P{kGemmTile, 4});    // AM's W_absO: 40 tiles -> 160 blocks of K = 16384
  CHECK(plan(128, 4096, 576, 64) == P{kGemmTile, 1});    // the scores: 2048 tiles
  CHECK(plan(64, 5120, 300, 1) == P{kGemmSmallTile, 1});  // K too short for two slices of 256
  CHECK(plan(64, 64, 4096, 1) == P{kGemmSmallTile, 1});   // 16 slices of 1 tile: < 66 blocks
  CHECK(plan(64, 4224, 512, 1) == P{kGemmTile, 2});       // 33 tiles x 2 = 66: half the SMs, the least it takes
  CHECK(gemm_split_slice(5120, 11) == 472);
  Gemm g;
  g.M = 64, g.N = 5120, g.K = 16384;
  CHECK(gemm_workspace(g) == 4 * 64 * 5120);
  g.tile = kGemmTile;  // forcing the kernel forces no split
  CHECK(gemm_split(g) == 1);
  CHECK(gemm_workspace(g) == 0);
  g.tile = 0, g.split_k = 3, g.N = 100000;  // forcing a split forces gemm_batched, even with many tiles
  CHECK(gemm_tile(g) == kGemmTile);
  CHECK(gemm_split(g) == 3);
}
