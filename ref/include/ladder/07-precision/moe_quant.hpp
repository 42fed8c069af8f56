// ladder/07-precision/moe_quant.hpp -- rung (d): the routed experts of stage 04 in A8W8 and A8W4, through
// the ragged dot.
//
// One expert projection y_a = x_t W[e] for every assignment a = t k + j of token t to expert
// e = topk_idx[t, j] (stage 04's w1 / w3 / w2 are three such projections; the SwiGLU between them and the
// weighted combine are stage 04's, in float). The recipe, as the Huawei deployment quantises the
// DeepSeek-V3 experts (A8W8 dynamic; A8W4 planned: the Ascend deployment report, §3.1.1, §8):
//   x [T x K] float32 --per_token int8 (dynamic, amax/127)-------> xq [T x K], xs [T x 1]
//        (quantised once per token, before the dispatch: the all-to-all then moves int8)
//   moe_a8w8: W[e] [K x N] --per_channel int8 (amax/127)----------> codes [K x N], ws [1 x N]
//   moe_a8w4: W[e] [K x N] --int4_groups(g) (amax/7 per g along K)--> codes, ws [ceil(K/g) x N], the codes
//             packed two per byte along K (core/quant.hpp's pack_int4_rows on W[e]^T: byte (n, i) holds
//             k = 2i in its low nibble, k = 2i + 1 in its high one), [N x K/2] bytes per expert
//   sort the assignments by expert (stage 04's sort_by_expert), gather the token code rows, and run the
//   ragged dot on the integer codes: per group b of g along K (one group, b = 0, for a8w8)
//     acc_ab = sum_{k in b} xq_tk code_e(k, n)      int32, EXACT (integer addition: any order)
//   then dequantise in float32 and unsort to assignment order:
//     y_an = sum_b fl(fl(float(acc_ab) xs_t) ws_e(b, n))       (b ascending; a8w8: the single term)
//
// Overflow is impossible by construction: |int8 x int8| <= 2^14, so K <= kA8W8MaxK = 2^17 - 1 keeps an
// a8w8 sum inside int32 (gemm_s8s8s32 refuses more); |int8 x int4| <= 128 x 8 = 2^10, and a group holds
// g <= kA8W4MaxGroup = 2^14 terms, so |acc_ab| <= 2^24: exact in int32 AND in float32 (larger g refused).
//
// The bound on y (moe_bound = dequant_sum_bound of a8w8.hpp, the a8w8 rung's own function; derivation):
// the oracle is o_an = sum_b acc_ab xs_t ws_e(b, n), exact from the exact integers. Each term of the
// candidate is a8w8's dequantisation: p_b = o_b (1 + d1)(1 + d2)(1 + d3), |di| <= u = 2^-24 (float(acc),
// two products), and nb = ceil(K/g) terms summed in float32 in any order add nb - 1 roundings, so
// (Higham §3.1, (1 + gamma_3)(1 + gamma_{nb-1}) <= 1 + gamma_{nb+2})
//   |y - o| <= gamma_{nb+2}(2^-24) G,   G = sum_b |acc_ab| xs_t ws_e(b, n);
// the float64 oracle adds gamma_{nb+1}(2^-53) G (two products per term, nb - 1 additions), and products in
// float32's subnormal range lose up to 2^-150 each (nb 2^-149). For a8w8, nb = 1 and G = |o|: a8w8_bound.
// Every summation order of the integers, any order of the float terms, any expert order gives a result
// inside it. What it catches (tests/07-precision/test_moe_quant.cpp): int4 nibbles unpacked in the wrong
// order (acc exact; y: two weights swapped), a group's scale taken from its neighbour (y off by the ratio
// of the two scales; the golden groups differ by powers of two), the per-token scale missing (y off by
// xs_t), a token sent to another expert (acc and y).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/ragged_dot.hpp"
#include "ladder/07-precision/a8w8.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/quant.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::precision {

// The largest int4 group: g 2^10 <= 2^24, each group's int32 sum exact in float32 too.
inline constexpr int64_t kA8W4MaxGroup = int64_t{1} << 14;

// The experts' weights, quantised per the recipe: int8 per channel (group = K) or int4 per g along K.
struct QuantExperts {
  quant::Elem elem = quant::Elem::int8;
  int64_t E = 0, K = 0, N = 0, group = 0, nb = 1;  // nb = ceil(K / group) scale groups along K
  std::vector<std::vector<int8_t>> codes;          // int8: [E] of [K x N] row-major
  std::vector<std::vector<uint8_t>> packed;        // int4: [E] of [N x K/2], two codes per byte along K
  std::vector<Mat<float>> scales;                  // [E] of [nb x N]
};

