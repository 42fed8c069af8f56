// ref/src/07-precision/golden.cpp -- stage 07's golden cases (data/golden/07-precision/<case>/).
//
// Awkward on purpose: tiles and blocks of very different magnitudes (so a scale taken from the wrong
// tile is far off), outlier channels, partial tiles and blocks (K, N not multiples of 128), int32 sums
// past 2^24 (float(acc) rounds), a static activation scale that saturates, and a float32-accumulator
// recipe; routed experts (rung d) with an expert no token chose, one every token chose, int4 groups of
// distinct powers of two (a neighbour's scale is off by 2^4 or more) and a partial last group. Inputs come
// from fixed seeds; the expected outputs are the oracle's.
#include <cmath>
#include <map>

#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::precision {

namespace {

enum class Kind {
  a8w8_outliers, a8w8_large_sums, fp8_blocks, fp8_static, fp8_acc24, moe, bf16, bf16_scales, bf16_ties
};

struct CaseSpec {
  Kind kind;
  int64_t m, k, n;  // moe: T, K, N
  int64_t experts, top_k;  // moe only
  uint64_t seed;
  const char* params;  // JSON
  const char* what;
};

const std::map<std::string, CaseSpec>& specs() {
  static const std::map<std::string, CaseSpec> s = {
      {"a8w8_outliers", {Kind::a8w8_outliers, 37, 200, 67, 0, 0, 701, R"({"recipe":"a8w8"})",
                         "rows scaled by 2^-3..2^3, three outlier channels x25, columns of w by 2^-2..2^2"}},
      {"a8w8_large_sums", {Kind::a8w8_large_sums, 5, 3000, 7, 0, 0, 702, R"({"recipe":"a8w8"})",
                           "products all positive: int32 sums near 4.4e7, past 2^24 (float(acc) rounds)"}},
      {"fp8_blocks", {Kind::fp8_blocks, 33, 320, 320, 0, 0, 703, R"({"recipe":"fp8_block"})",
                      "1x128 tiles and 128x128 blocks scaled by distinct powers of two (2^-4..2^4), partial last ones"}},
      {"fp8_k1024", {Kind::fp8_blocks, 8, 1024, 40, 0, 0, 706, R"({"recipe":"fp8_block","acc_bits":14,"nc":128})",
                     "K = 1024: eight promotions of the 14-bit accumulator"}},
      {"fp8_static_saturate", {Kind::fp8_static, 16, 256, 128, 0, 0, 704,
                               R"({"recipe":"fp8_block","x_scale":0.004464285714285714})",
                               "static activation scale 2/448: every |x| > 2.07 saturates to +-448"}},
      {"fp8_acc24_nc32", {Kind::fp8_acc24, 9, 200, 130, 0, 0, 705, R"({"recipe":"fp8_block","acc_bits":24,"nc":32})",
                          "a float32 accumulator (24 bits) promoted every 32"}},
      {"moe_a8w8", {Kind::moe, 13, 200, 24, 5, 2, 711, R"({"recipe":"moe_a8w8"})",
                    "5 experts, top-2: expert 0 chosen by no token, expert 1 by every token; tokens 2^-3..2^3"}},
      {"moe_a8w4_g128", {Kind::moe, 11, 320, 20, 4, 2, 712, R"({"recipe":"moe_a8w4","group":128})",
                         "int4 groups of 128 along K = 320 (the last one 64), each (expert, group) its own power of two"}},
      {"moe_a8w4_g32", {Kind::moe, 7, 96, 16, 3, 3, 713, R"({"recipe":"moe_a8w4","group":32})",
                        "top-3 of 3 experts: every token in every expert; int4 groups of 32"}},
      // bf16_gemm (bf16_case): every case's row 0 of x and column 0 of w are coherent (below).
      {"bf16_mla_o_proj", {Kind::bf16, 4, 2048, 8, 0, 0, 721, R"({"recipe":"bf16_gemm"})",
                           "MLA output projection slice: DeepSeek-V2's W_O is [H d_v = 128*128, D = 5120]; here H = 16 "
                           "heads of d_v = 128 (K = 2048), 8 of the D columns, 4 tokens"}},
      {"bf16_k203", {Kind::bf16, 9, 203, 40, 0, 0, 722, R"({"recipe":"bf16_gemm"})",
                     "K = 203, not a multiple of 8, 16 or 64 (every k loop's tail); a W_DKV slice (DeepSeek-V2: [D = "
                     "5120, kv_lora + rope = 576]): 203 of D's rows, 40 of the 576 columns"}},
      {"bf16_scales", {Kind::bf16_scales, 17, 256, 24, 0, 0, 723, R"({"recipe":"bf16_gemm"})",
                       "magnitudes 2^-8..2^8 within every row of x (element (i, k) scaled by 2^(((i + 5k) mod 17) - "
                       "8)); a W_UQ slice (DeepSeek-V2: [q_lora = 1536, H (d_nope + rope) = 128*192]): K = 256, "
                       "N = 24"}},
      {"bf16_zeros_ties", {Kind::bf16_ties, 8, 96, 16, 0, 0, 724, R"({"recipe":"bf16_gemm"})",
                           "exact zeros (+-0, a zero row of x, a zero column of w) and values at bf16 ties and one "
                           "float32 ulp either side; a W_UKV slice (DeepSeek-V2: [kv_lora = 512, H (d_nope + d_v) = "
                           "128*256]): K = 96, N = 16"}},
  };
  return s;
}

const CaseSpec& spec(const std::string& name) {
  const auto it = specs().find(name);
  std::string known;
  for (const auto& [k, v] : specs()) known += (known.empty() ? "" : ", ") + k;
  require(it != specs().end(), "07-precision: no golden case '{}' (cases: {})", name, known);
  return it->second;
}

// Routed experts: x [T, K], w [E, K, N], topk_idx [T, k]. Token rows scaled by 2^-3..2^3 (a missing
// per-token scale shows); weights of expert e, scale group b = k / g (g the case's group, 32 for moe_a8w8)
// scaled by 2^(((3 e + 5 b) mod 9) - 4): neighbouring groups 2^4 or 2^5 apart; slot 0 of every token is expert 1 when E > k (expert 0 then
// gets no token), the other slots distinct experts drawn from the rest.
void moe_case(const CaseSpec& cs, Rng& rng, Tensors& inputs, nlohmann::json& params) {
  const int64_t T = cs.m, K = cs.k, N = cs.n, E = cs.experts, k = cs.top_k;
  params = nlohmann::json::parse(cs.params);
  const int64_t gs = params.value("group", int64_t{32});
  Array<float> x({T, K}), w({E, K, N});
  Array<int64_t> idx({T, k});
  for (auto& v : x.data) v = static_cast<float>(rng.normal());
  for (auto& v : w.data) v = static_cast<float>(rng.normal());
  for (int64_t t = 0; t < T; ++t) {
    const float s = std::ldexp(1.0f, static_cast<int>(rng.uniform_int(7)) - 3);
    for (int64_t c = 0; c < K; ++c) x.data[static_cast<size_t>(t * K + c)] *= s;
  }
  for (int64_t e = 0; e < E; ++e)
    for (int64_t c = 0; c < K; ++c)
      for (int64_t n = 0; n < N; ++n)
        w.data[static_cast<size_t>((e * K + c) * N + n)] *= std::ldexp(1.0f, static_cast<int>((3 * e + 5 * (c / gs)) % 9) - 4);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> pool;
    for (int64_t e = E > k ? 2 : 0; e < E; ++e) pool.push_back(e);
    if (E > k) idx.data[static_cast<size_t>(t * k)] = 1;
    for (int64_t j = E > k ? 1 : 0; j < k; ++j) {  // draw without replacement
      const size_t pick = static_cast<size_t>(rng.uniform_int(static_cast<uint64_t>(pool.size())));
      idx.data[static_cast<size_t>(t * k + j)] = pool[pick];
      pool.erase(pool.begin() + static_cast<long>(pick));
    }
  }
  inputs = Tensors{{"x", to_npy(x)}, {"w", to_npy(w)}, {"topk_idx", to_npy(idx)}};
}

