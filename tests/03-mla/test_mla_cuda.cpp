// tests/03-mla/test_mla_cuda.cpp -- stage 03 CUDA rungs (run on the CPU through SIMT) vs the fp64 CD oracle
// under the tolerance rule: every rung on a ragged batch with a shuffled block table and NaN past L (and
// again with each GEMM kernel forced), flash_mla's split-KV combine at several split sizes, flash_split's
// shared-memory banks, and errors (the GEMM against Eigen: test_mla_cuda_gemm.cpp). CTest runs this
// binary under SIMT_SCHEDULE=forward, reverse and random:1, and once more in the TSan build, so a missing
// __syncthreads fails at least one of them. Tiny shapes: every CUDA thread is a fiber here.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ladder/cuda/device.hpp"
#include "ladder/cuda/03-mla/mla.hpp"
#include "test_mla_util.hpp"

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

// Tiny config (ladder/03-mla/config.hpp), B = 5 with L = 1, 17, 64, 65, 130, shuffled pages, two spare NaN pages.
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

// 35 heads (a full group of kFlashHeads = 32 and one of 3), kv_lora 300 (both column quads of
// flash_split's o, the second partly) and D = 308 (not a multiple of the 32-dim score chunk);
// L = 1, 64, 65, 200: at one page per split the short sequences' later splits start past L_b, and
// the last tiles hold 1 and 8 rows. Shuffled pages, NaN past L and in two spare pages.
const Case& wide() {
  static const Case c = [] {
    Case r;
    ref::Config cfg = ref::tiny_config();
    cfg.n_heads = 35;
    cfg.kv_lora_rank = 300;
    r.W = ref::random_weights(cfg, 23);
    r.in = ref::make_inputs(r.W, ref::InputSpec{{1, 64, 65, 200}, 24, true, 2, true});
    r.oracle = ref::golden_oracle(r.W, r.in);
    r.base = ref::run(ref::reference_rung<float>(ref::Variant::CD), r.W, r.in.cache, r.in.step);
    return r;
  }();
  return c;
}

// cuda::mla::flash_mla on case c at each split size (pages per split) against the oracle.
void check_flash_splits(const Case& c, std::initializer_list<int64_t> splits) {
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
  for (int64_t split : splits) {
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

ref::Output<float> run(const Rung& r, const Case& c) {
  coverage.mark(r);
  return ref::run(r.fn<ref::RungFns>().f32, c.W, c.in.cache, c.in.step);
}
}  // namespace

TEST_CASE("the registry holds the six CUDA decode rungs and the two CUDA chunk rungs") {
  const auto rungs = registry().stage(kStage, "cuda");
  REQUIRE(rungs.size() == 8);
  CHECK(rungs[0]->id == "CD");
  CHECK(rungs[5]->id == "flash_mla");
  CHECK(rungs[6]->id == ref::kPrefillRung);
  CHECK(rungs[7]->id == ref::kChunkAbsorbedRung);
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

TEST_CASE("every CUDA rung vs the fp64 oracle with each GEMM kernel forced: 128 x 128, split-K, 16 x 16") {
  // At these shapes every product picks gemm_small by itself; DeepSeek-V2 shapes take the other two.
  const Case& c = ragged();
  const std::pair<int, int> choices[] = {{cuda::mla::kGemmTile, 1}, {cuda::mla::kGemmTile, 3},
                                         {cuda::mla::kGemmSmallTile, 0}};
  for (const auto& [tile, split] : choices) {
    const cuda::mla::ForceGemm force(tile, split);
    for (const Rung* r : registry().stage(kStage, "cuda")) {
      CAPTURE(r->key());
      CAPTURE(tile);
      CAPTURE(split);
      const ref::Output<float> o = run(*r, c);
      CHECK(test::check_output(r->key(), o, c.oracle, c.base, c.in.cache.seqlens));
    }
  }
}

TEST_CASE("flash_mla kernel: split-KV partials merged by the combine kernel, 1 and 2 pages per split") {
  check_flash_splits(ragged(), {1, 2});
}

TEST_CASE("flash_mla kernel: 35 heads (head groups of 32 and 3), kv_lora 300, splits past L_b") {
  check_flash_splits(wide(), {1, 3});
  const Rung& r = registry().find(kStage, "cuda", "flash_mla");  // the registry's 4 pages per split
  CHECK(test::check_output(r.key(), run(r, wide()), wide().oracle, wide().base, wide().in.cache.seqlens));
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
  g.split_k = 2, g.tile = cuda::mla::kGemmSmallTile;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("split_k = 2 with tile = 16 violates"), Error);
  g.split_k = -1, g.tile = 0;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("split_k = -1 with tile = 0 violates"), Error);
  g.split_k = 40000;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("batch = 2 x split_k = 40000 violates"), Error);
  g.split_k = 0, g.pipeline = 2;
  CHECK_THROWS_WITH_AS(cuda::mla::gemm(g), doctest::Contains("pipeline = 2 violates"), Error);
  g.pipeline = -1;
  CHECK_THROWS_WITH_AS(cuda::mla::ForceGemm(7, 0), doctest::Contains("ForceGemm: tile = 7 violates"), Error);
  CHECK_THROWS_WITH_AS(cuda::mla::ForceGemm(cuda::mla::kGemmSmallTile, 2),
                       doctest::Contains("ForceGemm: split_k = 2 violates"), Error);
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
  // The chunk rungs' check (check_chunk, mla_prefill.cpp) names the rung and the input.
  W.W_UQ = W.kv_b = W.W_O = &x;
  CHECK_THROWS_WITH_AS(cuda::mla::chunk_absorbed(W, {2}, {0}, 1, &x, &x, &x, false, &x, &x),
                       doctest::Contains("chunk_absorbed: q_lens[0] = 2, prefix[0] = 0 violate"), Error);
  CHECK_THROWS_WITH_AS(cuda::mla::chunk_absorbed(W, {1}, {0, 0}, 1, &x, &x, &x, false, &x, &x),
                       doctest::Contains("chunk_absorbed: q_lens [1], prefix [2] violate"), Error);
  CHECK_THROWS_WITH_AS(cuda::mla::chunk_absorbed(W, {1}, {0}, 1, &x, &x, &x, true, &x, &x),
                       doctest::Contains("chunk_absorbed: write_rows needs W_DKV and kv_norm"), Error);
  W.cfg.kv_lora_rank = 1000;
  CHECK_THROWS_WITH_AS(cuda::mla::flash_mla(W, s, &x, 1, &t, 1, 1, {&x, nullptr, nullptr, &x}),
                       doctest::Contains("kv_lora_rank = 1000 violates"), Error);
}

