// tests/07-precision/test_fp8_mma_cuda.cpp -- DeepSeek-V3's FP8 block-scaled GEMM on tensor cores
// (cuda::precision::fp8_block_gemm, cuda/src/07-precision/fp8_mma.cuh) and the E4M3 quantisers it needs, against
// the reference recipe (ladder/07-precision/fp8_block.hpp):
// - the 128 x 128 weight-block quantiser and the static-scale activation quantiser give quant::blocks_128x128's
//   and fp8_quantize_x's codes and scales bit for bit (awkward shapes, partial blocks, saturation);
// - on the emulator the GEMM's y is the bits of the reference recipe with acc_bits = 24, RNE and the same nc (the
//   emulated mma adds in fp32 in ascending k: fp8_mma.cuh), for nc = 1 .. 128, K % 16 != 0 (the padded path),
//   ragged M and N over several tiles and weight blocks; everywhere (device too) y lies within fp8_bound of the
//   fp64 oracle for the default recipe (14 bits, nc 128) and for its own nc;
// - the CUDA rung fp8_block passes every fp8 golden case of 07-precision through the contract (xq, xs exactly,
//   y by the bound), with the reference rung's bits on the acc_bits = 24 case under the emulator.
// Under SIMT in three schedules and under TSan (small shapes there); on the device in the GPU build (sm_89+). The
// planted mistakes: test_fp8_mma_cuda_planted.cu.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "golden_util.hpp"
#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/07-precision/precision.hpp"
#include "ladder/cuda/device.hpp"
#include "precision_cuda_util.hpp"

using namespace ladder;
namespace cp = ladder::cuda::precision;
using namespace ladder::test_precision;
namespace lp = ladder::precision;

namespace {
constexpr bool kEmulator = !kGpu;

// rows x cols normal values, each 128 x 128 block (or 1 x 128 tile when per_row) scaled by its own power of two
// 2^(-4..4) as the golden cases do, and every 7th row / column zero.
Mat<float> block_operand(Rng& rng, int64_t rows, int64_t cols, bool per_row) {
  Mat<float> m(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t a = per_row ? r : r / 128, b = c / 128, zero = per_row ? r : c;
      const int e = static_cast<int>((7 * a + 3 * b) % 9) - 4;
      m(r, c) = zero % 7 == 5 ? 0.0f : static_cast<float>(rng.normal() * std::ldexp(1.0, e));
    }
  return m;
}

// y of fp8_block_gemm on the reference's codes and scales of x, w.
std::vector<float> device_y(const quant::Quantized& xq, const quant::Quantized& wq, int64_t nc) {
  const int64_t M = xq.rows, K = xq.cols, N = wq.cols;
  cuda::DeviceBuffer<uint8_t> a(xq.codes), b(wq.codes);
  cuda::DeviceBuffer<float> xs(xq.scales.data(), sz(xq.scales.size())), ws(wq.scales.data(), sz(wq.scales.size())),
      y(sz(M * N));
  cp::fp8_block_gemm(a.data(), xs.data(), b.data(), ws.data(), M, K, N, nc, y.data());
  cuda::sync();
  return y.to_host();
}

// How many elements of y lie outside fp8_bound(r) of the oracle.
int64_t outside(const std::vector<float>& y, const quant::Quantized& xq, const quant::Quantized& wq,
                const lp::Fp8Recipe& r) {
  const lp::Fp8Oracle o = lp::fp8_oracle(xq, wq);
  int64_t bad = 0;
  for (int64_t i = 0; i < xq.rows; ++i)
    for (int64_t j = 0; j < wq.cols; ++j) {
      const double d = std::fabs(static_cast<double>(y[sz(i * wq.cols + j)]) - o.y(i, j));
      bad += !(d <= lp::fp8_bound(r, xq.cols, o.g(i, j)));
    }
  return bad;
}

}  // namespace

TEST_CASE("07 CUDA: the E4M3 128 x 128 block and static-scale quantisers give the reference's codes and scales") {
  Rng rng(4101);
  struct Shape {
    int64_t rows, cols;
  };
  const std::vector<Shape> shapes = kTsan ? std::vector<Shape>{{130, 200}}
                                          : std::vector<Shape>{{1, 1}, {127, 5}, {128, 128}, {130, 200}, {300, 257}};
  for (const Shape& s : shapes) {
    CAPTURE(s.rows);
    CAPTURE(s.cols);
    const Mat<float> w = block_operand(rng, s.rows, s.cols, false);
    const quant::Quantized want = quant::blocks_128x128(w);
    cuda::DeviceBuffer<float> dw(w.data(), sz(w.size())), ds(sz(want.scales.size()));
    cuda::DeviceBuffer<uint8_t> dq(sz(w.size()));
    cp::quantize_e4m3_128x128(dw.data(), s.rows, s.cols, dq.data(), ds.data());
    // Static: 2 / 448 makes every |x| past about 2.07 saturate to +-448 (fp8_static_saturate's scale).
    lp::Fp8Recipe r;
    r.x_scale = 2.0f / 448.0f;
    const quant::Quantized want_x = lp::fp8_quantize_x(w, r);
    cuda::DeviceBuffer<float> xs(sz(want_x.scales.size()));
    cuda::DeviceBuffer<uint8_t> xq(sz(w.size()));
    cp::quantize_e4m3_static(dw.data(), s.rows, s.cols, r.x_scale, xq.data(), xs.data());
    cuda::sync();
    CHECK(same_prefix_bits(dq.to_host(), want.codes.data(), want.codes.size()));
    CHECK(same_prefix_bits(ds.to_host(), want.scales.data(), sz(want.scales.size())));
    CHECK(same_prefix_bits(xq.to_host(), want_x.codes.data(), want_x.codes.size()));
    CHECK(same_prefix_bits(xs.to_host(), want_x.scales.data(), sz(want_x.scales.size())));
  }
  cuda::DeviceBuffer<float> one(std::vector<float>{1.0f});
  cuda::DeviceBuffer<uint8_t> q(1);
  CHECK_THROWS_WITH_AS(cp::quantize_e4m3_static(one.data(), 1, 1, 0.0f, q.data(), one.data()),
                       doctest::Contains("s = 0 violates finite s >= 2^-50"), Error);
  CHECK_THROWS_WITH_AS(cp::quantize_e4m3_128x128(nullptr, 2, 5, nullptr, nullptr), doctest::Contains("null pointer"),
                       Error);
}