// |v| moved to the bf16 value below it plus frac of a bf16 ulp, v's sign kept: frac < 1/2 rounds (RNE) back
// down, frac > 1/2 up (RTZ: down), 1/2 is a tie.
float bf16_near(float v, float frac) {
  const uint16_t q = formats::to_bf16(std::fabs(v), formats::Round::toward_zero);
  const float base = formats::from_bf16(q), ulp = formats::from_bf16(static_cast<uint16_t>(q + 1)) - base;
  return std::copysign(base + frac * ulp, v);
}

// bf16_gemm: x, w normal (w by 2^-6, as a trained projection's weights), the last k's (x's column K - 1, w's row
// K - 1) at least 1 in magnitude (w: 2^-6) so that a sum stopping one term short is off by more than the bound at
// K = 2048 (a quarter of an average product there), then per kind: bf16_scales scales x's
// element (i, k) by 2^(((i + 5k) mod 17) - 8); bf16_ties sets element e = i K + k of x (k N + j of w) by e mod 6 to
// a zero (+0, -0 alternately), a tie, a tie +- one float32 ulp, or leaves it, and zeroes x's row 3 and w's column 5.
// Every kind: x's row 0 and w's column 0 share their signs (products all positive) and sit 0.4 of a bf16 ulp above a
// bf16 value, so the RNE codes are all below them in magnitude: y_00 computed from the unrounded inputs is off by
// about 2^-8 of sum_k |p_k|, which the bound (K 2^-24 of it) catches for K < 2^16 (bf16_gemm.hpp).
void bf16_case(const CaseSpec& cs, Rng& rng, MatMap<float>& x, MatMap<float>& w) {
  const int64_t M = cs.m, K = cs.k, N = cs.n;
  const auto floor1 = [&](float v, bool last) { return last ? std::copysign(std::fabs(v) + 1.0f, v) : v; };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      x(i, k) = floor1(static_cast<float>(rng.normal()), k == K - 1);
      if (cs.kind == Kind::bf16_scales) x(i, k) *= std::ldexp(1.0f, static_cast<int>((i + 5 * k) % 17) - 8);
    }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) w(k, j) = std::ldexp(floor1(static_cast<float>(rng.normal()), k == K - 1), -6);
  if (cs.kind == Kind::bf16_ties) {
    auto dress = [](float& v, int64_t e) {
      const float tie = bf16_near(v, 0.5f);
      switch (e % 6) {
        case 0: v = (e / 6) % 2 ? -0.0f : 0.0f; break;
        case 1: v = tie; break;
        case 2: v = std::nextafter(tie, std::copysign(INFINITY, v)); break;
        case 3: v = std::nextafter(tie, 0.0f); break;
        default: break;
      }
    };
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) dress(x(i, k), i * K + k);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) dress(w(k, j), k * N + j);
    x.row(3).setZero();
    w.col(5).setZero();
  }
  for (int64_t k = 0; k < K; ++k) {
    const float s = rng.uniform() < 0.5 ? -1.0f : 1.0f;
    const float a = std::fabs(static_cast<float>(rng.normal())) + 0.25f;
    const float b = std::fabs(static_cast<float>(rng.normal()));
    const float xs = cs.kind == Kind::bf16_scales ? std::ldexp(1.0f, static_cast<int>((5 * k) % 17) - 8) : 1.0f;
    x(0, k) = s * bf16_near(a * xs, 0.4f);
    w(k, 0) = s * bf16_near(std::ldexp(b + 0.25f, -6), 0.4f);
  }
}

}  // namespace

