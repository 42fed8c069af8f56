// tests/test_03_mla_cuda.cpp -- stage 03 CUDA rungs (run on the CPU through SIMT) vs the fp64 CD oracle
// under the tolerance rule: every rung on a ragged batch with a shuffled block table and NaN past L,
// flash_mla's split-KV combine at several split sizes, the one GEMM kernel against Eigen on awkward
// shapes, and errors. CTest runs this binary under SIMT_SCHEDULE=forward, reverse and random:1, and once
// more in the TSan build, so a missing __syncthreads fails at least one of them. Tiny shapes: every
// CUDA thread is a fiber here.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/mla.hpp"
#include "test_03_mla_util.hpp"

using namespace ladder;
namespace ref = ladder::mla;

namespace {
const std::string kStage = ref::kStage;
Coverage coverage;

#if defined(SIMT_TSAN)
// libgomp is not built with TSan, so its barriers are invisible to it and the references' host-side
// OpenMP (inputs, oracle, baselines) would be reported as races. The TSan pass is about the kernels:
// the host side runs on one thread.
const bool kOneOmpThread = [] {
  omp_set_num_threads(1);
  return true;
}();
#endif

struct Case {
  ref::Weights<float> W;
  ref::Inputs in;
  ref::Output<double> oracle;
  ref::Output<float> base;
};

// Tiny config (ladder/mla/config.hpp), B = 5 with L = 1, 17, 64, 65, 130, shuffled pages, two spare NaN pages.
const Case& ragged() {
  static const Case c = [] {
    Case r;
    r.W = ref::random_weights(ref::tiny_config(), 21);
    r.in = ref::make_inputs(r.W, ref::InputSpec{{1, 17, 64, 65, 130}, 22, true, 2, true});
    r.oracle = ref::golden_oracle(r.W, r.in);
    r.base = ref::run(ref::reference_rung<float>(ref::Variant::CD), r.W, r.in.cache, r.in.step);
    return r;
  }();
  return c;
}

ref::Output<float> run(const Rung& r, const Case& c) {
  coverage.mark(r);
  return ref::run(r.fn<ref::RungFns>().f32, c.W, c.in.cache, c.in.step);
}
}  // namespace

TEST_CASE("the registry holds the six CUDA rungs") {
  const auto rungs = registry().stage(kStage, "cuda");
  REQUIRE(rungs.size() == 6);
  CHECK(rungs[0]->id == "CD");
  CHECK(rungs[5]->id == "flash_mla");
  for (const Rung* r : rungs) CHECK(r->cost(ref::cost_shape(ref::deepseek_v2(), 1, 1)).flops > 0);
}

TEST_CASE("every CUDA rung vs the fp64 oracle: u, scores, attn, lse (ragged batch, shuffled pages, NaN past L)") {
  const Case& c = ragged();
  for (const Rung* r : registry().stage(kStage, "cuda")) {
    CAPTURE(r->key());
    const ref::Output<float> o = run(*r, c);
    CHECK(test::check_output(r->key(), o, c.oracle, c.base, c.in.cache.seqlens));
  }
}

