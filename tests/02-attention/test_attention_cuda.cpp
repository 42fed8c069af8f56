// tests/02-attention/test_attention_cuda.cpp -- stage 02 CUDA rungs (run on the CPU through SIMT) vs the fp64
// oracle under the tolerance rule (forward k = 2: O, L, m; backward k = 3: dQ | dK | dV and D), with the
// naive reference rung at float32 as the baseline, as tests/02-attention/test_attention.cpp does. CTest runs this
// binary under SIMT_SCHEDULE=forward, reverse and random:1, and once more in the TSan build, so a
// missing __syncthreads fails at least one of them. Shapes stay small (every CUDA thread is a fiber):
// the golden cases up to 239 x 1 / 1 x 239; q239_k239_d128 and the ~1k cases are left to the
// reference tests (tens of millions of fiber steps each, and TSan's fibers are memory-hungry).
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ladder/02-attention/golden.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/device.hpp"
#include "test_attention_util.hpp"

using namespace ladder;
using namespace ladder::attention;

namespace {
Coverage coverage;

#if defined(SIMT_TSAN)
// libgomp is not built with TSan: the references' host-side OpenMP runs on one thread here.
const bool kOneOmpThread = [] {
  omp_set_num_threads(1);
  return true;
}();
#endif

struct Case {
  std::string name;
  Problem p;
  Array<float> Q, K, V, dO;
  Array<double> O, L, m, D, dQ, dK, dV;  // the fp64 oracle
};

Case from_golden(const std::string& name) {
  const GoldenCase& c = golden_case(name);
  const GoldenInputs in = golden_inputs(c);
  const GoldenOracle o = golden_oracle(c, in);
  return {name, c.p, in.Q, in.K, in.V, in.dO, o.O, o.L, o.m, o.D, o.dQ, o.dK, o.dV};
}

Case random_case(int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, bool causal, uint64_t seed) {
  Case k;
  k.name = "random B" + std::to_string(B) + " H" + std::to_string(H) + " q" + std::to_string(Nq) + " k" +
           std::to_string(Nk) + " d" + std::to_string(d) + (causal ? " causal" : "");
  k.p = Problem::make(B, H, Nq, Nk, d, causal);
  Rng rng(seed);
  k.Q = test::randn<float>(rng, {B, H, Nq, d});
  k.K = test::randn<float>(rng, {B, H, Nk, d});
  k.V = test::randn<float>(rng, {B, H, Nk, d});
  k.dO = test::randn<float>(rng, {B, H, Nq, d});
  const Array<double> Q = k.Q.cast<double>(), K = k.K.cast<double>(), V = k.V.cast<double>();
  const Forward<double> f = run_forward<double>(&naive_forward<double>, k.p, Q, K, V);
  const Grads<double> g = run_backward<double>(&naive_backward<double>, k.p, Q, K, V, f.O, k.dO.cast<double>(), f.L);
  k.O = f.O, k.L = f.L, k.m = f.m, k.D = g.D, k.dQ = g.dQ, k.dK = g.dK, k.dV = g.dV;
  return k;
}

std::vector<Case> cases() {
  std::vector<Case> r;
  for (const char* name : {"q1_k1_d32", "q97_k113_d32_causal", "q97_k97_d64_peaky", "q113_k97_d59_causal",
                           "q239_k1_d64_causal", "q1_k239_d111_causal"})
    r.push_back(from_golden(name));
  // Awkward shapes: one query, lengths 33 and 97 (partial tiles and warps), head dims 59 and 128,
  // causal with Nq > Nk and Nq < Nk, B x H > 1.
  r.push_back(random_case(1, 1, 1, 33, 59, false, 301));
  r.push_back(random_case(1, 2, 33, 97, 32, true, 302));
  r.push_back(random_case(2, 1, 97, 33, 59, true, 303));
  r.push_back(random_case(2, 2, 33, 33, 128, true, 304));
  r.push_back(random_case(1, 1, 17, 1, 32, false, 305));
  return r;
}

// The forward kernels a rung is run with: the `tiled` rung with each of its two kernels (ForceTiled:
// tiled_wide, 64 rows per tile, the default; tiled_16, the 16-row kernel kept for timing), any other
// rung once (ForceTiled does not affect it).
std::vector<int> tiled_kernels(const Rung& r) {
  if (r.id == "tiled") return {cuda::attention::kWideBr, cuda::attention::kBr};
  return {cuda::attention::kWideBr};
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> c = cases();
  return c;
}
}  // namespace

