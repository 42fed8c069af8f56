// ref/src/07-precision/golden_attn.cpp -- stage 07's golden cases of rungs (e) and (f) (data/golden/07-precision/).
//
// Awkward on purpose, each so that a wrong candidate of issue 40's list is told apart by the derived bound:
//   kv_int8_mla: cached tokens of magnitudes 2^-3..2^3, neighbours at least 4x apart (a neighbour's per-token
//     scale is far off); rows past seqlens are NaN (a rung that reads one too many fails). Both kv cases: a small
//     query (scores O(0.1), where the bound's softmax factor e^{D_j + D} stays near 1) and a sparse w_o.
//   kv_fp8_mla: FlashMLA's record at DeepSeek's dims (R = 512, rope = 64): each row's four 128-blocks at distinct
//     powers of two (a transposed or missing scale is far off); the rope values are bf16 numbers that E4M3 rounds
//     as badly as it can (ties 1.0625 2^-k below an amax of 1.75 2^t: amax/448 = 2^(t-8), so x / scale is a tie of
//     E4M3 that RNE rounds 5.9 % down), with q^R of the same signs: rope quantised to fp8 shifts every score of a
//     token coherently, the bf16 record does not at all; the latent query is small, so the latent's own fp8 error
//     (which the bound carries) stays below that shift.
//   attn_bf16_k1024: near-uniform weights over 1024 positive values: a bf16 accumulator stagnates.
//   attn_bf16_ptrunc: softmax_scale 1, one key of score 0 first, the others at -0.6875 (bf16 numbers): every P is
//     e^-0.6875 = 0.50283, just above 1/2, where truncation errs by 0.56 % and RNE by 0.21 % (the bound: 2^-8).
//   attn_bf16_q5_k113: awkward shapes (d 59, dv 17, bc 32: a partial last tile), N(0, 1) inputs.
#include <cmath>
#include <map>

#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::precision {

namespace {

template <class T>
NpyData arr(Shape s, std::vector<T> v) {
  Array<T> a(s);
  a.data = std::move(v);
  return to_npy(a);
}

// kv_int8_mla / kv_fp8_mla: B = 3 tokens, H = 2, R = 512, rope = 64, Lmax = 9, hidden = 4.
void kv_case(bool fp8, Tensors& in, nlohmann::json& params) {
  const int64_t B = 3, H = 2, R = 512, rope = 64, Lmax = 9, hidden = 4, D = R + rope;
  const std::vector<int64_t> seqlens = {1, 5, 9};
  Rng rng(fp8 ? 722 : 721);
  std::vector<float> kv(static_cast<size_t>(B * Lmax * D), NAN), qa(static_cast<size_t>(B * H * R)),
      qr(static_cast<size_t>(B * H * rope)), wo(static_cast<size_t>(hidden * H * R), 0.0f);
  std::vector<float> sgn(static_cast<size_t>(rope));
  for (auto& s : sgn) s = rng.uniform() < 0.5 ? -1.0f : 1.0f;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < seqlens[static_cast<size_t>(b)]; ++j) {
      float* row = &kv[static_cast<size_t>((b * Lmax + j) * D)];
      const int t = static_cast<int>((5 * j + 3 * b) % 7) - 3;  // the token's magnitude 2^t
      for (int64_t c = 0; c < R; ++c) {
        const int e = fp8 ? static_cast<int>((3 * (c / 128) + 5 * j) % 9) - 4 : t;
        row[c] = std::ldexp(static_cast<float>(rng.normal()), e);
      }
      for (int64_t c = 0; c < rope; ++c) {
        if (!fp8) {
          row[R + c] = std::ldexp(static_cast<float>(rng.normal()), t);
          continue;
        }
        const int k = c == 0 ? 0 : static_cast<int>(rng.uniform_int(4));
        row[R + c] = sgn[static_cast<size_t>(c)] * std::ldexp(c == 0 ? 1.75f : 1.0625f, t - k);
      }
    }
  for (auto& v : qa) v = static_cast<float>(rng.normal() * 0.01);
  for (int64_t i = 0; i < B * H; ++i)
    for (int64_t c = 0; c < rope; ++c)
      qr[static_cast<size_t>(i * rope + c)] = fp8 ? sgn[static_cast<size_t>(c)] * static_cast<float>(0.5 + rng.uniform())
                                                  : static_cast<float>(0.01 * rng.normal());
  // w_o sparse, 8 entries per row: the bound adds |w| times each o^lat element's bound, so with a dense row it
  // would be a worst case over H R terms against an error that grows like their square root.
  for (int64_t i = 0; i < hidden; ++i)
    for (int64_t n = 0; n < 8; ++n)
      wo[static_cast<size_t>(i * H * R + static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(H * R))))] =
          static_cast<float>(rng.normal());
  in = Tensors{{"q_abs", arr<float>({B, H, R}, qa)}, {"q_pe", arr<float>({B, H, rope}, qr)},
               {"kv", arr<float>({B, Lmax, D}, kv)}, {"seqlens", arr<int64_t>({B}, seqlens)},
               {"w_o", arr<float>({hidden, H * R}, wo)}};
  params = {{"recipe", fp8 ? "kv_fp8" : "kv_int8"}};
}

