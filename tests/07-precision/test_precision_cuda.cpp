// tests/07-precision/test_precision_cuda.cpp -- stage 07's CUDA kernels (cuda/src/07-precision, run on the CPU
// through SIMT) against the reference recipes: the int8 per-token / per-channel and E4M3 1 x 128 quantisers and
// their dequantisations give the reference's bits (codes, scales, values) on awkward shapes, RNE ties and every
// E4M3 rounding boundary; the __dp4a GEMM's int32 sums equal gemm_s8s8s32's exactly (also at K = 131071 with
// every product -128 x -128, the largest sum the recipe allows) and its y equals a8w8_gemm's; the CUDA a8w8 rung
// passes both A8W8 goldens through the contract and is refused at float64 and at K past int32's reach. CTest
// runs this binary under SIMT_SCHEDULE=forward, reverse and random:1, and once in the TSan build (smaller
// shapes there). The planted kernels (wrong dp4a byte order, a missing barrier) are in
// test_precision_cuda_planted.cu.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "golden_util.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"
#include "precision_cuda_util.hpp"

using namespace ladder;
namespace cp = ladder::cuda::precision;
using namespace ladder::test_precision;

namespace {

// The kernels' int8 quantisation of x by rows (per token) or of w by columns (per channel), with its dequant.
void check_int8(const Mat<float>& x, bool per_token) {
  const int64_t R = x.rows(), C = x.cols();
  const quant::Quantized want = per_token ? quant::per_token(x, quant::Elem::int8) : quant::per_channel(x, quant::Elem::int8);
  cuda::DeviceBuffer<float> dx(x.data(), sz(R * C)), ds(sz(per_token ? R : C));
  cuda::DeviceBuffer<int8_t> dq(sz(R * C));
  if (per_token)
    cp::quantize_per_token_int8(dx.data(), R, C, dq.data(), ds.data());
  else
    cp::quantize_per_channel_int8(dx.data(), R, C, dq.data(), ds.data());
  cuda::sync();
  const std::vector<int8_t> q = dq.to_host();
  CHECK(std::memcmp(q.data(), want.codes.data(), q.size()) == 0);
  CHECK(same_bits(ds.to_host(), want.scales.data(), sz(want.scales.size())));
  if (!per_token) return;
  cuda::DeviceBuffer<float> back(sz(R * C));
  cp::dequantize_per_token_int8(dq.data(), ds.data(), R, C, back.data());
  cuda::sync();
  const Mat<float> deq = quant::dequantize(want);
  CHECK(same_bits(back.to_host(), deq.data(), sz(deq.size())));
}

// The kernels' E4M3 1 x 128 quantisation and dequantisation of x against quant::tiles_1x128; returns the codes.
std::vector<uint8_t> check_e4m3(const Mat<float>& x) {
  const int64_t R = x.rows(), C = x.cols(), T = (C + 127) / 128;
  const quant::Quantized want = quant::tiles_1x128(x);
  cuda::DeviceBuffer<float> dx(x.data(), sz(R * C)), ds(sz(R * T)), back(sz(R * C));
  cuda::DeviceBuffer<uint8_t> dq(sz(R * C));
  cp::quantize_e4m3_1x128(dx.data(), R, C, dq.data(), ds.data());
  cp::dequantize_e4m3_1x128(dq.data(), ds.data(), R, C, back.data());
  cuda::sync();
  const std::vector<uint8_t> q = dq.to_host();
  CHECK(same_bits(q, want.codes.data(), want.codes.size()));
  CHECK(same_bits(ds.to_host(), want.scales.data(), sz(want.scales.size())));
  const Mat<float> deq = quant::dequantize(want);
  CHECK(same_bits(back.to_host(), deq.data(), sz(deq.size())));
  return q;
}

}  // namespace

TEST_CASE("07 CUDA: the int8 quantisers (per token, per channel) and the dequantisation give the reference's bits") {
  Rng rng(4001);
  const std::vector<int64_t> rows = kTsan ? std::vector<int64_t>{3, 17} : std::vector<int64_t>{1, 3, 17, 40};
  const std::vector<int64_t> cols = kTsan ? std::vector<int64_t>{5, 300} : std::vector<int64_t>{1, 5, 33, 300, 1000};
  for (int64_t R : rows)
    for (int64_t C : cols) {
      CAPTURE(R);
      CAPTURE(C);
      check_int8(operand(rng, R, C, true), true);
      check_int8(operand(rng, R, C, false), false);
    }
  // RNE ties with scale 1 (amax 127): 2.5 -> 2, -3.5 -> -4, 0.5 -> 0, 126.5 -> 126; and every code.
  Mat<float> t(2, 260);
  for (int64_t c = 0; c < 260; ++c) {
    t(0, c) = c == 0 ? 127.0f : static_cast<float>(c % 255) - 127.0f + (c % 3 == 0 ? 0.5f : 0.0f);
    t(1, c) = -t(0, c);
  }
  check_int8(t, true);
}

