// ref/src/04-moe/deepgemm_ue8m0.cpp -- SM100's packed UE8M0 scales (ladder/04-moe/deepgemm.hpp states the packing and
// its source): four exponent bytes to an int32 along the scale's k dimension, MN-major, TMA-aligned.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "ladder/04-moe/deepgemm.hpp"

namespace ladder::moe {

namespace {
}  // namespace

Array<int32_t> pack_ue8m0(const Array<float>& sf) {
  require(sf.shape.size() == 3, "pack_ue8m0: sf has shape {}, violates [batch, mn, sf_k]", shape_str(sf.shape));
  const int64_t B = sf.shape[0], mn = sf.shape[1], K = sf.shape[2], W = (K + 3) / 4, ld = align4(mn);
  Array<int32_t> out({B, W, ld});
  std::fill(out.data.begin(), out.data.end(), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < mn; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const float s = sf.data[(b * mn + i) * K + k];
        int e = 0;
        require(std::isfinite(s) && s > 0 && std::frexp(s, &e) == 0.5f, "pack_ue8m0: sf[{}, {}, {}] = {} violates a "
                "finite power of two > 0 (UE8M0 holds an exponent only)", b, i, k, s);
        uint32_t bits = 0;
        std::memcpy(&bits, &s, 4);
        const uint32_t byte = bits >> 23;  // the biased exponent (sign 0); a subnormal power of two is not UE8M0
        require(byte >= 1, "pack_ue8m0: sf[{}, {}, {}] = {} violates >= 2^-126 (a normal float32)", b, i, k, s);
        uint32_t& w = reinterpret_cast<uint32_t&>(out.data[(b * W + k / 4) * ld + i]);
        w |= byte << (8 * (k % 4));
      }
  return out;
}

Array<float> unpack_ue8m0(const Array<int32_t>& packed, int64_t sf_k, const std::string& what) {
  require(packed.shape.size() == 3, "{} has shape {}, violates [batch, ceil(sf_k/4), align4(mn)]", what,
          shape_str(packed.shape));
  const int64_t B = packed.shape[0], W = packed.shape[1], ld = packed.shape[2];
  require(W == (sf_k + 3) / 4, "{} has {} packed words per row, violates ceil({} k blocks / 4) = {}", what, W, sf_k,
          (sf_k + 3) / 4);
  Array<float> sf({B, ld, sf_k});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < ld; ++i)
      for (int64_t k = 0; k < sf_k; ++k) {
        const uint32_t w = static_cast<uint32_t>(packed.data[(b * W + k / 4) * ld + i]);
        const uint32_t byte = (w >> (8 * (k % 4))) & 0xFFu;
        require(byte != 0xFF, "{}[{}, {}, {}] byte {} = 0xFF violates a UE8M0 scale (0xFF is NaN)", what, b, k / 4, i,
                k % 4);
        sf.data[(b * ld + i) * sf_k + k] = std::ldexp(1.0f, static_cast<int>(byte) - 127);  // exact: 2^-127 .. 2^127
      }
  return sf;
}

}  // namespace ladder::moe
