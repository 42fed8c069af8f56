// ladder/07-precision/kv_quant.hpp -- rung (e): MLA decode (stage 03's absorbed decode, ladder/03-mla/absorbed.hpp)
// over a quantised KV cache, in two recipes.
//
// Stage 03's absorbed step attends in the latent space: per head h of query token b,
//   s_j = sigma (q_abs_h . c_j + q^R_h . k^R_j),  a = softmax(s),  o^lat_h = sum_j a_j c_j,  u = W_absO o^lat
// over the cache rows [c_j (kv_lora = R) | k^R_j (rope)] (W_absO = W_O W_UV per head: stage 03's AM, absorb_weights).
// The recipes store each row quantised and dequantise it in the dot products:
//   kv_int8: the whole row (R + rope values) in int8, ONE float32 scale per token, amax/127, RNE
//            (core/quant.hpp's per-token int8): R + rope + 4 bytes per token (580 at R = 512, rope = 64);
//   kv_fp8:  FlashMLA's FP8 record: the R latent values in E4M3 (OCP FP8, RNE, saturating), one float32 scale
//            per 128 of them, amax/448, and the rope values kept in bf16 (RNE): R + 4 R/128 + 2 rope bytes
//            (512 + 16 + 128 = 656: the size FlashMLA states; ladder reproduce 07-precision derives it).
// The candidate dequantises a cached value as fl32(code x scale) (a bf16 rope value is exact in float32).
//
// The oracle (kv_oracle) is stage 03's step in float64 on the UNQUANTISED cache: what the candidate is
// judged against is the exact answer, so the bound has to carry the quantisation. The quantisation is
// deterministic (the recipe fixes format, rounding and scale rule), so each cached value's error is known:
//   e = |code x scale - x| + 2^-24 |code x scale|   (the exact quantisation error, plus the float32 dequantisation)
// and kv_row_errors checks it is within the format's a-priori bound (core/quant.hpp's dequant_bound: int8
// scale/2, E4M3 2^-4 |x| + 2^-10 scale; bf16 2^-8 |x| + 2^-134). attn_bound.hpp carries e through the
// scores (D_j = sigma sum |q| e + the float32 dot), the softmax (kappa_j) and the weighted sum (the values are
// the same quantised c_j) to o^lat; project_bound carries o^lat's bound through u = W_absO o^lat.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/07-precision/attn_bound.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/quant.hpp"