TEST_CASE("flash_mla kernel: split-KV partials merged by the combine kernel, 1 and 2 pages per split") {
  const Case& c = ragged();
  const ref::Config& cfg = c.W.cfg;
  const ref::Prepared<float> p = ref::prepare_flash(c.W, c.in.cache);
  const int64_t B = p.batch(), H = cfg.n_heads;
  std::vector<float> rope(static_cast<size_t>(B * cfg.qk_rope));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < cfg.qk_rope / 2; ++i) {
      const double a = double(c.in.step.q_pos[b]) * std::pow(cfg.rope_theta, -2.0 * double(i) / double(cfg.qk_rope));
      rope[size_t(b * cfg.qk_rope + i)] = float(std::cos(a));
      rope[size_t(b * cfg.qk_rope + cfg.qk_rope / 2 + i)] = float(std::sin(a));
    }
  cuda::DeviceBuffer<float> W_DQ(c.W.W_DQ.data(), size_t(c.W.W_DQ.size())), qn(c.W.q_norm.data(), size_t(c.W.q_norm.size())),
      W_UQ(c.W.W_UQ.data(), size_t(c.W.W_UQ.size())), W_QR(c.W.W_QR.data(), size_t(c.W.W_QR.size())),
      kv_b(c.W.kv_b.data(), size_t(c.W.kv_b.size())), W_O(c.W.W_O.data(), size_t(c.W.W_O.size()));
  cuda::mla::Weights W{cfg, W_DQ.data(), qn.data(), W_UQ.data(), W_QR.data(), kv_b.data(), W_O.data()};
  cuda::DeviceBuffer<float> h(c.in.step.h.data(), size_t(c.in.step.h.size())), cs(rope), blocks(p.paged.blocks.data);
  cuda::DeviceBuffer<int64_t> seqlens(p.seqlens);
  cuda::DeviceBuffer<int32_t> table(p.paged.block_table.data);
  for (int64_t split : {1, 2}) {
    CAPTURE(split);
    cuda::DeviceBuffer<float> u(size_t(B * cfg.hidden)), lse(size_t(B * H));
    cuda::mla::flash_mla(W, {B, p.max_len(), h.data(), cs.data(), seqlens.data()}, blocks.data(),
                         p.paged.blocks.shape[0], table.data(), p.paged.block_table.shape[1], split,
                         {u.data(), nullptr, nullptr, lse.data()});
    cuda::sync();
    ref::Output<float> o;
    o.u = Mat<float>(B, cfg.hidden);
    u.copy_to_host(o.u.data(), u.size());
    o.lse = Array<float>({B, H});
    lse.copy_to_host(o.lse.data.data(), lse.size());
    CHECK(test::check_output("flash_mla", o, c.oracle, c.base, c.in.cache.seqlens));
  }
}

TEST_CASE("the GEMM kernel vs Eigen: awkward M, N, K; batched with an inner index; lens; accumulate; A B form") {
  Rng rng(5);
  auto rnd = [&rng](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = float(rng.normal());
    return v;
  };
  for (int64_t M : {1, 17, 130}) {
    for (int64_t N : {1, 16, 33, 131}) {
      for (int64_t K : {1, 15, 40}) {
        CAPTURE(M);
        CAPTURE(N);
        CAPTURE(K);
        const int64_t outer = 2, inner = 3, Z = outer * inner;
        const std::vector<float> A = rnd(Z * M * K), Bm = rnd(Z * N * K), C0 = rnd(Z * M * N);
        const std::vector<int64_t> lens = {N, (N + 1) / 2};  // sequence 1 uses half of N
        cuda::DeviceBuffer<float> dA(A), dB(Bm), dC(C0);
        cuda::DeviceBuffer<int64_t> dl(lens);
        for (int variant = 0; variant < 8; ++variant) {
          // B as [N, K] or [K, N] (nn), A as [M, K] or [K, M] (at): each kernel's two load orders
          const bool nn = variant & 1, at = variant & 2;
          const int tile = variant & 4 ? cuda::mla::kGemmTile : cuda::mla::kGemmSmallTile;
          CAPTURE(nn);
          CAPTURE(at);
          CAPTURE(tile);
          dC.copy_from_host(C0.data(), C0.size());
          cuda::mla::Gemm g;
          g.tile = tile;  // both kernels: the 128 x 128 register-tiled one and the 16 x 16 one
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
                err = std::max(err, std::abs(double(got[at]) - w));
              }
          }
          CHECK(err < 1e-5 * double(K + 1));
        }
      }
    }
  }
}

