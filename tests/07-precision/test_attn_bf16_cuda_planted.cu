// tests/07-precision/test_attn_bf16_cuda_planted.cu -- a mistake planted in tiled_bf16's kernel itself
// (cuda/src/02-attention/attention_bf16.cuh, Bf16Plant::p_truncate: P rounded toward zero before P V, where the
// recipe declares RNE) and judged as the CUDA attn_bf16 rung is: stage 07's contract must reject it on
// attn_bf16_ptrunc, the golden case built for it (every P = 0.50283: truncation errs 0.56 %, the bound allows
// 2^-8 = 0.39 %). The same launch path with Bf16Plant::none passes every attn_bf16 case: the plant is the only
// difference. Left out of the GPU build (*_planted.cu, cmake/ladder_gpu.cmake).
#include <doctest/doctest.h>
#include <simt.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "../../cuda/src/02-attention/attention_bf16.cuh"
#include "golden_util.hpp"
#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/device.hpp"

namespace {

using ladder::cuda::attention::Bf16Plant;
namespace lp = ladder::precision;

// The rung's launch, by hand: Q, K, V bf16 RNE zero-padded to the kernel's D = 64, the D kernel with Plant.
template <Bf16Plant Plant>
ladder::Tensors run_plant(const lp::Recipe& r, const ladder::Tensors& in) {
  const lp::AttnOperands a = lp::attn_operands(in, r);
  constexpr int64_t D = 64;
  REQUIRE(std::max(a.d, a.dv) <= D);
  const auto pad = [](const std::vector<float>& x, int64_t rows, int64_t n) {
    std::vector<uint16_t> p(static_cast<size_t>(rows * D), 0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < n; ++c)
        p[static_cast<size_t>(i * D + c)] = ladder::formats::to_bf16(x[static_cast<size_t>(i * n + c)]);
    return ladder::cuda::DeviceBuffer<uint16_t>(p);
  };
  ladder::cuda::DeviceBuffer<uint16_t> q = pad(a.q, a.Lq, a.d), k = pad(a.k, a.Lk, a.d), v = pad(a.v, a.Lk, a.dv);
  ladder::cuda::DeviceBuffer<float> o(static_cast<size_t>(a.Lq * D)), lse(static_cast<size_t>(a.Lq));
  const ladder::cuda::attention::Dims dims{1, 1, int(a.Lq), int(a.Lk), int(D), a.sigma, false, 0};
  ladder::cuda::attention::launch_bf16<64, Plant>(dims, q.data(), k.data(), v.data(), o.data(), lse.data());
  ladder::cuda::sync();
  const std::vector<float> full = o.to_host();
  std::vector<float> out(static_cast<size_t>(a.Lq * a.dv));
  for (int64_t i = 0; i < a.Lq; ++i) std::copy_n(full.begin() + i * D, a.dv, out.begin() + i * a.dv);
  return ladder::Tensors{{"o", lp::npy_of(std::move(out), {a.Lq, a.dv})}, {"lse", lp::npy_of(lse.to_host(), {a.Lq})}};
}

// Whether every output passes the judge on golden case `name`.
bool passes(const ladder::Rung& rung, const std::string& name) {
  const ladder::Contract& c = ladder::contract("07-precision");
  const ladder::CaseFolder cf = ladder::read_case(c, ladder::test::golden_dir("07-precision") / name);
  bool all = true;
  for (const auto& [k, v] : ladder::run_rung(c, rung, cf.inputs, cf.params, ladder::DType::F4)) {
    const ladder::CheckReport r = ladder::check(c, cf.inputs, cf.params, cf.expected, k, v);
    MESSAGE(rung.id << " on " << name << ", " << k << ": " << r.text);
    all = all && r.pass;
  }
  return all;
}

}  // namespace

TEST_CASE("07 CUDA planted: tiled_bf16 with P truncated (Bf16Plant::p_truncate) fails attn_bf16_ptrunc") {
  const ladder::Rung none{"07-precision", "tiled_bf16_none", "control", "control", "cuda",
                          lp::RecipeFns{"attn_bf16", nullptr, &run_plant<Bf16Plant::none>}, nullptr, ""};
  const ladder::Rung trunc{"07-precision", "tiled_bf16_p_truncate", "planted", "planted", "cuda",
                           lp::RecipeFns{"attn_bf16", nullptr, &run_plant<Bf16Plant::p_truncate>}, nullptr, ""};
  for (const char* name : {"attn_bf16_k1024", "attn_bf16_ptrunc", "attn_bf16_q5_k113"}) {
    CAPTURE(name);
    CHECK(passes(none, name));
  }
  CHECK_FALSE(passes(trunc, "attn_bf16_ptrunc"));
}