void attn_case(const std::string& name, Tensors& in, nlohmann::json& params) {
  params = {{"recipe", "attn_bf16"}};
  int64_t Lq = 3, Lk = 1024, d = 8, dv = 8;
  uint64_t seed = 731;
  if (name == "attn_bf16_ptrunc") Lq = 2, Lk = 200, d = 4, dv = 4, seed = 732;
  if (name == "attn_bf16_q5_k113") Lq = 5, Lk = 113, d = 59, dv = 17, seed = 733;
  Rng rng(seed);
  std::vector<float> q(static_cast<size_t>(Lq * d)), k(static_cast<size_t>(Lk * d)), v(static_cast<size_t>(Lk * dv));
  if (name == "attn_bf16_ptrunc") {
    params["softmax_scale"] = 1.0;
    for (int64_t i = 0; i < Lq; ++i) q[static_cast<size_t>(i * d + i % d)] = 1.0f;
    for (int64_t j = 1; j < Lk; ++j)
      for (int64_t c = 0; c < d; ++c) k[static_cast<size_t>(j * d + c)] = -0.6875f;
    for (int64_t j = 0; j < Lk; ++j)
      for (int64_t c = 0; c < dv; ++c) v[static_cast<size_t>(j * dv + c)] = 1.0f + static_cast<float>(rng.uniform_int(16)) / 16;
  } else if (name == "attn_bf16_q5_k113") {
    params["bc"] = 32;
    for (auto& x : q) x = static_cast<float>(rng.normal());
    for (auto& x : k) x = static_cast<float>(rng.normal());
    for (auto& x : v) x = static_cast<float>(rng.normal());
  } else {
    for (auto& x : q) x = static_cast<float>(0.1 * rng.normal());
    for (auto& x : k) x = static_cast<float>(rng.normal());
    for (auto& x : v) x = static_cast<float>(1.0 + 0.25 * rng.normal());
  }
  in = Tensors{{"q", arr<float>({Lq, d}, q)}, {"k", arr<float>({Lk, d}, k)}, {"v", arr<float>({Lk, dv}, v)}};
}

}  // namespace

const std::map<std::string, std::string>& attn_golden_cases() {
  static const std::map<std::string, std::string> c = {
      {"kv_int8_mla", "MLA decode, int8 cache (one scale per token): tokens 2^-3..2^3, neighbours >= 4x apart"},
      {"kv_fp8_mla", "MLA decode, FlashMLA FP8 record: 128-blocks at distinct powers of two, bf16 rope values E4M3 "
                     "would round by 5.9 %"},
      {"attn_bf16_k1024", "bf16 attention: near-uniform weights over 1024 positive values (bf16 accumulation stagnates)"},
      {"attn_bf16_ptrunc", "bf16 attention: every P = 0.50283, where truncation errs 0.56 %, RNE 0.21 %"},
      {"attn_bf16_q5_k113", "bf16 attention: d 59, dv 17, bc 32 (a partial last tile), N(0, 1)"}};
  return c;
}

void attn_golden_case(const std::string& name, Tensors& inputs, nlohmann::json& params) {
  if (name == "kv_int8_mla" || name == "kv_fp8_mla") return kv_case(name == "kv_fp8_mla", inputs, params);
  attn_case(name, inputs, params);
}

}  // namespace ladder::precision
