// ladder/03-mla/layers.hpp -- stage 03: the model pieces around the attention: RMSNorm, RoPE, the query
// path (c^Q, q^C, q^R) and the compressed cache row [c^KV | k^R] of a token.
//
// RoPE layout. We rotate the pairs (i, i + d/2) -- the "half-split" layout of rotate_half in HF LLaMA:
//   x'_i       = x_i cos(p w_i) - x_{i+d/2} sin(p w_i)
//   x'_{i+d/2} = x_{i+d/2} cos(p w_i) + x_i sin(p w_i),     w_i = theta^(-2i/d), i < d/2.
// DeepSeek's checkpoints are trained with the interleaved layout, pairs (2i, 2i+1) at the same w_i;
// its HF code de-interleaves q_pe and k_pe first (view(d/2, 2).transpose, modeling_deepseek.py) and then uses
// rotate_half. Both layouts give the same q.k: with P the permutation 2i -> i, 2i+1 -> i + d/2,
// rope_half(P x) = P rope_interleaved(x), and P is orthogonal, so rope_half(Pq).rope_half(Pk) =
// rope_interleaved(q).rope_interleaved(k). What matters is that q and k use the SAME layout
// (tests/03-mla/test_mla_model.cpp checks the identity and that mixing the layouts is caught).
// The angle p w_i is formed in double and cos/sin rounded to T once, as a precomputed table would be:
// in float, p w_i at p ~ 1e4 would already be off by ~1e-3 rad.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ladder/03-mla/gemm.hpp"
#include "ladder/core/math.hpp"
#include "ladder/03-mla/model.hpp"

namespace ladder::mla {

enum class RopeLayout { HalfSplit, Interleaved };

// The rotation of position pos: cos and sin of pos * theta^{-2i/d}, i < d/2 (the angles depend on the
// position only, so a query's H heads share one table).
template <class T>
struct RopeAngles {
  std::vector<T> cos, sin;
};
template <class T>
RopeAngles<T> rope_angles(int64_t d, int64_t pos, double theta) {
  RopeAngles<T> r;
  for (int64_t i = 0; i < d / 2; ++i) {
    const double angle = static_cast<double>(pos) * math::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    r.cos.push_back(static_cast<T>(math::cos(angle)));
    r.sin.push_back(static_cast<T>(math::sin(angle)));
  }
  return r;
}

// Rotates x[0, d) in place by the angles of one position.
template <class T>
void rope_apply(T* x, int64_t d, const RopeAngles<T>& r, RopeLayout layout = RopeLayout::HalfSplit) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const T c = r.cos[i], s = r.sin[i];
    const int64_t ia = layout == RopeLayout::HalfSplit ? i : 2 * i;
    const int64_t ib = layout == RopeLayout::HalfSplit ? i + half : 2 * i + 1;
    const T a = x[ia], b = x[ib];
    x[ia] = a * c - b * s;
    x[ib] = b * c + a * s;
  }
}

// Rotates x[0, d) in place for position pos.
template <class T>
void rope_inplace(T* x, int64_t d, int64_t pos, double theta, RopeLayout layout = RopeLayout::HalfSplit) {
  rope_apply(x, d, rope_angles<T>(d, pos, theta), layout);
}

template <class T>
void rms_norm_inplace(T* x, const T* gain, int64_t n, double eps) {
  T ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const T r = T(1) / std::sqrt(ss / static_cast<T>(n) + static_cast<T>(eps));
  for (int64_t i = 0; i < n; ++i) x[i] = gain[i] * (x[i] * r);
}

template <class T>
void check_hidden(const Weights<T>& W, const Mat<T>& h, const char* who) {
  require(h.cols() == W.cfg.hidden, "mla {}: h.cols = {} violates h.cols == config.hidden = {}", who, h.cols(),
          W.cfg.hidden);
  require(h.rows() >= 1, "mla {}: h.rows (batch B) = {} violates B >= 1", who, h.rows());
}