namespace ladder::precision {

enum class KvFormat { int8_token, fp8_record };

inline const char* kv_format_name(KvFormat f) { return f == KvFormat::int8_token ? "kv_int8" : "kv_fp8"; }

// Bytes of one token's cached row (per layer).
inline int64_t kv_record_bytes(KvFormat f, int64_t R, int64_t rope) {
  return f == KvFormat::int8_token ? R + rope + 4 : R + 4 * (R / 128) + 2 * rope;
}

inline void check_kv_dims(KvFormat f, int64_t R, int64_t rope) {
  require(R >= 1 && rope >= 1, "kv cache: kv_lora = {}, rope = {} violate >= 1", R, rope);
  require(f == KvFormat::int8_token || R % 128 == 0,
          "kv cache: kv_lora = {} violates kv_lora % 128 == 0 (the FP8 record keeps one scale per 128 latent values)", R);
}

// One quantised row [c (R) | k^R (rope)].
struct KvRow {
  std::vector<uint8_t> codes;  // kv_int8: R + rope int8 bytes; kv_fp8: R E4M3 codes
  std::vector<float> scales;   // kv_int8: 1; kv_fp8: R / 128
  std::vector<uint16_t> rope;  // kv_fp8: rope bf16 bit patterns
};

inline KvRow quantize_kv_row(const float* x, int64_t R, int64_t rope, KvFormat f) {
  check_kv_dims(f, R, rope);
  KvRow q;
  auto amax_of = [&](int64_t c0, int64_t c1) {
    float m = 0;
    for (int64_t c = c0; c < c1; ++c) {
      require(std::isfinite(x[c]), "kv cache: row value [{}] = {} violates isfinite", c, x[c]);
      m = std::max(m, std::fabs(x[c]));
    }
    return m;
  };
  if (f == KvFormat::int8_token) {
    const float s = quant::tile_scale(amax_of(0, R + rope), quant::Elem::int8, quant::ScaleRule::amax);
    q.scales = {s};
    for (int64_t c = 0; c < R + rope; ++c) q.codes.push_back(static_cast<uint8_t>(formats::to_int8(x[c] / s)));
    return q;
  }
  for (int64_t b = 0; b < R / 128; ++b) {
    const float s = quant::tile_scale(amax_of(b * 128, (b + 1) * 128), quant::Elem::e4m3, quant::ScaleRule::amax);
    q.scales.push_back(s);
    for (int64_t c = b * 128; c < (b + 1) * 128; ++c) q.codes.push_back(formats::to_e4m3(x[c] / s));
  }
  amax_of(R, R + rope);
  for (int64_t c = R; c < R + rope; ++c) q.rope.push_back(formats::to_bf16(x[c]));
  return q;
}

// The code's value (before its scale) and its scale, at position c of the row.
inline double kv_code_value(const KvRow& q, KvFormat f, int64_t R, int64_t c) {
  if (f == KvFormat::int8_token) return static_cast<int8_t>(q.codes[static_cast<size_t>(c)]);
  return c < R ? formats::from_e4m3(q.codes[static_cast<size_t>(c)]) : formats::from_bf16(q.rope[static_cast<size_t>(c - R)]);
}
inline float kv_scale(const KvRow& q, KvFormat f, int64_t R, int64_t c) {
  if (f == KvFormat::int8_token) return q.scales[0];
  return c < R ? q.scales[static_cast<size_t>(c / 128)] : 1.0f;
}

// The candidate's dequantised row, float32: fl(code x scale) (rope bf16 values exactly).
inline void dequantize_kv_row(const KvRow& q, int64_t R, int64_t rope, KvFormat f, float* out) {
  for (int64_t c = 0; c < R + rope; ++c)
    out[c] = static_cast<float>(kv_code_value(q, f, R, c)) * kv_scale(q, f, R, c);
}

// The kv_fp8 record as bytes, FlashMLA's "FP8 with scale" layout (deepseek-ai/FlashMLA README, "FP8 KV Cache";
// tests/quant.py, V32_FP8Sparse): R E4M3 codes, then R/128 float32 scales (little-endian, scale g for values
// [128 g, 128 g + 128)), then rope bf16 values (little-endian): kv_record_bytes(fp8_record, R, rope) bytes.
inline void kv_fp8_record_write(const KvRow& q, int64_t R, int64_t rope, uint8_t* out) {
  check_kv_dims(KvFormat::fp8_record, R, rope);
  require(static_cast<int64_t>(q.codes.size()) == R && static_cast<int64_t>(q.scales.size()) == R / 128 &&
              static_cast<int64_t>(q.rope.size()) == rope, "kv_fp8 record: a row of {} codes, {} scales, {} rope "
          "values violates R = {}, R / 128, rope = {}", q.codes.size(), q.scales.size(), q.rope.size(), R, rope);
  std::memcpy(out, q.codes.data(), static_cast<size_t>(R));
  for (int64_t g = 0; g < R / 128; ++g) std::memcpy(out + R + 4 * g, &q.scales[static_cast<size_t>(g)], 4);
  for (int64_t k = 0; k < rope; ++k) {
    out[R + 4 * (R / 128) + 2 * k] = static_cast<uint8_t>(q.rope[static_cast<size_t>(k)] & 0xFF);
    out[R + 4 * (R / 128) + 2 * k + 1] = static_cast<uint8_t>(q.rope[static_cast<size_t>(k)] >> 8);
  }
}
inline KvRow kv_fp8_record_read(const uint8_t* in, int64_t R, int64_t rope) {
  check_kv_dims(KvFormat::fp8_record, R, rope);
  KvRow q{std::vector<uint8_t>(in, in + R), std::vector<float>(static_cast<size_t>(R / 128)),
          std::vector<uint16_t>(static_cast<size_t>(rope))};
  for (int64_t g = 0; g < R / 128; ++g) std::memcpy(&q.scales[static_cast<size_t>(g)], in + R + 4 * g, 4);
  for (int64_t k = 0; k < rope; ++k)
    q.rope[static_cast<size_t>(k)] = static_cast<uint16_t>(in[R + 4 * (R / 128) + 2 * k] |
                                                           (in[R + 4 * (R / 128) + 2 * k + 1] << 8));
  return q;
}

// e[c] = the bound on |candidate's value - x[c]| (header), checked against the format's a-priori bound.
inline void kv_row_errors(const float* x, const KvRow& q, int64_t R, int64_t rope, KvFormat f, double* e) {
  for (int64_t c = 0; c < R + rope; ++c) {
    const double s = kv_scale(q, f, R, c), v = kv_code_value(q, f, R, c) * s, ax = std::fabs(x[c]);
    const bool bf16 = f == KvFormat::fp8_record && c >= R;
    e[c] = std::fabs(v - x[c]) + (bf16 ? 0.0 : 0x1p-24 * std::fabs(v));
    const double prior = bf16 ? 0x1p-8 * ax + 0x1p-134
                              : quant::dequant_bound(f == KvFormat::int8_token ? quant::Elem::int8 : quant::Elem::e4m3, s, ax);
    require(e[c] <= prior, "kv cache: value [{}] = {} quantised with error {} above the format's bound {}", c, x[c],
            e[c], prior);
  }
}

// The operands of rung (e): B query tokens, each with its own cache (stage 03's gathered layout).
struct MlaKvOperands {
  int64_t B = 0, H = 0, R = 0, rope = 0, Lmax = 0, hidden = 0;
  std::vector<float> q_abs;      // [B, H, R]   stage 03's q_abs (W_UK absorbed into the query)
  std::vector<float> q_pe;       // [B, H, rope] q^R (roped)
  std::vector<float> kv;         // [B, Lmax, R + rope] rows [c^KV | k^R]; rows j >= seqlens[b] are not read
  std::vector<int64_t> seqlens;  // [B]
  std::vector<float> w_o;        // [hidden, H R] stage 03's W_absO (AM's W_O W_UV per head)
  float sigma = 0;               // the softmax scale, float32 (params.softmax_scale)
  const float* row(int64_t b, int64_t j) const { return &kv[static_cast<size_t>((b * Lmax + j) * (R + rope))]; }
};

struct MlaKvResult {
  std::vector<float> u, lse;  // [B, hidden], [B, H]
};

// The reference rung in float32: quantise each row, dequantise it, then stage 03's absorbed attention with a
// two-pass safe softmax (expf), the weighted sum in ascending j, u = W_absO o^lat.
inline MlaKvResult mla_kv_decode(const MlaKvOperands& m, KvFormat f) {
  check_kv_dims(f, m.R, m.rope);
  const int64_t D = m.R + m.rope;
  MlaKvResult r{std::vector<float>(static_cast<size_t>(m.B * m.hidden)), std::vector<float>(static_cast<size_t>(m.B * m.H))};
  for (int64_t b = 0; b < m.B; ++b) {
    const int64_t L = m.seqlens[static_cast<size_t>(b)];
    std::vector<float> deq(static_cast<size_t>(L * D)), olat(static_cast<size_t>(m.H * m.R), 0.0f), s(static_cast<size_t>(L));
    for (int64_t j = 0; j < L; ++j)
      dequantize_kv_row(quantize_kv_row(m.row(b, j), m.R, m.rope, f), m.R, m.rope, f, &deq[static_cast<size_t>(j * D)]);
    for (int64_t h = 0; h < m.H; ++h) {
      const float* qa = &m.q_abs[static_cast<size_t>((b * m.H + h) * m.R)];
      const float* qr = &m.q_pe[static_cast<size_t>((b * m.H + h) * m.rope)];
      float mx = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        const float* c = &deq[static_cast<size_t>(j * D)];
        float dot = 0;
        for (int64_t k = 0; k < m.R; ++k) dot += qa[k] * c[k];
        for (int64_t k = 0; k < m.rope; ++k) dot += qr[k] * c[m.R + k];
        s[static_cast<size_t>(j)] = dot * m.sigma;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      float l = 0;
      float* o = &olat[static_cast<size_t>(h * m.R)];
      for (int64_t j = 0; j < L; ++j) {
        const float p = std::exp(s[static_cast<size_t>(j)] - mx);
        l += p;
        for (int64_t k = 0; k < m.R; ++k) o[k] += p * deq[static_cast<size_t>(j * D + k)];
      }
      for (int64_t k = 0; k < m.R; ++k) o[k] /= l;
      r.lse[static_cast<size_t>(b * m.H + h)] = mx + std::log(l);
    }
    for (int64_t i = 0; i < m.hidden; ++i) {
      float y = 0;
      for (int64_t k = 0; k < m.H * m.R; ++k) y += m.w_o[static_cast<size_t>(i * m.H * m.R + k)] * olat[static_cast<size_t>(k)];
      r.u[static_cast<size_t>(b * m.hidden + i)] = y;
    }
  }
  return r;
}

// The fp64 oracle on the unquantised cache, and the derived bounds (header; attn_bound.hpp).
struct MlaKvOracle {
  std::vector<double> u, u_bound, lse, lse_bound;  // [B, hidden], [B, H]
};
inline MlaKvOracle mla_kv_oracle(const MlaKvOperands& m, KvFormat f) {
  check_kv_dims(f, m.R, m.rope);
  const int64_t D = m.R + m.rope;
  MlaKvOracle o;
  const RowRecipe rr{1, 0.0, false};  // two-pass softmax, P kept in float32
  for (int64_t b = 0; b < m.B; ++b) {
    const int64_t L = m.seqlens[static_cast<size_t>(b)];
    std::vector<double> K(static_cast<size_t>(L * D)), E(K.size()), olat, ob, q(static_cast<size_t>(D)), eq(q.size(), 0.0);
    for (int64_t j = 0; j < L; ++j) {
      const float* x = m.row(b, j);
      for (int64_t c = 0; c < D; ++c) K[static_cast<size_t>(j * D + c)] = x[c];
      kv_row_errors(x, quantize_kv_row(x, m.R, m.rope, f), m.R, m.rope, f, &E[static_cast<size_t>(j * D)]);
    }
    for (int64_t h = 0; h < m.H; ++h) {
      for (int64_t c = 0; c < m.R; ++c) q[static_cast<size_t>(c)] = m.q_abs[static_cast<size_t>((b * m.H + h) * m.R + c)];
      for (int64_t c = 0; c < m.rope; ++c) q[static_cast<size_t>(m.R + c)] = m.q_pe[static_cast<size_t>((b * m.H + h) * m.rope + c)];
      const RowOracle r = attend_row_bound(q.data(), eq.data(), D, K.data(), E.data(), D, K.data(), E.data(), D, m.R, L,
                                           static_cast<double>(m.sigma), rr);
      olat.insert(olat.end(), r.o.begin(), r.o.end());
      ob.insert(ob.end(), r.bound.begin(), r.bound.end());
      o.lse.push_back(r.lse);
      o.lse_bound.push_back(r.lse_bound);
    }
    std::vector<double> W(m.w_o.begin(), m.w_o.end()), u(static_cast<size_t>(m.hidden)), ub(u.size());
    project_bound(W.data(), m.hidden, m.H * m.R, olat.data(), ob.data(), u.data(), ub.data());
    o.u.insert(o.u.end(), u.begin(), u.end());
    o.u_bound.insert(o.u_bound.end(), ub.begin(), ub.end());
  }
  return o;
}

}  // namespace ladder::precision