TEST_CASE("a wrong kernel result is caught: flash_mla run with the block table of another sequence") {
  const Case& c = ragged();
  ref::PagedCache<float> swapped = c.in.cache;
  const int64_t mb = swapped.block_table.shape[1];
  std::swap(swapped.block_table.data[2 * mb], swapped.block_table.data[3 * mb]);  // sequences 2 and 3 trade first pages
  const Rung& r = registry().find(kStage, "cuda", "flash_mla");
  const ref::Output<float> o = ref::run(r.fn<ref::RungFns>().f32, c.W, swapped, c.in.step);
  CHECK_FALSE(compare(test::as_array(c.oracle.u), test::as_array(o.u), test::as_array(c.base.u), test::kMla32).pass);
}

TEST_CASE("bad sizes raise ladder::Error naming the parameter") {
  cuda::mla::Gemm g;
  g.M = 2, g.N = 2, g.K = 2, g.batch = 5, g.inner = 2;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("batch = 5, inner = 2 violate"), Error);
  g.batch = 2, g.M = -1;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("M, N, K = -1, 2, 2 violate"), Error);
  g.M = 2;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("null A, B or C"), Error);
  cuda::mla::Weights W{ref::tiny_config()};
  float x = 0;
  int64_t L = 1;
  int32_t t = 0;
  const cuda::mla::Step s{1, 1, &x, &x, &L};
  W.W_DQ = W.q_norm = W.W_QR = &x;
  CHECK_THROWS_WITH_AS(cuda::mla::flash_mla(W, s, &x, 1, &t, 1, 0, {&x, nullptr, nullptr, &x}),
                       doctest::Contains("split_blocks = 0 violates"), Error);
  CHECK_THROWS_WITH_AS(cuda::mla::cd(W, {0, 1, &x, &x, &L}, &x, &x, {&x, &x, &x, nullptr}),
                       doctest::Contains("B = 0 violates B >= 1"), Error);
  W.cfg.kv_lora_rank = 1000;
  CHECK_THROWS_WITH_AS(cuda::mla::flash_mla(W, s, &x, 1, &t, 1, 1, {&x, nullptr, nullptr, &x}),
                       doctest::Contains("kv_lora_rank = 1000 violates"), Error);
}

TEST_CASE("flash_split's score step reads the cache tile and q without bank conflicts (flash_row_stride)") {
  // Warp g of the score step: lane l adds dims part + 4 i (part = l % 4) of token t = l / 4 and head g;
  // word t ld + part + 4 i of the tile, g ld + part + 4 i of q; word a is in bank a mod 32.
  const auto ways = [](const std::vector<int64_t>& words) {
    std::vector<std::vector<int64_t>> bank(32);
    for (int64_t w : words)
      if (std::find(bank[w % 32].begin(), bank[w % 32].end(), w) == bank[w % 32].end()) bank[w % 32].push_back(w);
    size_t n = 0;
    for (const auto& b : bank) n = std::max(n, b.size());
    return (int)n;
  };
  static_assert(cuda::mla::kFlashDotThreads * cuda::mla::kFlashTileTokens == 32, "one head's scores: one warp");
  for (int64_t D : {576, 72, 100, 33}) {
    const int64_t ld = cuda::mla::flash_row_stride(D);
    CHECK(ld >= D);
    for (int64_t i = 0; 4 * i + 3 < D; ++i) {
      std::vector<int64_t> tile, q, unpadded;
      for (int l = 0; l < 32; ++l) {
        tile.push_back(l / 4 * ld + l % 4 + 4 * i);
        q.push_back(l % 4 + 4 * i);
        unpadded.push_back(l / 4 * D + l % 4 + 4 * i);
      }
      CHECK(ways(tile) == 1);
      CHECK(ways(q) == 1);
      if (D == 576) CHECK(ways(unpadded) == 8);  // ld = D = 0 mod 32: the 8 tokens in one bank
    }
  }
  CHECK(cuda::mla::flash_split_smem_bytes(576) == 28016);  // 8 blocks of 4 warps per H100 SM (228 KiB)
}

TEST_CASE("every registered CUDA rung of stage 03 was exercised") {
  CHECK(coverage.missing(registry(), kStage, "cuda").empty());
}
