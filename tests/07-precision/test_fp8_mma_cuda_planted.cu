// tests/07-precision/test_fp8_mma_cuda_planted.cu -- mistakes planted in the FP8 block-scaled tensor-core GEMM
// kernel itself (fp8_mma_kernel<F8Plant> of cuda/src/07-precision/fp8_mma.cuh; F8Plant::none is the kernel the host
// API launches), each caught in every schedule by the judge the rung faces: fp8_bound of the default recipe (14
// bits, nc 128) around the fp64 oracle, on operands whose 1 x 128 tiles and 128 x 128 blocks carry distinct powers
// of two 2^-4..2^4 (neighbouring K blocks of w differ by 2^3 or more, as in the golden cases):
//   a_lane     A's ldmatrix lane address one row down: products of the wrong rows of x;
//   neighbour  each K block promoted with the next K block's weight scale: a whole chunk off by 2^3 or more,
//              far past gamma_127(2^-14) < 0.8 % of G;
//   no_reset   the fp32 fragment not zeroed after a promotion: every earlier chunk promoted again;
//   no_wait    no cp.async.wait_group: the first ldmatrix reads a slice still in flight and SIMT stops the run
//              ("is still copying"), in a forked child.
// (Not planted: one fp32 chain over all of K with the scales applied at the end. With per-block scales that is no
// longer the same sum, so it is either the neighbour mistake in disguise or needs equal scales, where it is a
// legitimate blocking the bound admits: fp8_block.hpp.) Skipped in the TSan build (no_wait would abort a TSan
// process; the others are not races).
#include <doctest/doctest.h>
#include <simt.hpp>

#include <cmath>
#include <csignal>
#include <string>
#include <vector>

#include "../../cuda/src/07-precision/fp8_mma.cuh"
#include "each_schedule.hpp"
#include "fork_child.hpp"
#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

namespace pr = ladder::cuda::precision;
namespace lp = ladder::precision;
using pr::F8Plant;

constexpr int M = 33, K = 384, N = 200;  // three K blocks, two weight column blocks, ragged M and N

struct Operands {
  ladder::quant::Quantized xq, wq;
  std::vector<uint8_t> wt;  // wq^T [N, K]: the kernel's B layout
};

Operands operands() {
  ladder::Rng rng(4103);
  ladder::Mat<float> x(M, K), w(K, N);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k)
      x(i, k) = static_cast<float>(rng.normal() * std::ldexp(1.0, (7 * i + 3 * (k / 128)) % 9 - 4));
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j)
      w(k, j) = static_cast<float>(rng.normal() * std::ldexp(1.0, (3 * (k / 128) + 5 * (j / 128)) % 9 - 4));
  Operands o{ladder::quant::tiles_1x128(x), ladder::quant::blocks_128x128(w), std::vector<uint8_t>(size_t{N} * K)};
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j) o.wt[static_cast<size_t>(j * K + k)] = o.wq.codes[static_cast<size_t>(k * N + j)];
  return o;
}

template <F8Plant P>
std::vector<float> run(const Operands& o) {
  ladder::cuda::DeviceBuffer<uint8_t> a(o.xq.codes), b(o.wt);
  ladder::cuda::DeviceBuffer<float> xs(o.xq.scales.data(), static_cast<size_t>(o.xq.scales.size())),
      ws(o.wq.scales.data(), static_cast<size_t>(o.wq.scales.size())), y(size_t{M} * N);
  simt::launch(pr::fp8_mma_kernel<P>, dim3((N + 127) / 128, (M + 127) / 128), dim3(pr::kF8Threads), 0, a.data(),
               b.data(), xs.data(), ws.data(), M, N, K, 128, y.data());
  return y.to_host();
}

// The elements of y outside the default recipe's bound.
int outside(const std::vector<float>& y, const Operands& o) {
  const lp::Fp8Oracle f = lp::fp8_oracle(o.xq, o.wq);
  int bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      bad += !(std::fabs(static_cast<double>(y[static_cast<size_t>(i * N + j)]) - f.y(i, j)) <=
               lp::fp8_bound(lp::Fp8Recipe{}, K, f.g(i, j)));
  return bad;
}

}  // namespace

TEST_CASE("planted bugs: the FP8 mma GEMM with an A lane off by one, a neighbour's scale, no fragment reset, or "
          "no wait_group") {
  const Operands o = operands();
  ladder::test::each_schedule([&](simt::Schedule) {
    CHECK(outside(run<F8Plant::none>(o), o) == 0);  // the judge tells them apart: the kernel itself passes
    CHECK(outside(run<F8Plant::a_lane>(o), o) > 0);
    CHECK(outside(run<F8Plant::neighbour>(o), o) > 0);
    CHECK(outside(run<F8Plant::no_reset>(o), o) > 0);
    const ladder::test::Child child = ladder::test::in_child([&] {  // SIMT stops the run: in a child
      run<F8Plant::no_wait>(o);
      return 0;  // not reached when SIMT catches the read
    });
    INFO(child.text);
    CHECK(child.signal == SIGABRT);
    CHECK(child.text.find("is still copying") != std::string::npos);
  });
}

#endif
