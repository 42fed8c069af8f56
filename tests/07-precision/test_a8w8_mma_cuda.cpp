// tests/07-precision/test_a8w8_mma_cuda.cpp -- the A8W8 GEMM on tensor cores (cuda::precision::a8w8_gemm_mma and
// a8w8_gemm_mma_nk, cuda/src/07-precision/a8w8_mma.cuh) against the reference bit for bit: acc equals
// gemm_s8s8s32's exact sums and y equals ladder::precision::a8w8_gemm's, and both equal the __dp4a kernel's
// (cuda::precision::a8w8_gemm), on one whole 128 x 128 tile, a ragged 77 x 45 x 48 (masks on every edge, a
// three-quarter last K step), K = 16 (one chunk per row), 200 x 136 x 320 (five steps: the 3-stage ring wraps)
// and 1 x 1 x 16. Outputs start poisoned (-1 / NaN) and the guard past M x N must stay untouched. Large sums:
// every product (-128)(-128) or (-128)(127) over K = 2048 (and, on the device, K = 131056, the largest K % 16 == 0
// the recipe allows). Bad K, misaligned operands, oversized M refused naming the parameter. Under SIMT in three
// schedules and under TSan (the ragged shape alone there); on the device in the GPU build. The planted mistakes:
// test_a8w8_mma_cuda_planted.cu.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"
#include "precision_cuda_util.hpp"

using namespace ladder;
namespace cp = ladder::cuda::precision;
using namespace ladder::test_precision;

namespace {
struct Out {
  std::vector<int32_t> acc;  // M x N, then the guard
  std::vector<float> y;
};

// One call of `gemm` (a8w8_gemm, a8w8_gemm_mma or a8w8_gemm_mma_nk) with poisoned outputs and a guard of N + 64
// cells past M x N. w is wq [K, N], or wq^T [N, K] for the _nk form.
template <class Gemm>
Out call(Gemm gemm, const std::vector<int8_t>& a, const std::vector<float>& xs, const std::vector<int8_t>& w,
         const std::vector<float>& ws, int64_t M, int64_t K, int64_t N) {
  const size_t cells = sz(M * N) + sz(N + 64);
  cuda::DeviceBuffer<int8_t> da(a), dw(w);
  cuda::DeviceBuffer<float> dxs(xs), dws(ws), y(cells);  // fresh buffers are poisoned: -1, NaN
  cuda::DeviceBuffer<int32_t> acc(cells);
  gemm(da.data(), dxs.data(), dw.data(), dws.data(), M, K, N, acc.data(), y.data());
  cuda::sync();
  return {acc.to_host(), y.to_host()};
}

bool guard_kept(const Out& o, int64_t M, int64_t N) {
  for (size_t i = sz(M * N); i < o.acc.size(); ++i) {
    int32_t yi;
    std::memcpy(&yi, &o.y[i], sizeof yi);
    if (o.acc[i] != -1 || yi != -1) return false;
  }
  return true;
}

std::vector<int8_t> transposed(const std::vector<int8_t>& w, int64_t K, int64_t N) {
  std::vector<int8_t> t(sz(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) t[sz(n * K + k)] = w[sz(k * N + n)];
  return t;
}

}  // namespace

TEST_CASE("07 CUDA: the tensor-core A8W8 GEMM's acc and y are the reference's and the dp4a kernel's bits") {
  struct Shape {
    int64_t M, N, K;
  };
  const std::vector<Shape> shapes =
      kTsan ? std::vector<Shape>{{77, 45, 48}}
            : std::vector<Shape>{{128, 128, 64}, {77, 45, 48}, {130, 140, 16}, {200, 136, 320}, {1, 1, 16}};
  Rng rng(4007);
  for (const Shape& s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.N);
    CAPTURE(s.K);
    const Mat<float> x = operand(rng, s.M, s.K, true), w = operand(rng, s.K, s.N, false);
    const ladder::precision::A8W8Result want = ladder::precision::a8w8_gemm(x, w);
    const std::vector<int8_t> a = ladder::precision::int8_codes(want.xq), b = ladder::precision::int8_codes(want.wq);
    const std::vector<float> xs(want.xq.scales.data(), want.xq.scales.data() + s.M),
        ws(want.wq.scales.data(), want.wq.scales.data() + s.N);
    const Out mma = call(cp::a8w8_gemm_mma, a, xs, b, ws, s.M, s.K, s.N);
    const Out nk = call(cp::a8w8_gemm_mma_nk, a, xs, transposed(b, s.K, s.N), ws, s.M, s.K, s.N);
    const Out dp4a = call(cp::a8w8_gemm, a, xs, b, ws, s.M, s.K, s.N);
    for (const Out* o : {&mma, &nk}) {
      CHECK(same_prefix_bits(o->acc, want.acc.data(), sz(s.M * s.N)));
      CHECK(same_prefix_bits(o->y, want.y.data(), sz(s.M * s.N)));
      CHECK(same_prefix_bits(o->acc, dp4a.acc.data(), sz(s.M * s.N)));
      CHECK(same_prefix_bits(o->y, dp4a.y.data(), sz(s.M * s.N)));
      CHECK(guard_kept(*o, s.M, s.N));  // nothing written past M x N
    }
  }
}