// Rungs (e) and (f): golden_attn.cpp.
const std::map<std::string, std::string>& attn_golden_cases();
void attn_golden_case(const std::string& name, Tensors& inputs, nlohmann::json& params);

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : specs()) n.push_back(k);
  for (const auto& [k, v] : attn_golden_cases()) n.push_back(k);
  return n;
}

void golden_case(const std::string& name, Tensors& inputs, nlohmann::json& params) {
  if (attn_golden_cases().count(name)) return attn_golden_case(name, inputs, params);
  const CaseSpec& cs = spec(name);
  Rng rng(cs.seed);
  if (cs.kind == Kind::moe) return moe_case(cs, rng, inputs, params);
  Array<float> x({cs.m, cs.k}), w({cs.k, cs.n});
  for (auto& v : x.data) v = static_cast<float>(rng.normal());
  for (auto& v : w.data) v = static_cast<float>(rng.normal());
  auto xa = x.mat();
  auto wa = w.mat();
  switch (cs.kind) {
    case Kind::bf16:
    case Kind::bf16_scales:
    case Kind::bf16_ties: bf16_case(cs, rng, xa, wa); break;
    case Kind::a8w8_outliers:
      for (int64_t i = 0; i < cs.m; ++i) xa.row(i) *= std::ldexp(1.0f, static_cast<int>(rng.uniform_int(7)) - 3);
      for (int64_t c : {3, 77, 150}) xa.col(c) *= 25.0f;
      for (int64_t j = 0; j < cs.n; ++j) wa.col(j) *= std::ldexp(1.0f, static_cast<int>(rng.uniform_int(5)) - 2);
      break;
    case Kind::a8w8_large_sums:
      for (int64_t kk = 0; kk < cs.k; ++kk) {
        const float s = rng.uniform() < 0.5 ? -1.0f : 1.0f;
        for (int64_t i = 0; i < cs.m; ++i) xa(i, kk) = s * static_cast<float>(0.9 + 0.1 * rng.uniform());
        for (int64_t j = 0; j < cs.n; ++j) wa(kk, j) = s * static_cast<float>(0.9 + 0.1 * rng.uniform());
      }
      break;
    case Kind::fp8_blocks:
    case Kind::fp8_acc24:
      // Distinct powers of two per tile / block: e = ((3a + 5b) mod 9) - 4 differs between (a, b) and
      // (b, a), and between neighbours, so a transposed or neighbouring scale is off by 2^2 or more.
      for (int64_t i = 0; i < cs.m; ++i)
        for (int64_t kk = 0; kk < cs.k; ++kk) xa(i, kk) *= std::ldexp(1.0f, static_cast<int>((7 * i + 3 * (kk / 128)) % 9) - 4);
      for (int64_t kk = 0; kk < cs.k; ++kk)
        for (int64_t j = 0; j < cs.n; ++j)
          wa(kk, j) *= std::ldexp(1.0f, static_cast<int>((3 * (kk / 128) + 5 * (j / 128)) % 9) - 4);
      break;
    case Kind::fp8_static:
    case Kind::moe: break;
  }
  inputs = Tensors{{"x", to_npy(x)}, {"w", to_npy(w)}};
  params = nlohmann::json::parse(cs.params);
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool /*full*/) {
  Tensors in;
  nlohmann::json params;
  golden_case(name, in, params);
  const Contract& c = contract("07-precision");
  if (const auto it = attn_golden_cases().find(name); it != attn_golden_cases().end())
    return write_case(c, dir, in, params, run_oracle(c, in, params), {{"case", name}, {"what", it->second}});
  const CaseSpec& cs = spec(name);
  write_case(c, dir, in, params, run_oracle(c, in, params), {{"case", name}, {"seed", cs.seed}, {"what", cs.what}});
}

}  // namespace ladder::precision