TEST_CASE("the registry holds the four CUDA rungs of stage 02, each with a cost") {
  const auto rungs = registry().stage(kStage, "cuda");
  REQUIRE(rungs.size() == 4);
  CHECK(rungs[0]->id == "naive");
  CHECK(rungs[1]->id == "flash");
  CHECK(rungs[2]->id == "tiled");
  CHECK(rungs[3]->id == "backward_recompute");
  for (const Rung* r : rungs) CHECK(r->cost({2, 4, 97, 113, 64, 1}).flops > 0);
}

TEST_CASE("every CUDA forward rung vs the fp64 oracle (O, L, m) on the small goldens and awkward shapes") {
  for (const Case& k : all_cases()) {
    CAPTURE(k.name);
    const Forward<float> base = [&] {  // the rule's baseline, fixed order (core/fixed_order.hpp)
      const FixedOrder pinned;
      return run_forward<float>(&naive_forward<float>, k.p, k.Q, k.K, k.V);
    }();
    for (const Rung* r : registry().stage(kStage, "cuda")) {
      if (is_backward(*r)) continue;
      CAPTURE(r->key());
      coverage.mark(*r);
      for (int rows : tiled_kernels(*r)) {
        CAPTURE(rows);
        const cuda::attention::ForceTiled force(rows);
        const Forward<float> y = test::forward<float>(*r, k.p, k.Q, k.K, k.V);
        for (auto [name, o, c, b] : {std::tuple{"O", &k.O, &y.O, &base.O}, std::tuple{"L", &k.L, &y.L, &base.L},
                                     std::tuple{"m", &k.m, &y.m, &base.m}}) {
          CAPTURE(name);
          const CompareReport rep = compare(*o, *c, *b, test::kForward32);
          CHECK_MESSAGE(rep.pass, rep.text());
        }
      }
    }
  }
}

TEST_CASE("tiled_16 with d_v != d (MLA prefill's per-head shape d_qk 192, d_v 128) vs the fp64 oracle; the others refuse") {
  const Case k = from_golden("dqk192_dv128_q17_k17_causal");
  REQUIRE(k.p.dim_v() == 128);
  REQUIRE(k.p.d == 192);
  const Forward<float> base = [&] {
    const FixedOrder pinned;
    return run_forward<float>(&naive_forward<float>, k.p, k.Q, k.K, k.V);
  }();
  const Rung& tiled = registry().find(kStage, "cuda", "tiled");
  {
    const cuda::attention::ForceTiled force(cuda::attention::kBr);
    const Forward<float> y = test::forward<float>(tiled, k.p, k.Q, k.K, k.V);
    for (auto [name, o, c, b] : {std::tuple{"O", &k.O, &y.O, &base.O}, std::tuple{"L", &k.L, &y.L, &base.L},
                                 std::tuple{"m", &k.m, &y.m, &base.m}}) {
      CAPTURE(name);
      const CompareReport rep = compare(*o, *c, *b, test::kForward32);
      CHECK_MESSAGE(rep.pass, rep.text());
    }
  }
  // tiled_wide (the default kernel) and flash keep d_v == d: refused by name, not computed wrong.
  CHECK_THROWS_WITH_AS(test::forward<float>(tiled, k.p, k.Q, k.K, k.V), doctest::Contains("d_v = 128 violates"), Error);
  CHECK_THROWS_WITH_AS(test::forward<float>(registry().find(kStage, "cuda", "flash"), k.p, k.Q, k.K, k.V),
                       doctest::Contains("d_v = 128 violates"), Error);
}

TEST_CASE("the CUDA backward vs the fp64 oracle (dQ | dK | dV, D) on the small goldens and awkward shapes") {
  for (const Case& k : all_cases()) {
    CAPTURE(k.name);
    // As in the reference tests: the float rungs consume the float forward's O and L.
    const Forward<float> f = run_forward<float>(&tiled_forward_default<float>, k.p, k.Q, k.K, k.V);
    const Grads<float> base = [&] {
      const FixedOrder pinned;
      return run_backward<float>(&naive_backward<float>, k.p, k.Q, k.K, k.V, f.O, k.dO, f.L);
    }();
    const Array<double> oracle = test::gradient(Grads<double>{k.dQ, k.dK, k.dV, k.D});
    for (const Rung* r : registry().stage(kStage, "cuda")) {
      if (!is_backward(*r)) continue;
      CAPTURE(r->key());
      coverage.mark(*r);
      const Grads<float> g = test::backward<float>(*r, k.p, k.Q, k.K, k.V, f.O, k.dO, f.L);
      const CompareReport rep = compare(oracle, test::gradient(g), test::gradient(base), test::kBackward32);
      CHECK_MESSAGE(rep.pass, "gradient (dQ | dK | dV): ", rep.text());
      const CompareReport rd = compare(k.D, g.D, base.D, test::kBackward32);
      CHECK_MESSAGE(rd.pass, "D: ", rd.text());
    }
  }
}

