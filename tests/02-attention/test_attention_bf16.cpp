// tests/02-attention/test_attention_bf16.cpp -- stage 02's tensor-core forward, tiled_bf16
// (cuda/src/02-attention/attention_bf16.cuh): the inputs are rounded to bf16 first, and the kernel is compared
// with the fp64 oracle (naive_forward<double>) on THOSE bf16 values, under the error bound derived in
// test_attention_bf16.hpp (not tuned). CTest runs it through SIMT under SIMT_SCHEDULE=forward, reverse, random:1
// and once in the TSan build; the native GPU build runs it on the device. Shapes stay small (under SIMT every
// CUDA thread is a fiber and every mma and ldmatrix a warp collective). The planted mistakes:
// test_attention_bf16_planted.cu.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "test_attention_bf16.hpp"

using namespace ladder;
using namespace ladder::attention;
using namespace ladder::test::bf16;

TEST_CASE("tiled_bf16 vs the fp64 oracle on the same bf16 inputs, within the derived bound") {
  for (const Bf16Case& c : all_cases()) check_within_bound(c, run(c));
}

TEST_CASE("tiled_bf16 refuses head dims outside 1 <= d <= 128, naming d, and the shapes only the oracle computes") {
  cuda::DeviceBuffer<uint16_t> in(size_t(4 * 256));
  cuda::DeviceBuffer<float> out(size_t(4 * 256));
  for (int64_t d : {0, 129, 256}) {
    const std::string what = "d = " + std::to_string(d) + " violates 1 <= d <= 128";
    CHECK_THROWS_WITH_AS(cuda::attention::tiled_bf16(Problem::make(1, 1, 2, 2, d), in.data(), in.data(), in.data(),
                                                     out.data(), out.data()),
                         doctest::Contains(what.c_str()), Error);
  }
  CHECK_THROWS_AS(cuda::attention::tiled_bf16(Problem::make(1, 1, 2, 2, 64), nullptr, in.data(), in.data(),
                                              out.data(), out.data()),
                  Error);
  CHECK_THROWS_AS(cuda::attention::tiled_bf16(Problem::make(1, 1, 2, 2, 59), in.data(), nullptr, in.data(),
                                              out.data(), out.data()),
                  Error);
  for (const std::string& name : golden_case_names()) {  // GQA / MQA, d_v != d, windows, seqlens: refused
    const Problem& p = golden_case(name).p;
    if (p.plain()) continue;
    CAPTURE(name);
    const size_t n = size_t(p.heads() * std::max(p.Nq, p.Nk) * std::max(p.d, p.dim_v()));
    cuda::DeviceBuffer<uint16_t> x(n);
    cuda::DeviceBuffer<float> o(n);
    CHECK_THROWS_AS(cuda::attention::tiled_bf16(p, x.data(), x.data(), x.data(), o.data(), o.data()), Error);
  }
}

// Inputs 2 bytes past a 16-byte boundary: cp.async cannot copy their rows, so the host API takes the padding
// path (here a copy with no pad columns, D = d = 64) and gives the same O and L as the aligned call, bit for bit.
TEST_CASE("tiled_bf16 on inputs that are not 16-byte aligned: copied, the same result") {
  const Bf16Case& c = all_cases()[2];  // q100 k100 d64 causal: tails
  REQUIRE(c.p.d == 64);
  const auto shifted = [](const std::vector<uint16_t>& x) {
    std::vector<uint16_t> r(x.size() + 1, 0x3f80);  // element 0: bf16 1.0, never read
    std::copy(x.begin(), x.end(), r.begin() + 1);
    return cuda::DeviceBuffer<uint16_t>(r);
  };
  cuda::DeviceBuffer<uint16_t> Q = shifted(c.Q), K = shifted(c.K), V = shifted(c.V);
  cuda::DeviceBuffer<float> O(size_t(c.p.heads() * c.p.Nq * c.p.d)), L(size_t(c.p.heads() * c.p.Nq));
  cuda::attention::tiled_bf16(c.p, Q.data() + 1, K.data() + 1, V.data() + 1, O.data(), L.data());
  const Result shifted_r{O.to_host(), L.to_host()}, aligned = run(c);
  CHECK(shifted_r.O == aligned.O);
  CHECK(shifted_r.L == aligned.L);
  check_within_bound(c, shifted_r);
}

// Shared-memory banks of the kernel's 16-byte accesses (attention_bf16.cuh: logical chunk c of row r at chunk
// c ^ (r % 8), rows of d bf16). A 16-byte access is served 8 lanes at a time (one 8 x 8 matrix of an ldmatrix,
// 8 consecutive threads of a cp.async); the 8 rows of such a phase must cover the 32 banks once. Element offset
// as in swizzled<D>(); `swizzle` false is the plain row-major layout, whose 8 rows share 4 banks (8-way).
static int phase_ways(int d, const int (&rows)[8], const int (&chunks)[8], bool swizzle) {
  int use[32] = {};
  for (int i = 0; i < 8; ++i) {
    const int chunk = swizzle ? chunks[i] ^ (rows[i] & 7) : chunks[i];
    const int word = (rows[i] * d + chunk * 8) / 2;  // 4-byte words: 2 bf16 each
    for (int w = 0; w < 4; ++w) ++use[(word + w) % 32];
  }
  return *std::max_element(use, use + 32);
}

TEST_CASE("tiled_bf16's ldmatrix reads and cp.async stores are conflict-free (the XOR swizzle)") {
  for (int d : {64, 128}) {
    CAPTURE(d);
    for (int base = 0; base < 64; base += 8)        // the 8 rows of one matrix: rows base .. base + 7
      for (int chunk = 0; chunk < d / 8; ++chunk) {  // at one logical chunk (Q, K, V alike)
        int rows[8], chunks[8];
        for (int i = 0; i < 8; ++i) rows[i] = base + i, chunks[i] = chunk;
        CHECK(phase_ways(d, rows, chunks, true) == 1);
        CHECK(phase_ways(d, rows, chunks, false) == 8);
      }
    for (int t0 = 0; t0 < 64 * d / 8; t0 += 8) {  // cp.async: chunk e -> row e / (d / 8), chunk e % (d / 8)
      int rows[8], chunks[8];
      for (int i = 0; i < 8; ++i) rows[i] = (t0 + i) / (d / 8), chunks[i] = (t0 + i) % (d / 8);
      CHECK(phase_ways(d, rows, chunks, true) == 1);
    }
  }
}