// w [E x K x N] row-major (one expert after another) -> the recipe's codes and scales.
inline QuantExperts quantize_experts(const std::vector<float>& w, int64_t E, int64_t K, int64_t N, bool int4,
                                     int64_t group) {
  require(E >= 1 && K >= 1 && N >= 1 && static_cast<int64_t>(w.size()) == E * K * N,
          "quantize_experts: w has {} entries, violates E * K * N = {} * {} * {} with E, K, N >= 1", w.size(), E, K, N);
  QuantExperts q;
  q.elem = int4 ? quant::Elem::int4 : quant::Elem::int8;
  q.E = E, q.K = K, q.N = N, q.group = int4 ? group : K;
  if (int4) {
    require(group >= 2 && group <= kA8W4MaxGroup && group % 2 == 0,
            "quantize_experts: group = {} violates even 2 <= group <= {} (a group sum of int8 x int4 exact in float32)",
            group, kA8W4MaxGroup);
    require(K % 2 == 0, "quantize_experts: K = {} violates K % 2 == 0 (int4 codes packed two per byte along K)", K);
  }
  q.nb = (K + q.group - 1) / q.group;
  for (int64_t e = 0; e < E; ++e) {
    Mat<float> we(K, N);
    std::copy(w.begin() + e * K * N, w.begin() + (e + 1) * K * N, we.data());
    if (!int4) {
      const quant::Quantized c = quant::per_channel(we, quant::Elem::int8);
      q.codes.push_back(int8_codes(c));
      q.scales.push_back(c.scales);
      continue;
    }
    const quant::Quantized c = quant::int4_groups(we, group);  // g x 1 tiles: scales [nb x N]
    quant::Quantized t = c;                                    // W[e]^T [N x K]: pack along K
    t.rows = N, t.cols = K;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) t.codes[static_cast<size_t>(n * K + k)] = c.codes[static_cast<size_t>(k * N + n)];
    q.packed.push_back(quant::pack_int4_rows(t));
    q.scales.push_back(c.scales);
  }
  return q;
}

// The int4 code of expert e at (k, n), read from the packed bytes.
inline int32_t int4_code(const QuantExperts& q, int64_t e, int64_t k, int64_t n) {
  const uint8_t b = q.packed[static_cast<size_t>(e)][static_cast<size_t>((n * q.K + k) / 2)];
  return k % 2 == 0 ? formats::unpack_int4_lo(b) : formats::unpack_int4_hi(b);
}

// The ragged dot on codes: lhs [m x K] int8 (rows packed by expert, group_sizes [E]) times each expert's
// codes -> acc [m x nb x N] int32 (a8w8: nb = 1), exact. Rows past sum(group_sizes) are zero (ragged_dot).
inline std::vector<int32_t> ragged_dot_codes(const std::vector<int8_t>& lhs, int64_t m, const QuantExperts& q,
                                             const std::vector<moe::Index>& group_sizes) {
  const int64_t K = q.K, N = q.N, nb = q.nb;
  moe::check_ragged(m, K, q.E, N, group_sizes.data());
  std::vector<int32_t> acc(static_cast<size_t>(m * nb * N), 0);
  int64_t start = 0;
  for (int64_t e = 0; e < q.E; ++e) {
    const int64_t rows = group_sizes[static_cast<size_t>(e)];
    if (rows > 0 && q.elem == quant::Elem::int8)
      gemm_s8s8s32(lhs.data() + start * K, q.codes[static_cast<size_t>(e)].data(), acc.data() + start * N, rows, K, N);
    else if (rows > 0)
      for (int64_t i = start; i < start + rows; ++i)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t b = 0; b < nb; ++b) {
            int32_t s = 0;
            for (int64_t k = b * q.group; k < std::min(K, (b + 1) * q.group); ++k)
              s += int32_t{lhs[static_cast<size_t>(i * K + k)]} * int4_code(q, e, k, n);
            acc[static_cast<size_t>((i * nb + b) * N + n)] = s;
          }
    start += rows;
  }
  return acc;
}

// y of one assignment row: sum_b fl(fl(float(acc_b) xs) ws_b), b ascending, in float32.
inline float dequant_row(const int32_t* acc, float xs, const Mat<float>& ws, int64_t nb, int64_t N, int64_t n) {
  float y = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const float t = static_cast<float>(acc[b * N + n]) * xs;
    y = y + t * ws(b, n);
  }
  return y;
}

struct MoeQuantResult {
  quant::Quantized xq;       // [T x K] int8 per token
  QuantExperts wq;
  std::vector<int32_t> acc;  // [T k x nb x N], assignment order
  Mat<float> y;              // [T k x N], assignment order
};

