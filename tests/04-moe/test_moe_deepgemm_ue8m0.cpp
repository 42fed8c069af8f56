// tests/04-moe/test_moe_deepgemm_ue8m0.cpp -- SM100's packed UE8M0 scales in DeepGEMM's FP8 layouts (param scales =
// "ue8m0_packed", ladder/04-moe/deepgemm.hpp): the packing pinned byte by byte (k block 4 j + b in byte b of word j,
// little-endian; MN-major; padding 0), pack / unpack a round trip, a packed case judged exactly as the same case with
// float32 UE8M0 scales (equal oracle bytes), the fp8_block rung passes; a port reading the bytes in the other order
// fails; bad packed inputs are refused naming the input.
#include <doctest/doctest.h>

#include <cmath>

#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/core/contract.hpp"

using namespace ladder;
using namespace ladder::moe;

namespace {

DeepGemmSpec spec(const char* scales) {
  DeepGemmSpec s;
  s.n = 24, s.k = 520;  // five k blocks: two packed words, the second one partly padding
  s.scales = scales;
  return s;
}

Array<int32_t> byteswapped(Array<int32_t> a) {
  for (int32_t& v : a.data) {
    const uint32_t u = static_cast<uint32_t>(v);
    v = static_cast<int32_t>((u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24));
  }
  return a;
}

}  // namespace

TEST_CASE("deepgemm ue8m0: the packing, byte by byte, and the round trip") {
  Array<float> sf({1, 3, 5});  // [batch, mn, sf_k]
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) sf.data[i * 5 + k] = std::ldexp(1.0f, static_cast<int>(i * 5 + k) - 7);
  const Array<int32_t> p = pack_ue8m0(sf);
  CHECK(p.shape == Shape{1, 2, 4});  // ceil(5/4) words, mn aligned to 4, MN-major
  // row 1: k blocks 0..3 -> word 0 bytes 0..3 = exponents 127 + (5 - 7) .. 127 + (8 - 7); k block 4 -> word 1 byte 0
  CHECK(static_cast<uint32_t>(p.data[1]) == (125u | 126u << 8 | 127u << 16 | 128u << 24));
  CHECK(static_cast<uint32_t>(p.data[4 + 1]) == 129u);
  CHECK(p.data[3] == 0);  // the aligned padding column
  const Array<float> u = unpack_ue8m0(p, 5, "sf");
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 5; ++k) CHECK(u.data[i * 5 + k] == sf.data[i * 5 + k]);
  sf.data[2] = 0.3f;
  CHECK_THROWS_WITH_AS(pack_ue8m0(sf), doctest::Contains("power of two"), Error);
  Array<int32_t> nan = p;
  nan.data[0] |= 0xFF;
  CHECK_THROWS_WITH_AS(unpack_ue8m0(nan, 5, "input sa"), doctest::Contains("0xFF"), Error);
}

TEST_CASE("deepgemm ue8m0_packed: the same verdicts as float32 UE8M0 scales; the rung passes; swapped bytes fail") {
  for (const bool masked : {false, true}) {
    const std::string layout = masked ? kDeepGemmMaskedFp8 : kDeepGemmContiguousFp8;
    const Contract& c = contract(layout);
    const DeepGemmSpec fs = spec("ue8m0"), ps = spec("ue8m0_packed");
    const Tensors fin = deepgemm_fp8_inputs(fs, masked), pin = deepgemm_fp8_inputs(ps, masked);
    const nlohmann::json fp = deepgemm_fp8_params(fs, masked), pp = deepgemm_fp8_params(ps, masked);
    CHECK(pin.at("sa").dtype == DType::I4);
    CHECK(pin.at("sb").shape == Shape{5, 2, 24});  // [G, ceil(5/4), align4(n = 24)]
    CHECK(pin.at("a").bytes == fin.at("a").bytes);
    const Tensors fe = run_oracle(c, fin, fp), pe = run_oracle(c, pin, pp);
    CHECK(pe.at("d").bytes == fe.at("d").bytes);  // the unpack is exact
    const Tensors good = deepgemm_run_fp8(layout, pin, pp);
    CHECK(good.at("d").bytes == deepgemm_run_fp8(layout, fin, fp).at("d").bytes);
    const CheckReport r = check(c, pin, pp, pe, "d", good.at("d"));
    INFO(layout, ": ", r.text);
    CHECK(r.pass);
    // A port reading the four bytes in the other order (k block 4 j + b from byte 3 - b).
    Tensors bad = pin;
    bad["sa"] = to_npy(byteswapped(from_npy<int32_t>(pin.at("sa"), "sa")));
    bad["sb"] = to_npy(byteswapped(from_npy<int32_t>(pin.at("sb"), "sb")));
    const CheckReport rb = check(c, pin, pp, pe, "d", deepgemm_run_fp8(layout, bad, pp).at("d"));
    INFO(rb.text);
    CHECK_FALSE(rb.pass);
    // Float32 scales under scales = ue8m0_packed, and packed ones under ue8m0: refused, naming the input.
    CHECK_THROWS_WITH_AS(run_oracle(c, fin, pp), doctest::Contains("<i4"), Error);
    CHECK_THROWS_WITH_AS(run_oracle(c, pin, fp), doctest::Contains("input sa"), Error);
  }
}

TEST_CASE("deepgemm ue8m0_packed: weight scales that differ inside a 128-row block are refused") {
  const DeepGemmSpec ps = spec("ue8m0_packed");
  Tensors in = deepgemm_fp8_inputs(ps, false);
  Array<int32_t> sb = from_npy<int32_t>(in.at("sb"), "sb");
  sb.data[3] = static_cast<int32_t>(static_cast<uint32_t>(sb.data[3]) ^ 1u);  // row 3's k block 0: another exponent
  in["sb"] = to_npy(sb);
  CHECK_THROWS_WITH_AS(run_oracle(contract(kDeepGemmContiguousFp8), in, deepgemm_fp8_params(ps, false)),
                       doctest::Contains("input sb row 3 of group 0"), Error);
}