TEST_CASE("07 CUDA: the E4M3 1 x 128 quantiser and dequantisation, every rounding boundary and tile shape") {
  Rng rng(4002);
  for (int64_t C : kTsan ? std::vector<int64_t>{129, 300} : std::vector<int64_t>{1, 127, 128, 129, 300, 1000}) {
    CAPTURE(C);
    check_e4m3(operand(rng, kTsan ? 3 : 9, C, true));
  }
  // Every E4M3 code v, the midpoint to the next code (a tie), and the floats either side of it, both signs,
  // 127 values per tile after a 448 that makes the tile's scale exactly 1: codes = to_e4m3(value) itself.
  std::vector<float> values;
  for (uint8_t c = 0; c < 0x7E; ++c) {
    const float v = formats::from_e4m3(c), mid = (v + formats::from_e4m3(static_cast<uint8_t>(c + 1))) / 2;
    for (float s : {1.0f, -1.0f})
      for (float u : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) values.push_back(s * u);
  }
  const int64_t per = 127, R = (static_cast<int64_t>(values.size()) + per - 1) / per;
  Mat<float> x = Mat<float>::Zero(R, 128);
  for (int64_t r = 0; r < R; ++r) {
    x(r, 0) = 448.0f;
    for (int64_t j = 0; j < per && r * per + j < static_cast<int64_t>(values.size()); ++j)
      x(r, 1 + j) = values[sz(r * per + j)];
  }
  const std::vector<uint8_t> q = check_e4m3(x);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 1; c < 128; ++c) REQUIRE(q[sz(r * 128 + c)] == formats::to_e4m3(x(r, c)));
  CHECK(formats::to_e4m3(17.0f) == formats::to_e4m3(16.0f));  // a tie goes to the even code (spacing 2 in [16, 32))
}

TEST_CASE("07 CUDA: the __dp4a GEMM's int32 sums are gemm_s8s8s32's, y is a8w8_gemm's, on awkward shapes") {
  Rng rng(4003);
  const std::vector<int64_t> Ms = kTsan ? std::vector<int64_t>{17} : std::vector<int64_t>{1, 17, 33};
  const std::vector<int64_t> Ks = kTsan ? std::vector<int64_t>{3, 130} : std::vector<int64_t>{1, 3, 63, 64, 65, 130};
  const std::vector<int64_t> Ns = kTsan ? std::vector<int64_t>{33} : std::vector<int64_t>{1, 16, 33};
  for (int64_t M : Ms)
    for (int64_t K : Ks)
      for (int64_t N : Ns) {
        CAPTURE(M);
        CAPTURE(K);
        CAPTURE(N);
        const Mat<float> x = operand(rng, M, K, true), w = operand(rng, K, N, false);
        const ladder::precision::A8W8Result want = ladder::precision::a8w8_gemm(x, w);
        const std::vector<int8_t> a = ladder::precision::int8_codes(want.xq), b = ladder::precision::int8_codes(want.wq);
        cuda::DeviceBuffer<int8_t> da(a), db(b);
        cuda::DeviceBuffer<float> xs(want.xq.scales.data(), sz(M)), ws(want.wq.scales.data(), sz(N)), y(sz(M * N));
        cuda::DeviceBuffer<int32_t> acc(sz(M * N));
        cp::a8w8_gemm(da.data(), xs.data(), db.data(), ws.data(), M, K, N, acc.data(), y.data());
        cuda::sync();
        CHECK(same_bits(acc.to_host(), want.acc.data(), sz(M * N)));
        CHECK(same_bits(y.to_host(), want.y.data(), sz(M * N)));
      }
}

TEST_CASE("07 CUDA: the largest sum the recipe allows is exact; K past int32's reach is refused naming K") {
  const int64_t K = ladder::precision::kA8W8MaxK;  // 131071 products of (-128)(-128) = 2^14: 2147467264 <= 2^31 - 1
  cuda::DeviceBuffer<float> one(std::vector<float>{1.0f}), y(1);
  cuda::DeviceBuffer<int32_t> acc(1);
  if (!kTsan) {  // one block walking 2048 K steps: cheap under the schedules, long under TSan
    cuda::DeviceBuffer<int8_t> a(std::vector<int8_t>(sz(K), int8_t{-128}));
    cp::a8w8_gemm(a.data(), one.data(), a.data(), one.data(), 1, K, 1, acc.data(), y.data());
    cuda::sync();
    CHECK(acc.to_host()[0] == 2147467264);
    CHECK(y.to_host()[0] == 2147467264.0f);  // rounds to float32 (2^31 - 2^14 needs 17 bits: exact)
  }
  cuda::DeviceBuffer<int8_t> dummy(1);
  CHECK_THROWS_WITH_AS(cp::a8w8_gemm(dummy.data(), one.data(), dummy.data(), one.data(), 1, K + 1, 1, acc.data(), y.data()),
                       doctest::Contains("K = 131072 violates 1 <= K <= 131071"), Error);
  CHECK_THROWS_WITH_AS(cp::quantize_e4m3_1x128(nullptr, 2, 5, nullptr, nullptr), doctest::Contains("null pointer"), Error);
  CHECK_THROWS_WITH_AS(cp::quantize_per_token_int8(one.data(), 1, 0, dummy.data(), one.data()),
                       doctest::Contains("cols = 0 violates"), Error);
}

TEST_CASE("07 CUDA: the a8w8 rung passes both A8W8 goldens through the contract, the reference's bits") {
  const Contract& c = contract("07-precision");
  const Rung& rung = registry().find("07-precision", "cuda", "a8w8");
  const Rung& ref = registry().find("07-precision", "ref", "a8w8");
  for (const std::string name : {"a8w8_outliers", "a8w8_large_sums"}) {
    CAPTURE(name);
    const auto [cf, out] = run_golden(c, rung, name, 4);
    const Tensors want = run_rung(c, ref, cf.inputs, cf.params, DType::F4);
    for (const auto& [k, v] : out) {
      CAPTURE(k);
      CHECK(v.bytes == want.at(k).bytes);  // the same operations in the same order: the same bits
    }
    CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F8), doctest::Contains("no float64 function"),
                         Error);
  }
  // A case of another recipe is refused, naming both.
  const CaseFolder fp8 = read_case(c, test::golden_dir("07-precision") / "fp8_blocks");
  CHECK_THROWS_WITH_AS(run_rung(c, rung, fp8.inputs, fp8.params, DType::F4), doctest::Contains("params.recipe is"), Error);
}
