// tests/02-attention/test_attention_cuda_planted.cu -- a deliberately broken copy of the stage-02 tiled forward
// (cuda/src/02-attention/attention_tiled.cu, tiled_forward; no mask, one Q tile) with the barrier at the end of the KV
// loop removed: a fast thread loads the next K_j, V_j over the tile its neighbours are still
// multiplying (a write-after-read hazard, the least obvious of the kernel's four barriers). The test
// proves the comparison with the reference catches it under every SIMT schedule; it is skipped in the
// TSan build, where the race itself is the report.
#include <doctest/doctest.h>
#include <simt.hpp>

#include <cmath>
#include <vector>

#include "ladder/02-attention/attention.hpp"
#include "each_schedule.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/cuda/device.hpp"

#if !defined(SIMT_TSAN)

namespace {

constexpr int Br = 16, Bc = 16, D = 32, kThreads = 128, kPer = Br * D / kThreads;

// Q [Br, D], K, V [Nk, D] -> O [Br, D]; scale folded into Q; the deferred normalisation of FA2.
__global__ void tiled_missing_barrier(const float* Q, const float* K, const float* V, float* O, int Nk, float scale) {
  __shared__ float Qs[Br * D], Ks[Bc * D], Vs[Bc * D], S[Br * Bc], ms[Br], ls[Br], alpha[Br];
  const int t = threadIdx.x;
  for (int e = t; e < Br * D; e += kThreads) Qs[e] = scale * Q[e];
  if (t < Br) ms[t] = -INFINITY, ls[t] = 0.0f;
  float o[kPer] = {};
  for (int c0 = 0; c0 < Nk; c0 += Bc) {
    const int bc = min(Bc, Nk - c0);
    for (int e = t; e < Bc * D; e += kThreads) {
      Ks[e] = e / D < bc ? K[c0 * D + e] : 0.0f;
      Vs[e] = e / D < bc ? V[c0 * D + e] : 0.0f;
    }
    __syncthreads();
    for (int e = t; e < Br * Bc; e += kThreads) {
      float s = 0.0f;
      for (int c = 0; c < D; ++c) s += Qs[(e / Bc) * D + c] * Ks[(e % Bc) * D + c];
      S[e] = s;
    }
    __syncthreads();
    if (t < Br) {
      float m_new = ms[t], sum = 0.0f;
      for (int j = 0; j < bc; ++j) m_new = fmaxf(m_new, S[t * Bc + j]);
      for (int j = 0; j < Bc; ++j) sum += (S[t * Bc + j] = j < bc ? expf(S[t * Bc + j] - m_new) : 0.0f);
      alpha[t] = expf(ms[t] - m_new);
      ls[t] = alpha[t] * ls[t] + sum;
      ms[t] = m_new;
    }
    __syncthreads();
    for (int k = 0; k < kPer; ++k) {
      const int e = t + k * kThreads, r = e / D, c = e % D;
      float acc = 0.0f;
      for (int j = 0; j < Bc; ++j) acc += S[r * Bc + j] * Vs[j * D + c];
      o[k] = alpha[r] * o[k] + acc;
    }
    // (the __syncthreads that belongs here is missing)
  }
  for (int k = 0; k < kPer; ++k) O[t + k * kThreads] = o[k] / ls[(t + k * kThreads) / D];
}

}  // namespace

TEST_CASE("planted bug: the tiled forward without its end-of-tile barrier is wrong under every schedule") {
  const int Nk = 97;
  const auto p = ladder::attention::Problem::make(1, 1, Br, Nk, D);
  ladder::Rng rng(6);
  std::vector<float> Q(Br * D), K(Nk * D), V(Nk * D), want(Br * D), L(Br);
  for (auto* v : {&Q, &K, &V})
    for (float& x : *v) x = static_cast<float>(rng.normal());
  ladder::attention::naive_forward<float>(p, Q.data(), K.data(), V.data(), want.data(), L.data(), nullptr);
  ladder::test::each_schedule([&](simt::Schedule s) {
    ladder::cuda::DeviceBuffer<float> dQ(Q), dK(K), dV(V), dO(want.size());
    simt::launch(tiled_missing_barrier, dim3(1), dim3(kThreads), 0, dQ.data(), dK.data(), dV.data(), dO.data(), Nk,
                 float(p.scale));
    const std::vector<float> got = dO.to_host();
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(double(got[i]) - double(want[i])));
    CAPTURE(static_cast<int>(s));
    CHECK(!(err < 1e-4));  // NaN or a wrong sum
  });
}

#endif