inline void check_moe_operands(int64_t T, int64_t K, int64_t E, const Array<moe::Index>& topk_idx) {
  require(topk_idx.shape.size() == 2 && topk_idx.shape[0] == T && topk_idx.shape[1] >= 1,
          "moe_quant: topk_idx has shape {}, violates [T, k] with T = x's {} and k >= 1", shape_str(topk_idx.shape), T);
  for (int64_t a = 0; a < topk_idx.size(); ++a)
    require(topk_idx.data[static_cast<size_t>(a)] >= 0 && topk_idx.data[static_cast<size_t>(a)] < E,
            "moe_quant: topk_idx[{}] = {} violates 0 <= topk_idx < E = {}", a, topk_idx.data[static_cast<size_t>(a)], E);
  require(K >= 1, "moe_quant: K = {} violates K >= 1", K);
}

// The reference rung: x [T x K], w [E x K x N], topk_idx [T x k] -> the recipe's outputs (header comment).
inline MoeQuantResult moe_quant_experts(const Mat<float>& x, const std::vector<float>& w, int64_t E, int64_t N,
                                        const Array<moe::Index>& topk_idx, bool int4, int64_t group) {
  const int64_t T = x.rows(), K = x.cols();
  check_moe_operands(T, K, E, topk_idx);
  MoeQuantResult r;
  r.xq = quant::per_token(x, quant::Elem::int8);
  r.wq = quantize_experts(w, E, K, N, int4, group);
  const int64_t k = topk_idx.shape[1], A = T * k, nb = r.wq.nb;
  const moe::Permutation p = moe::sort_by_expert(topk_idx, E);
  std::vector<int8_t> lhs(static_cast<size_t>(A * K));  // the gathered token rows, expert by expert
  for (int64_t i = 0; i < A; ++i)
    for (int64_t c = 0; c < K; ++c)
      lhs[static_cast<size_t>(i * K + c)] = static_cast<int8_t>(r.xq.codes[static_cast<size_t>(p.sort_idx[static_cast<size_t>(i)] / k * K + c)]);
  const std::vector<int32_t> sorted = ragged_dot_codes(lhs, A, r.wq, p.group_sizes);
  r.acc.resize(sorted.size());
  r.y.resize(A, N);
  for (int64_t a = 0; a < A; ++a) {  // unsort: assignment a sits at sorted row inverse[a]
    const int32_t* row = sorted.data() + p.inverse[static_cast<size_t>(a)] * nb * N;
    std::copy(row, row + nb * N, r.acc.begin() + a * nb * N);
    const Mat<float>& ws = r.wq.scales[static_cast<size_t>(topk_idx.data[static_cast<size_t>(a)])];
    for (int64_t n = 0; n < N; ++n) r.y(a, n) = dequant_row(row, r.xq.scales(a / k, 0), ws, nb, N, n);
  }
  return r;
}

// The fp64 oracle, assignment by assignment (no sort: a different path from the rung's), from the codes
// and scales: acc exact, y = sum_b acc_b xs ws_b in float64, and the bound of each y (derived above).
struct MoeOracle {
  std::vector<int32_t> acc;
  Array<double> y, bound;
};
inline MoeOracle moe_quant_oracle(const quant::Quantized& xq, const QuantExperts& wq, const Array<moe::Index>& topk_idx) {
  const int64_t K = wq.K, N = wq.N, nb = wq.nb, k = topk_idx.shape[1], A = topk_idx.size();
  MoeOracle o{std::vector<int32_t>(static_cast<size_t>(A * nb * N)), Array<double>({A, N}), Array<double>({A, N})};
  for (int64_t a = 0; a < A; ++a) {
    const int64_t t = a / k, e = topk_idx.data[static_cast<size_t>(a)];
    const double xs = xq.scales(t, 0);
    for (int64_t n = 0; n < N; ++n) {
      double y = 0, g = 0;
      for (int64_t b = 0; b < nb; ++b) {
        int64_t s = 0;
        for (int64_t c = b * wq.group; c < std::min(K, (b + 1) * wq.group); ++c) {
          const int64_t wc = wq.elem == quant::Elem::int8 ? int64_t{wq.codes[static_cast<size_t>(e)][static_cast<size_t>(c * N + n)]}
                                                         : int4_code(wq, e, c, n);
          s += int64_t{static_cast<int8_t>(xq.codes[static_cast<size_t>(t * K + c)])} * wc;
        }
        o.acc[static_cast<size_t>((a * nb + b) * N + n)] = static_cast<int32_t>(s);  // |s| < 2^31 (header)
        const double v = a8w8_oracle(s, xs, wq.scales[static_cast<size_t>(e)](b, n));
        y += v;
        g += std::fabs(v);
      }
      o.y.data[static_cast<size_t>(a * N + n)] = y;
      o.bound.data[static_cast<size_t>(a * N + n)] = dequant_sum_bound(nb, g);
    }
  }
  return o;
}

}  // namespace ladder::precision