TEST_CASE("07 CUDA: the FP8 tensor-core GEMM is the 24-bit recipe's bits on the emulator and within fp8_bound") {
  struct Shape {
    int64_t M, K, N, nc;
  };
  const std::vector<Shape> shapes =
      kTsan ? std::vector<Shape>{{17, 200, 40, 32}}
            : std::vector<Shape>{{33, 320, 200, 128}, {9, 200, 130, 32}, {130, 136, 140, 64}, {5, 272, 9, 16},
                                 {3, 40, 7, 1},       {1, 16, 1, 128},   {8, 1024, 40, 128}, {20, 100, 30, 8}};
  Rng rng(4102);
  for (const Shape& s : shapes) {
    CAPTURE(s.M);
    CAPTURE(s.K);
    CAPTURE(s.N);
    CAPTURE(s.nc);
    const Mat<float> x = block_operand(rng, s.M, s.K, true), w = block_operand(rng, s.K, s.N, false);
    const quant::Quantized xq = quant::tiles_1x128(x), wq = quant::blocks_128x128(w);
    const std::vector<float> y = device_y(xq, wq, s.nc);
    lp::Fp8Recipe exact24;  // a float32 accumulator, RNE: the emulated mma's arithmetic exactly
    exact24.acc_bits = 24;
    exact24.nc = s.nc;
    if (kEmulator) {
      const Mat<float> want = lp::fp8_block_product(xq, wq, exact24);
      CHECK(same_prefix_bits(y, want.data(), sz(s.M * s.N)));
    }
    lp::Fp8Recipe own = lp::Fp8Recipe{}, deflt = lp::Fp8Recipe{};
    own.nc = s.nc;
    CHECK(outside(y, xq, wq, own) == 0);    // the default accumulator (14 bits) at this nc
    CHECK(outside(y, xq, wq, deflt) == 0);  // and the default recipe itself (a finer nc has no larger bound)
  }
}

TEST_CASE("07 CUDA: fp8_block_gemm refuses nc not dividing 128, K out of range, M past the grid, null pointers") {
  cuda::DeviceBuffer<uint8_t> q(std::vector<uint8_t>(64, 0));
  cuda::DeviceBuffer<float> s(std::vector<float>(8, 1.0f)), y(8);
  CHECK_THROWS_WITH_AS(cp::fp8_block_gemm(q.data(), s.data(), q.data(), s.data(), 2, 16, 2, 3, y.data()),
                       doctest::Contains("nc = 3 violates nc >= 1 and 128 % nc == 0"), Error);
  CHECK_THROWS_WITH_AS(cp::fp8_block_gemm(q.data(), s.data(), q.data(), s.data(), 2, 0, 2, 128, y.data()),
                       doctest::Contains("K = 0 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::fp8_block_gemm(q.data(), s.data(), q.data(), s.data(), 2, (1 << 20) + 1, 2, 128, y.data()),
                       doctest::Contains("K = 1048577 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::fp8_block_gemm(q.data(), s.data(), q.data(), s.data(), int64_t{65535} * 128 + 1, 16, 2, 128,
                                          y.data()),
                       doctest::Contains("M = 8388481 violates"), Error);
  CHECK_THROWS_WITH_AS(cp::fp8_block_gemm(nullptr, s.data(), q.data(), s.data(), 2, 16, 2, 128, y.data()),
                       doctest::Contains("null pointer"), Error);
  cp::fp8_block_gemm(nullptr, nullptr, nullptr, nullptr, 0, 16, 5, 128, nullptr);  // M = 0: no launch
}

TEST_CASE("07 CUDA: the fp8_block rung passes every fp8 golden case through the contract") {
  const Contract& c = contract("07-precision");
  const Rung& rung = registry().find("07-precision", "cuda", "fp8_block");
  const Rung& ref = registry().find("07-precision", "ref", "fp8_block");
  const std::vector<std::string> cases = kTsan ? std::vector<std::string>{"fp8_acc24_nc32"}
                                               : std::vector<std::string>{"fp8_blocks", "fp8_k1024",
                                                                          "fp8_static_saturate", "fp8_acc24_nc32"};
  for (const std::string& name : cases) {
    CAPTURE(name);
    const auto [cf, out] = run_golden(c, rung, name, 3);
    if (kEmulator && name == "fp8_acc24_nc32") {  // a float32 accumulator: the emulated mma's own arithmetic
      const Tensors want = run_rung(c, ref, cf.inputs, cf.params, DType::F4);
      for (const auto& [k, v] : out) CHECK(v.bytes == want.at(k).bytes);
    }
    CHECK_THROWS_WITH_AS(run_rung(c, rung, cf.inputs, cf.params, DType::F8), doctest::Contains("no float64 function"),
                         Error);
  }
  const CaseFolder a8w8 = read_case(c, test::golden_dir("07-precision") / "a8w8_outliers");
  CHECK_THROWS_WITH_AS(run_rung(c, rung, a8w8.inputs, a8w8.params, DType::F4), doctest::Contains("params.recipe is"),
                       Error);
}