// c^Q = RMSNorm(W_DQ h): [B, q_lora] from h [B, hidden].
template <class T>
Mat<T> query_latent(const Weights<T>& W, const Mat<T>& h) {
  check_hidden(W, h, "query_latent");
  Mat<T> cQ(h.rows(), W.cfg.q_lora_rank);
  gemm_nt<T>(h, W.W_DQ, cQ);
  for (int64_t b = 0; b < cQ.rows(); ++b) rms_norm_inplace(cQ.row(b).data(), W.q_norm.data(), cQ.cols(), W.cfg.rms_eps);
  return cQ;
}

// q^C = W_UQ c^Q: [B, H * nope], head h in columns [h * nope, (h + 1) * nope).
template <class T>
Mat<T> query_nope(const Weights<T>& W, const Mat<T>& cQ) {
  Mat<T> q(cQ.rows(), W.cfg.n_heads * W.cfg.qk_nope);
  gemm_nt<T>(cQ, W.W_UQ, q);
  return q;
}

// q^R = RoPE(W_QR c^Q) at q_pos[b]: [B, H * rope].
template <class T>
Mat<T> query_rope(const Weights<T>& W, const Mat<T>& cQ, const std::vector<int64_t>& q_pos,
                  RopeLayout layout = RopeLayout::HalfSplit) {
  const Config& c = W.cfg;
  require(static_cast<int64_t>(q_pos.size()) == cQ.rows(), "mla query_rope: q_pos.size = {} violates == B = {}",
          q_pos.size(), cQ.rows());
  Mat<T> q(cQ.rows(), c.n_heads * c.qk_rope);
  gemm_nt<T>(cQ, W.W_QR, q);
  for (int64_t b = 0; b < q.rows(); ++b) {
    require(q_pos[b] >= 0, "mla query_rope: q_pos[{}] = {} violates q_pos >= 0", b, q_pos[b]);
    const RopeAngles<T> r = rope_angles<T>(c.qk_rope, q_pos[b], c.rope_theta);  // once per query, not per head
    for (int64_t hd = 0; hd < c.n_heads; ++hd) rope_apply(&q(b, hd * c.qk_rope), c.qk_rope, r, layout);
  }
  return q;
}

// The compressed cache rows of tokens h [n, hidden] at positions pos[n]: [n, kv_lora + rope] =
// [RMSNorm(c^KV) | RoPE(k^R)] (the CC cache of the notes: "[kv_a_layernorm(c_kv) | RoPE(k_pe)]").
// Only the input generator (synthetic.hpp) calls it, and the goldens store its float32 rows: the
// product runs in the fixed order of ladder/core/gemm.hpp for float too, since Eigen's float GEMM
// fuses multiply-adds wherever the target has FMA (-march=native) and the rows would change bits.
template <class T>
Mat<T> kv_entries(const Weights<T>& W, const Mat<T>& h, const std::vector<int64_t>& pos) {
  const Config& c = W.cfg;
  check_hidden(W, h, "kv_entries");
  require(W.W_DKV.rows() == c.kv_dim() && W.kv_norm.size() == c.kv_lora_rank,
          "mla kv_entries: weights.W_DKV [{}, {}] and kv_norm [{}] violate [kv_lora + rope, hidden], [kv_lora]: the "
          "cache rows need them", W.W_DKV.rows(), W.W_DKV.cols(), W.kv_norm.size());
  require(static_cast<int64_t>(pos.size()) == h.rows(), "mla kv_entries: pos.size = {} violates == h.rows = {}",
          pos.size(), h.rows());
  Mat<T> kv(h.rows(), c.kv_dim());
  count_macs(h.rows(), c.kv_dim(), h.cols());
  gemm_fixed_order<T>(h.rows(), c.kv_dim(), h.cols(), T(1), h.data(), h.cols(), Op::N, W.W_DKV.data(),
                      W.W_DKV.cols(), Op::T, kv.data(), kv.cols(), false);  // c^KV | k^R = h W_DKV^T
  for (int64_t t = 0; t < kv.rows(); ++t) {
    require(pos[t] >= 0, "mla kv_entries: pos[{}] = {} violates pos >= 0", t, pos[t]);
    rms_norm_inplace(&kv(t, 0), W.kv_norm.data(), c.kv_lora_rank, c.rms_eps);
    rope_inplace(&kv(t, c.kv_lora_rank), c.qk_rope, pos[t], c.rope_theta);
  }
  return kv;
}

}  // namespace ladder::mla