TEST_CASE("07 CUDA: the tensor-core A8W8 GEMM's largest sums are exact, of either sign") {
  // Under SIMT K = 2048 (32 steps; the emulated mma is slow); on the device also K = 131056, the largest
  // multiple of 16 within kA8W8MaxK: 131056 x 2^14 = 2147221504 <= 2^31 - 1, and -131056 x 16256 fits too.
  std::vector<int64_t> Ks = {2048};
  if (kGpu) Ks.push_back(131056);
  if (kTsan) return;  // 32 steps of a 128 x 128 tile under TSan: long, and the ragged shape covers the races
  const int64_t M = 17, N = 9;
  for (int64_t K : Ks)
    for (int8_t wv : {int8_t{-128}, int8_t{127}}) {
      CAPTURE(K);
      CAPTURE(static_cast<int>(wv));
      const std::vector<int8_t> a(sz(M * K), int8_t{-128}), w(sz(K * N), wv);
      const std::vector<float> xs(sz(M), 1.0f), ws(sz(N), 1.0f);
      const Out o = call(cp::a8w8_gemm_mma, a, xs, w, ws, M, K, N);
      const int64_t want = K * -128 * wv;
      bool all = true;
      for (int64_t i = 0; i < M * N; ++i)
        all = all && o.acc[sz(i)] == want && o.y[sz(i)] == static_cast<float>(static_cast<int32_t>(want));
      CHECK(all);
      CHECK(guard_kept(o, M, N));
    }
}

TEST_CASE("07 CUDA: a8w8_gemm_mma refuses K % 16 != 0, K past int32's reach, misaligned operands, M past the grid") {
  cuda::DeviceBuffer<int8_t> q(std::vector<int8_t>(64, 0));
  cuda::DeviceBuffer<float> s(std::vector<float>(8, 1.0f)), y(8);
  cuda::DeviceBuffer<int32_t> acc(8);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data(), s.data(), q.data(), s.data(), 2, 24, 2, acc.data(), y.data()),
                       doctest::Contains("a8w8_gemm_mma: K = 24 violates K % 16 == 0"), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data(), s.data(), q.data(), s.data(), 1, 131072, 1, acc.data(), y.data()),
                       doctest::Contains("K = 131072 violates 1 <= K <= 131071"), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data(), s.data(), q.data(), s.data(), 2, 0, 2, acc.data(), y.data()),
                       doctest::Contains("K = 0 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data() + 1, s.data(), q.data(), s.data(), 2, 16, 2, acc.data(), y.data()),
                       doctest::Contains("xq = "), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma_nk(q.data(), s.data(), q.data() + 8, s.data(), 2, 16, 2, acc.data(), y.data()),
                       doctest::Contains("a8w8_gemm_mma_nk: wt = "), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data(), s.data(), q.data(), s.data(), int64_t{65535} * 128 + 1, 16, 2,
                                         acc.data(), y.data()),
                       doctest::Contains("M = 8388481 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(q.data(), s.data(), q.data(), s.data(), 2, 16, 0, acc.data(), y.data()),
                       doctest::Contains("N = 0 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm_mma(nullptr, s.data(), q.data(), s.data(), 2, 16, 2, acc.data(), y.data()),
                       doctest::Contains("null pointer"), Error);
  cp::a8w8_gemm_mma(nullptr, nullptr, nullptr, nullptr, 0, 16, 5, nullptr, nullptr);  // M = 0: no launch
}
