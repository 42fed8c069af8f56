// tests/02-attention/test_attention_bf16.cpp -- stage 02's tensor-core forward, tiled_bf16
// (cuda/src/02-attention/attention_bf16.cuh): the inputs are rounded to bf16 first, and the kernel is compared
// with the fp64 oracle (naive_forward<double>) on THOSE bf16 values, under the error bound derived in
// test_attention_bf16.hpp (not tuned). CTest runs it through SIMT under SIMT_SCHEDULE=forward, reverse, random:1
// and once in the TSan build; the native GPU build runs it on the device. Shapes stay small (under SIMT every
// CUDA thread is a fiber and every mma and ldmatrix a warp collective). The planted mistakes:
// test_attention_bf16_planted.cu.
#include <doctest/doctest.h>

#include <string>

#include "test_attention_bf16.hpp"

using namespace ladder;
using namespace ladder::attention;
using namespace ladder::test::bf16;

TEST_CASE("tiled_bf16 vs the fp64 oracle on the same bf16 inputs, within the derived bound") {
  for (const Bf16Case& c : all_cases()) {
    CAPTURE(c.name);
    double ro = 0, rl = 0;
    const double ratio = worst_ratio(c, run(c), &ro, &rl);
    MESSAGE(c.name << ": max |err| / bound = " << ratio << " (O " << ro << ", L " << rl << ")");
    CHECK(ratio <= 1.0);
  }
}

TEST_CASE("tiled_bf16 refuses head dims other than 64 and 128, naming d") {
  cuda::DeviceBuffer<uint16_t> in(size_t(4 * 96));
  cuda::DeviceBuffer<float> out(size_t(4 * 96));
  for (int64_t d : {32, 96, 129}) {
    const std::string what = "d = " + std::to_string(d) + " violates d in {64, 128}";
    CHECK_THROWS_WITH_AS(cuda::attention::tiled_bf16(Problem::make(1, 1, 2, 2, d), in.data(), in.data(), in.data(),
                                                     out.data(), out.data()),
                         doctest::Contains(what.c_str()), Error);
  }
  CHECK_THROWS_AS(cuda::attention::tiled_bf16(Problem::make(1, 1, 2, 2, 64), nullptr, in.data(), in.data(),
                                              out.data(), out.data()),
                  Error);
}
