// ladder/03-mla/model.hpp -- stage 03: the weights of one MLA layer and a seeded random draw of them.
//
// Notation of the notes (the MLA notes' "MLA模块的计算过程", lecture notes §5.2 Fig. 10) with
// DeepSeek-V2's tensor names beside (its modeling_deepseek.py, as deepseekv2-profile uses them); every
// matrix is an nn.Linear weight [out, in], so y = W x is gemm_nt(x, W):
//   W_DQ    [q_lora, hidden]            q_a_proj:      c^Q = W_DQ h
//   q_norm  [q_lora]                    q_a_layernorm  (RMSNorm gain)
//   W_UQ    [H * nope, q_lora]          q_b_proj rows of the nope parts:  q^C = W_UQ c^Q
//   W_QR    [H * rope, q_lora]          q_b_proj rows of the rope parts:  q^R = RoPE(W_QR c^Q)
//           (q_b_proj [H * 192, q_lora] interleaves them per head as [nope 128 | rope 64]; we keep the
//           notes' two matrices, which AM needs apart anyway)
//   W_DKV   [kv_lora + rope, hidden]    kv_a_proj_with_mqa = [W^DKV; W^KR]: [c^KV | k^R] = W_DKV h
//   kv_norm [kv_lora]                   kv_a_layernorm (on c^KV only; k^R is not normed)
//   kv_b    [H * (nope + v), kv_lora]   kv_b_proj: head h's rows [h*(nope+v), h*(nope+v) + nope) are
//           W_UK (q_absorb in the notes' code) and the next v rows are W_UV (out_absorb)
//   W_O     [hidden, H * v]             o_proj:        u = W_O [o_1; ...; o_H]
#pragma once
#include <cmath>
#include <cstdint>

#include "ladder/core/huge_pages.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/03-mla/config.hpp"

namespace ladder::mla {

template <class T>
struct Weights {
  Config cfg;
  Mat<T> W_DQ, W_UQ, W_QR, W_DKV, kv_b, W_O;
  Vec<T> q_norm, kv_norm;

  // Head h's W_UK [nope, kv_lora] and W_UV [v, kv_lora], views into kv_b.
  auto W_UK(int64_t h) const { return kv_b.middleRows(h * cfg.kv_b_rows(), cfg.qk_nope); }
  auto W_UV(int64_t h) const { return kv_b.middleRows(h * cfg.kv_b_rows() + cfg.qk_nope, cfg.v_head); }

  template <class U>
  Weights<U> cast() const {
    Weights<U> w;
    w.cfg = cfg;
    w.W_DQ = W_DQ.template cast<U>();
    w.W_UQ = W_UQ.template cast<U>();
    w.W_QR = W_QR.template cast<U>();
    w.W_DKV = W_DKV.template cast<U>();
    w.kv_b = kv_b.template cast<U>();
    w.W_O = W_O.template cast<U>();
    w.q_norm = q_norm.template cast<U>();
    w.kv_norm = kv_norm.template cast<U>();
    return w;
  }

  // Number of parameters of the layer's attention (every matrix and gain above).
  int64_t params() const {
    return W_DQ.size() + W_UQ.size() + W_QR.size() + W_DKV.size() + kv_b.size() + W_O.size() + q_norm.size() +
           kv_norm.size();
  }
};

// Checks that every matrix has the shape cfg implies (weights loaded from files go through this).
template <class T>
void check_weights(const Weights<T>& w, const char* who) {
  const Config& c = w.cfg;
  check_config(c, who);
  auto shape = [who](const char* name, int64_t r, int64_t k, int64_t want_r, int64_t want_k) {
    require(r == want_r && k == want_k, "mla {}: weights.{} is [{}, {}] where config implies [{}, {}]", who, name, r,
            k, want_r, want_k);
  };
  shape("W_DQ", w.W_DQ.rows(), w.W_DQ.cols(), c.q_lora_rank, c.hidden);
  shape("W_UQ", w.W_UQ.rows(), w.W_UQ.cols(), c.n_heads * c.qk_nope, c.q_lora_rank);
  shape("W_QR", w.W_QR.rows(), w.W_QR.cols(), c.n_heads * c.qk_rope, c.q_lora_rank);
  // W_DKV and kv_norm form the cache rows (kv_entries) and nothing else: a decode step that is given the
  // cache may leave them empty (the 03-mla contract's optional inputs); given, they must fit.
  if (w.W_DKV.size()) shape("W_DKV", w.W_DKV.rows(), w.W_DKV.cols(), c.kv_dim(), c.hidden);
  shape("kv_b", w.kv_b.rows(), w.kv_b.cols(), c.n_heads * c.kv_b_rows(), c.kv_lora_rank);
  shape("W_O", w.W_O.rows(), w.W_O.cols(), c.hidden, c.n_heads * c.v_head);
  shape("q_norm", w.q_norm.size(), 1, c.q_lora_rank, 1);
  if (w.kv_norm.size()) shape("kv_norm", w.kv_norm.size(), 1, c.kv_lora_rank, 1);
}

// Seeded weights at float32 precision (the goldens store them as <f4; the fp64 oracle runs on the same
// values cast to double). Entries are N(0, 1/fan_in), so each projection keeps unit-variance inputs at
// unit variance and the scores q.k * scale stay O(1); RMSNorm gains are U(0.5, 1.5) so a gain applied
// to the wrong vector shows. Drawn in a fixed order (W_DQ, q_norm, W_UQ, W_QR, W_DKV, kv_norm, kv_b,
// W_O), row by row, from ladder::Rng(seed).
inline Weights<float> random_weights(const Config& cfg, uint64_t seed) {
  check_config(cfg, "random_weights");
  Rng rng(seed);
  auto draw = [&rng](int64_t rows, int64_t cols) {
    Mat<float> m(rows, cols);  // uninitialised: advised for huge pages before the fill touches it
    advise_huge_pages(m.data(), static_cast<size_t>(m.size()) * sizeof(float));
    const double sd = 1.0 / std::sqrt(static_cast<double>(cols));
    for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(sd * rng.normal());
    return m;
  };
  auto gain = [&rng](int64_t n) {
    Vec<float> g(n);
    for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(rng.uniform(0.5, 1.5));
    return g;
  };
  Weights<float> w;
  w.cfg = cfg;
  w.W_DQ = draw(cfg.q_lora_rank, cfg.hidden);
  w.q_norm = gain(cfg.q_lora_rank);
  w.W_UQ = draw(cfg.n_heads * cfg.qk_nope, cfg.q_lora_rank);
  w.W_QR = draw(cfg.n_heads * cfg.qk_rope, cfg.q_lora_rank);
  w.W_DKV = draw(cfg.kv_dim(), cfg.hidden);
  w.kv_norm = gain(cfg.kv_lora_rank);
  w.kv_b = draw(cfg.n_heads * cfg.kv_b_rows(), cfg.kv_lora_rank);
  w.W_O = draw(cfg.hidden, cfg.n_heads * cfg.v_head);
  return w;
}

}  // namespace ladder::mla
