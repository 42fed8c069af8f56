// tests/02-attention/test_attention_bf16_planted.cu -- planted mistakes in stage 02's tensor-core forward,
// instantiated from the kernel's own template (cuda/src/02-attention/attention_bf16.cuh, Bf16Plant): a missing
// cp.async.wait_group, a missing __syncthreads in the K/V ring, a wrong quad shuffle in the row max, the causal
// mask off by one; and in its padding (attention_bf16_pad.cuh, PadPlant): the pad columns left unwritten. Each is
// caught in every SIMT schedule (the first two as a stopped run, in a child process; the
// others as errors far outside the derived bound). Skipped in the
// TSan build and left out of the GPU build (the missing wait is a race on a device, not a stopped run).
#include <doctest/doctest.h>
#include <simt.hpp>

#include <csignal>
#include <string>

#include "../../cuda/src/02-attention/attention_bf16.cuh"
#include "../../cuda/src/02-attention/attention_bf16_pad.cuh"
#include "fork_child.hpp"
#include "test_attention_bf16.hpp"

using namespace ladder::test::bf16;

#if !defined(SIMT_TSAN)
namespace {
using ladder::cuda::attention::Bf16Plant;
using ladder::cuda::attention::launch_bf16;
using ladder::cuda::attention::launch_pad_bf16;
using ladder::cuda::attention::launch_unpad_f32;
using ladder::cuda::attention::PadPlant;

// The padded path of the host API (attention_host.cpp) with the pad copy's template: Q, K, V to [rows, D], the D
// kernel with the case's own scale, O's first d columns back. The padded buffers start as `fill` (0xffff, a
// bf16 NaN: what a fresh DeviceBuffer holds).
template <PadPlant Plant>
Result run_padded(const Bf16Case& c, uint16_t fill) {
  const int d = int(c.p.d), D = d <= 64 ? 64 : 128;
  const size_t q_rows = size_t(c.p.heads() * c.p.Nq), k_rows = size_t(c.p.heads() * c.p.Nk);
  ladder::cuda::DeviceBuffer<uint16_t> Q(c.Q), K(c.K), V(c.V);
  ladder::cuda::DeviceBuffer<uint16_t> Qp(std::vector<uint16_t>(q_rows * size_t(D), fill));
  ladder::cuda::DeviceBuffer<uint16_t> Kp(std::vector<uint16_t>(k_rows * size_t(D), fill));
  ladder::cuda::DeviceBuffer<uint16_t> Vp(std::vector<uint16_t>(k_rows * size_t(D), fill));
  ladder::cuda::DeviceBuffer<float> Op(q_rows * size_t(D)), O(q_rows * size_t(d)), L(q_rows);
  launch_pad_bf16<Plant>(Q.data(), Qp.data(), q_rows, d, D);
  launch_pad_bf16<Plant>(K.data(), Kp.data(), k_rows, d, D);
  launch_pad_bf16<Plant>(V.data(), Vp.data(), k_rows, d, D);
  const ladder::cuda::attention::Dims k{int(c.p.B), int(c.p.H), int(c.p.Nq), int(c.p.Nk), D,
                                        float(c.p.scale), c.p.causal, 0};
  if (D == 64) launch_bf16<64>(k, Qp.data(), Kp.data(), Vp.data(), Op.data(), L.data());
  else launch_bf16<128>(k, Qp.data(), Kp.data(), Vp.data(), Op.data(), L.data());
  launch_unpad_f32(Op.data(), O.data(), q_rows, d, D);
  return {O.to_host(), L.to_host()};
}
}  // namespace

// The pad copy that writes only the first d columns: the pad holds whatever the buffer held. As allocated
// (bf16 NaN) every S, so every O and L, is NaN. As finite garbage (bf16 1.0 in every pad column, here) every
// entry of S moves by the same 64 - 59 = 5: P and O do not see a shift common to a row (the softmax's
// invariance), but L = logsumexp moves by 5 scale, far outside its bound.
TEST_CASE("planted: the pad copy that leaves the pad columns unwritten -- outside the bound") {
  const Bf16Case& c = all_cases()[7];  // random q70 k90 d59 causal: padded to 64
  REQUIRE(c.p.d == 59);
  CHECK(worst_ratio(c, run_padded<PadPlant::none>(c, 0xffff)) <= 1.0);  // the template, unplanted
  const double nan_pad = worst_ratio(c, run_padded<PadPlant::pad_not_zeroed>(c, 0xffff));
  double one_o = 0, one_l = 0;
  worst_ratio(c, run_padded<PadPlant::pad_not_zeroed>(c, 0x3f80), &one_o, &one_l);
  MESSAGE("planted pad_not_zeroed: ratio " << nan_pad << " (pad NaN); O " << one_o << ", L " << one_l
                                           << " (pad 1.0)");
  CHECK(nan_pad > 1.0);
  CHECK(one_l > 1.0);
}

TEST_CASE("planted: a wrong quad shuffle in the row max, the causal mask off by one -- outside the bound") {
  const Bf16Case& causal = all_cases()[1];  // q128 k128 d64 causal
  REQUIRE(causal.p.causal);
  CHECK(worst_ratio(causal, run(causal, &launch_bf16<64, Bf16Plant::none>)) <= 1.0);  // the template, unplanted
  const double quad = worst_ratio(causal, run(causal, &launch_bf16<64, Bf16Plant::quad_mask>));
  const double off = worst_ratio(causal, run(causal, &launch_bf16<64, Bf16Plant::causal_off_by_one>));
  MESSAGE("planted quad_mask: ratio " << quad << ", causal_off_by_one: ratio " << off);
  CHECK(quad > 1.0);
  CHECK(off > 1.0);
  const Bf16Case& plain = all_cases()[0];  // non-causal: the quad shuffle matters there too
  CHECK(worst_ratio(plain, run(plain, &launch_bf16<64, Bf16Plant::quad_mask>)) > 1.0);
}

using ladder::test::Child;

// body() in a child process on one SIMT worker thread (the schedule is the process's, SIMT_SCHEDULE).
template <class F>
Child in_child(F body) {
  return ladder::test::in_child([&] {
    simt::Config one = simt::config();
    one.threads = 1;
    simt::set_config(one);
    return body();
  });
}

// A missing cp.async.wait_group: the SIMT layer keeps the destination poisoned until the wait, and an ldmatrix
// that reads it stops the run ("is still copying"). Run in a child process, which must die of SIGABRT.
TEST_CASE("planted: the KV loop without its cp.async.wait_group stops the run in every schedule") {
  const Child c = in_child([] {
    run(all_cases()[0], &launch_bf16<64, Bf16Plant::missing_wait>);
    return 0;
  });
  INFO(c.text);
  CHECK(c.signal == SIGABRT);
  CHECK(c.text.find("is still copying") != std::string::npos);
}

// The ring's barrier removed (after the first step): a warp reads rows other threads' cp.asyncs have not
// completed, or copies over a region another warp still reads. Either stops the run (an ldmatrix of in-flight
// bytes) or leaves the result wrong (exit 2); finishing within the bound (exit 0) would mean it went unseen.
TEST_CASE("planted: the KV loop without its __syncthreads is caught in every schedule") {
  const Child c = in_child([] {
    const Bf16Case& k = all_cases()[0];
    return worst_ratio(k, run(k, &launch_bf16<64, Bf16Plant::missing_barrier>)) <= 1.0 ? 0 : 2;
  });
  INFO(c.text);
  CHECK((c.signal == SIGABRT || c.code == 2));
}
#endif