TEST_CASE("fully masked rows: O = 0, L = m = -inf, zero dQ (causal, Nq > Nk)") {
  const Case& k = all_cases()[3];  // q113_k97_d59_causal: rows 0..15 of each head see no key
  REQUIRE(k.name == "q113_k97_d59_causal");
  for (const Rung* r : registry().stage(kStage, "cuda")) {
    CAPTURE(r->key());
    if (is_backward(*r)) {
      const Forward<float> f = run_forward<float>(&tiled_forward_default<float>, k.p, k.Q, k.K, k.V);
      const Grads<float> g = test::backward<float>(*r, k.p, k.Q, k.K, k.V, f.O, k.dO, f.L);
      for (int64_t c = 0; c < 16 * k.p.d; ++c) CHECK(g.dQ.data[size_t(c)] == 0.0f);
      continue;
    }
    for (int rows : tiled_kernels(*r)) {
      CAPTURE(rows);
      const cuda::attention::ForceTiled force(rows);
      const Forward<float> y = test::forward<float>(*r, k.p, k.Q, k.K, k.V);
      for (int64_t i = 0; i < 16; ++i) {
        CHECK(y.L.data[size_t(i)] == -INFINITY);
        CHECK(y.m.data[size_t(i)] == -INFINITY);
        for (int64_t c = 0; c < k.p.d; ++c) CHECK(y.O.data[size_t(i * k.p.d + c)] == 0.0f);
      }
    }
  }
}

TEST_CASE("a row whose whole probability is on one key gets dQ exactly 0 (D summed in dP's order)") {
  // With one key, O_i = V_0 exactly, dP = dO_i . V_0 and D_i = dO_i . O_i are the same sum, and
  // dS = P (dP - D) = 0. The backward sums D in the order of its dP loop, so the two round alike and
  // dQ is exactly 0 -- also on a GPU, where nvcc contracts the sums into fmas (D summed by 32 lanes
  // and a butterfly left dQ 1.4e-6 off on an H200, over the rule's floor).
  for (const Case* k : {&all_cases()[4], &all_cases().back()}) {  // q239_k1_d64_causal; random q17 k1 d32
    CAPTURE(k->name);
    REQUIRE(k->p.Nk == 1);
    const Forward<float> f = run_forward<float>(&tiled_forward_default<float>, k->p, k->Q, k->K, k->V);
    for (const Rung* r : registry().stage(kStage, "cuda")) {
      if (!is_backward(*r)) continue;
      CAPTURE(r->key());
      const Grads<float> g = test::backward<float>(*r, k->p, k->Q, k->K, k->V, f.O, k->dO, f.L);
      int64_t nonzero = 0;
      for (float v : g.dQ.data) nonzero += v != 0.0f;
      CHECK(nonzero == 0);
    }
  }
}

TEST_CASE("the host API rejects what the kernels cannot run, naming the parameter") {
  cuda::DeviceBuffer<float> buf(size_t(4 * 129));
  float* b = buf.data();
  CHECK_THROWS_WITH_AS(cuda::attention::tiled(Problem::make(1, 1, 2, 2, 129), b, b, b, b, b, nullptr),
                       doctest::Contains("d = 129 violates d <= kMaxHeadDim"), Error);
  CHECK_THROWS_WITH_AS(cuda::attention::flash(Problem::make(1, 1, 0, 2, 8), b, b, b, b, b, nullptr),
                       doctest::Contains("Nq = 0"), Error);
  CHECK_THROWS_AS(cuda::attention::naive(Problem::make(1, 1, 2, 2, 8), nullptr, b, b, b, b, nullptr), Error);
}

// The ways of a shared-memory access: the most distinct words one bank serves for a warp (word a is
// in bank a mod 32; lanes reading the same word share one broadcast). 1 = conflict-free.
static int bank_ways(const std::vector<int>& words) {
  std::vector<std::vector<int>> bank(32);
  for (int w : words)
    if (std::find(bank[w % 32].begin(), bank[w % 32].end(), w) == bank[w % 32].end()) bank[w % 32].push_back(w);
  int ways = 0;
  for (const auto& b : bank) ways = std::max(ways, (int)b.size());
  return ways;
}