TEST_CASE("flash_split's shared-memory accesses: one wavefront per warp access, except the partial-score store") {
  // The thread maps of cuda/src/03-mla/mla_flash.cu (tid = 32 warp + lane); word a is in bank a mod 32. A
  // warp access is one wavefront when no bank holds two different words (a 128-bit load of <= 32
  // distinct words, broadcast lanes counted once); `ways` is the most different words in one bank.
  using namespace cuda::mla;
  constexpr int LQ = kFlashQStride, LK = kFlashKStride;
  const auto ways = [](const std::vector<int64_t>& words) {
    std::vector<std::vector<int64_t>> bank(32);
    for (int64_t w : words)
      if (std::find(bank[w % 32].begin(), bank[w % 32].end(), w) == bank[w % 32].end()) bank[w % 32].push_back(w);
    size_t n = 0;
    for (const auto& b : bank) n = std::max(n, b.size());
    return (int)n;
  };
  const auto quad = [](std::vector<int64_t>& words, int64_t a) {  // the 4 words of a 128-bit load at a
    CHECK(a % 4 == 0);
    for (int64_t i = 0; i < 4; ++i) words.push_back(a + i);
  };
  for (int warp = 0; warp < kFlashThreads / 32; ++warp) {
    CAPTURE(warp);
    std::vector<int64_t> kstore, qstore, unpadded, partial, soft;
    std::vector<std::vector<int64_t>> qread(kFlashK), kread(kFlashK), pread(2), vread(2);
    for (int lane = 0; lane < 32; ++lane) {
      const int tid = 32 * warp + lane;
      // chunk copies: dim lk of rows lr + 8 l (l > 0 shifts every lane's bank by 8 l alike)
      const int lk = (tid & 7) + 8 * ((tid >> 5) & 3), lr = ((tid >> 3) & 3) + 4 * (tid >> 7);
      kstore.push_back(lk * LK + lr);
      qstore.push_back(lk * LQ + lr);
      unpadded.push_back(lk * kFlashTileTokens + lr);  // Ks without its 4 floats of row padding
      // scores: 128-bit loads of q (heads 4 sr..) and of the tile (tokens 4 sc..) at every dim kk
      const int sr = lane / 8 + 4 * (warp % 2), sc = lane % 8 + 8 * (warp / 2 % 2);
      for (int kk = 0; kk < kFlashK; ++kk) {
        quad(qread[size_t(kk)], kk * LQ + 4 * sr);
        quad(kread[size_t(kk)], kk * LK + 4 * sc);
      }
      partial.push_back((4 * sc) * LQ + 4 * sr);  // element (head 0, token 0) of the 4 x 4; the others alike
      soft.push_back((tid % 8) * LQ + tid / 8);   // softmax: token sp + 8 i of head sg, i = 0
      // o += P V: P of heads 8 tr.. (two 128-bit loads), V columns 4 tc.. and 256 + 4 tc.. of a row
      const int tr = lane / 8, tc = warp * 8 + lane % 8;
      quad(pread[0], 8 * tr);
      quad(pread[1], 8 * tr + 4);
      quad(vread[0], 4 * tc);
      quad(vread[1], 256 + 4 * tc);
    }
    CHECK(ways(kstore) == 1);
    CHECK(ways(qstore) == 1);
    CHECK(ways(unpadded) == 8);  // stride 64 = 0 mod 32: a token's 8 dims in one bank
    for (int kk = 0; kk < kFlashK; ++kk) {
      CHECK(ways(qread[size_t(kk)]) == 1);
      CHECK(ways(kread[size_t(kk)]) == 1);
    }
    CHECK(ways(soft) == 1);
    for (int i = 0; i < 2; ++i) {
      CHECK(ways(pread[size_t(i)]) == 1);  // any row t: t (G + 4) is a multiple of 4
      CHECK(ways(vread[size_t(i)]) == 1);  // any row t: t ldv is a multiple of 4
    }
    CHECK(ways(partial) == 4);  // 4-way, but 16 stores per thread per tile against 2 x 16 x 18 loads
  }
  CHECK(flash_v_stride(512) == 512);
  CHECK(flash_v_stride(300) == 300);
  CHECK(flash_v_stride(301) == 304);
  CHECK(flash_split_smem_bytes(512) == 42240);  // < 48 KiB: no opt-in; 5 blocks per H100 SM by shared memory
  CHECK(flash_split_smem_bytes(36) == 4 * (2 * kFlashK * (LK + LQ) + kFlashTileTokens * LQ + 2 * kFlashHeads));
}

TEST_CASE("every registered CUDA rung of stage 03 was exercised") {
  CHECK(coverage.missing(registry(), kStage, "cuda").empty());
}