TEST_CASE("the tiled kernels' S loop reads K_j and Q_i rows without bank conflicts (tile_row_stride)") {
  // One warp of the forward's S loop (cuda/src/02-attention/attention_tiled.cu): lane l is half (l & 1) of thread pair
  // l >> 1, which computes the 2 x 2 block of S at rows 2 (pair / (kBc / 2)), +1 and columns
  // 2 (pair % (kBc / 2)), +1, over the head-dim columns c = 2 n + half. Each of its four loads (Q_i rows
  // 2 sr and 2 sr + 1, K_j rows 2 sc and 2 sc + 1) must hit one word per bank, rows tile_row_stride(d)
  // floats apart. The O loop's loads of V_j row j at columns lane + 32 k are consecutive words.
  const int pairs_per_row = cuda::attention::kBc / 2;
  for (int d : {1, 59, 64, 111, 128}) {
    const int ld = cuda::attention::tile_row_stride(d);
    for (int n = 0; 2 * n < d; ++n) {
      for (int second_row = 0; second_row < 2; ++second_row) {
        std::vector<int> k_words, q_words, k_unpadded;
        for (int l = 0; l < 32; ++l) {
          const int pair = l >> 1, half = l & 1, c = 2 * n + half;
          const int sr = pair / pairs_per_row, sc = pair % pairs_per_row;
          k_words.push_back((2 * sc + second_row) * ld + c);
          q_words.push_back((2 * sr + second_row) * ld + c);
          k_unpadded.push_back((2 * sc + second_row) * d + c);
        }
        CHECK(bank_ways(k_words) == 1);
        CHECK(bank_ways(q_words) == 1);
        if (d == 128) CHECK(bank_ways(k_unpadded) == 8);  // d = 128 as the row stride: 8 rows per bank
      }
    }
    for (int j = 0; j < cuda::attention::kBc; ++j) {
      for (int k = 0; 32 * k < d; ++k) {
        std::vector<int> v_words;
        for (int l = 0; l < 32; ++l) v_words.push_back(j * ld + l + 32 * k);
        CHECK(bank_ways(v_words) == 1);
      }
    }
  }
}

TEST_CASE("tiled_wide's hot shared-memory reads and its transposed stores are conflict-free") {
  // cuda/src/02-attention/attention_tiled_wide.cu: thread t = 16 ty + tx, warp w holds ty = 2 w, 2 w + 1. Row strides 66
  // (Qc, Kc: k-major, [16][66]) and 68 (Ps [64][68]); Vc [16][128].
  constexpr int ld = cuda::attention::kWideBr + 2, pld = cuda::attention::kWideBc + 4;
  for (int w = 0; w < cuda::attention::kWideThreads / 32; ++w) {
    for (int c = 0; c < cuda::attention::kWideK; ++c)
      for (int i = 0; i < 4; ++i) {
        std::vector<int> q, k, pr, pw, v;
        for (int l = 0; l < 32; ++l) {
          const int t = 32 * w + l, ty = t / 16, tx = t % 16;
          q.push_back(c * ld + 4 * ty + i);              // S: Qc[c][4 ty + i]
          k.push_back(c * ld + 16 * i + tx);             // S: Kc[c][16 j + tx], j = i
          pr.push_back((4 * ty + i) * pld + c);          // P V: Ps[4 ty + i][key], key = c
          pw.push_back((4 * ty + i) * pld + 16 * (c % 4) + tx);  // softmax: Ps[4 ty + i][16 j + tx]
          v.push_back(c * 128 + 16 * (i % 8) + tx);      // P V: Vc[key][16 k + tx]
        }
        CHECK(bank_ways(q) == 1);
        CHECK(bank_ways(k) == 1);
        CHECK(bank_ways(pr) == 1);
        CHECK(bank_ways(pw) == 1);
        CHECK(bank_ways(v) == 1);
      }
    for (int l = 0; l < 4; ++l) {  // the Qc / Kc stores: element e = t + 256 l -> Qc[e % 16][e / 16]
      std::vector<int> st, st68;
      for (int lane = 0; lane < 32; ++lane) {
        const int e = 32 * w + lane + cuda::attention::kWideThreads * l;
        st.push_back(e % 16 * ld + e / 16);
        st68.push_back(e % 16 * (ld + 2) + e / 16);
      }
      CHECK(bank_ways(st) == 1);
      CHECK(bank_ways(st68) == 2);  // a stride of 64 + 4 would make them two-way
    }
  }
}

TEST_CASE("every registered CUDA rung of stage 02 was exercised") {
  CHECK(coverage.missing(registry(), kStage, "cuda").empty());
}
