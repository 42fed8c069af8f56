// ref/src/03-mla/flashmla_rows.hpp -- internal to the FlashMLA layouts (flashmla.cpp, flashmla_sparse.cpp): the
// attention of query tokens over lists of cache rows, one list per token. Dense decode lists rows 0 .. L-1 of a
// sequence through its block_table; sparse decode and sparse prefill list the rows their indices name, in index
// order, duplicates as often as they occur (FlashMLA gathers kv[indices]: README "Sparse MLA Prefill" and
// tests/ref.py, index_select then softmax over topk entries), invalid entries left out. A token whose list is empty (every
// index invalid, or topk_length 0) gets o = 0 and lse = +inf, max_logits = -inf (FlashMLA tests/ref.py: "Correct for q
// tokens which has no attendable k", lonely_q_mask). An attention sink (one logit per head, natural-log units) scales o
// by e^lse / (e^lse + e^sink) and leaves lse and max_logits as they are (flash_mla_interface.py, attn_sink docstrings;
// tests/ref.py multiplies o by 1 / (1 + exp(sink - lse))).
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "ladder/03-mla/flash.hpp"
#include "ladder/03-mla/flashmla.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::mla::flashmla_detail {

// The cache rows [rows, d]: `exact` as the oracle reads them (float32 inputs widened; an FP8 record dequantised
// as code x scale in double, exact: a 4-bit E4M3 significand times a 24-bit float32 one fits in 53 bits; bf16
// RoPE values exactly), `f32` as a float32 kernel reads them (an FP8 record: fl32(code x scale)).
struct Pool {
  int64_t rows = 0, d = 0;
  std::vector<double> exact;
  std::vector<float> f32;
  template <class T>
  const T* row(int64_t i) const {
    if constexpr (std::is_same_v<T, double>) return &exact[static_cast<size_t>(i * d)];
    else return &f32[static_cast<size_t>(i * d)];
  }
};

// N query tokens of H heads of q [N, H, D] (float32), attending over rows[n] of the pool; V = a row's first R dims.
struct Query {
  const float* q = nullptr;
  int64_t N = 0, H = 0, D = 0, R = 0;
  double scale = 0;
  std::vector<std::vector<int64_t>> rows;  // [N][listed rows]
  std::vector<double> sink;                // [H] attention sink logits (empty: none)
};

template <class T>
struct Attn {
  Array<T> o, lse, mx;  // [N, H, R]; [N, H] natural-log lse; [N, H] the largest scaled score
};

// One query token's listed rows, shared by sparse decode and sparse prefill: entries 0 .. used - 1 of its indices e
// (used = topk_length, or all with bug topk_length_ignored), in order, duplicates kept; invalid(k, v) says an entry is
// invalid (and may refuse one with an error); bug invalid_as_row0 reads an invalid entry as row 0, bug dedup skips a
// repeat. Empty: a lonely token.
template <class Invalid>
std::vector<int64_t> listed_rows(const int64_t* e, int64_t used, const Invalid& invalid, FlashMlaBug bug) {
  std::vector<int64_t> rows;
  for (int64_t k = 0; k < used; ++k) {
    int64_t v = e[k];
    const bool bad = invalid(k, v);
    if (bad && bug == FlashMlaBug::invalid_as_row0) v = 0;
    else if (bad) continue;
    if (bug == FlashMlaBug::dedup && std::find(rows.begin(), rows.end(), v) != rows.end()) continue;
    rows.push_back(v);
  }
  return rows;
}

// case.json "params": a number or a boolean, `fallback` when absent; `who` names the contract in the error.
inline double param_num(const nlohmann::json& p, const char* name, double fallback, const char* who) {
  if (!p.is_object() || !p.contains(name)) return fallback;
  require(p.at(name).is_number(), "{}: param {} = {} violates type number", who, name, p.at(name).dump());
  return p.at(name).get<double>();
}

inline bool param_bool(const nlohmann::json& p, const char* name, bool fallback, const char* who) {
  if (!p.is_object() || !p.contains(name)) return fallback;
  require(p.at(name).is_boolean(), "{}: param {} = {} violates type boolean", who, name, p.at(name).dump());
  return p.at(name).get<bool>();
}

// The optional input topk_length ([b] in decode, [s_q] in prefill; FlashMLA: only the leftmost topk_length[i] indices
// are processed): empty when absent, else each entry checked 0 <= entry <= topk.
inline std::vector<int64_t> topk_lengths(const Tensors& t, const char* who, const char* shape, int64_t n, int64_t topk) {
  if (!t.count("topk_length")) return {};
  const Array<int64_t> len = npy_as_int64(t.at("topk_length"), "input topk_length");
  require(len.shape == std::vector<int64_t>{n}, "{}: input topk_length has shape {}, violates {} = [{}]", who,
          shape_str(len.shape), shape, n);
  for (int64_t i = 0; i < n; ++i)
    require(len.data[i] >= 0 && len.data[i] <= topk, "{}: input topk_length[{}] = {} violates 0 <= topk_length <= topk "
            "= {}", who, i, len.data[i], topk);
  return len.data;
}

// The optional input attn_sink [h_q] (float32 logits, natural-log units; +inf allowed: o = 0; NaN refused).
inline std::vector<double> sinks(const Tensors& t, const char* who, int64_t h_q) {
  if (!t.count("attn_sink")) return {};
  const Array<float> s = from_npy<float>(t.at("attn_sink"), "input attn_sink");
  require(s.shape == std::vector<int64_t>{h_q}, "{}: input attn_sink has shape {}, violates [h_q = {}]", who,
          shape_str(s.shape), h_q);
  for (int64_t h = 0; h < h_q; ++h)
    require(!std::isnan(s.data[h]), "{}: input attn_sink[{}] is NaN, violates a number or +-inf", who, h);
  return {s.data.begin(), s.data.end()};
}

// The case writers' optional inputs: topk_length [n] (entry i = topk / 2 + i % (topk / 2), below topk) and attn_sink
// [h_q] (head 0 -inf: no effect, head 1 +inf: o = 0, the others about the size of an lse, so the scaling shows).
inline void extra_inputs(Tensors& t, Rng& rng, bool topk_length, bool sink, int64_t n, int64_t topk, int64_t h_q) {
  if (topk_length) {
    Array<int32_t> len({n});
    for (int64_t i = 0; i < n; ++i) len.data[i] = static_cast<int32_t>(std::max<int64_t>(1, topk / 2 + i % (topk / 2 + 1)));
    for (int32_t& v : len.data) v = std::min<int32_t>(v, static_cast<int32_t>(topk - 1));
    t["topk_length"] = to_npy(len);
  }
  if (sink) {
    Array<float> a({h_q});
    for (float& v : a.data) v = static_cast<float>(4.0 + 2.0 * rng.normal());
    a.data[0] = -std::numeric_limits<float>::infinity();
    if (h_q > 1) a.data[1] = std::numeric_limits<float>::infinity();
    t["attn_sink"] = to_npy(a);
  }
}

// The lonely_nan bug: a port dividing by an empty sum writes o = 0/0 = NaN and lse = log 0 = -inf for a lonely token.
template <class T>
void plant_lonely_nan(const Query& qy, Attn<T>& a) {
  for (int64_t n = 0; n < qy.N; ++n)
    if (qy.rows[n].empty()) {
      std::fill_n(&a.o.data[n * qy.H * qy.R], qy.H * qy.R, std::numeric_limits<T>::quiet_NaN());
      std::fill_n(&a.lse.data[n * qy.H], qy.H, -std::numeric_limits<T>::infinity());
    }
}

// The share of the softmax mass the sink leaves to the rows: e^lse / (e^lse + e^sink) = 1 / (1 + e^{sink - lse});
// sink +inf gives 0, -inf gives 1.
template <class T>
T sink_factor(const Query& qy, int64_t h, T lse) {
  if (qy.sink.empty()) return T(1);
  return T(1) / (T(1) + std::exp(static_cast<T>(qy.sink[static_cast<size_t>(h)]) - lse));
}

// A token with no row to attend: o = 0 (already), lse = +inf, max_logits = -inf (FlashMLA's lonely query token).
template <class T>
void set_lonely(Attn<T>& a, int64_t n, int64_t H) {
  for (int64_t h = 0; h < H; ++h)
    a.lse.data[n * H + h] = std::numeric_limits<T>::infinity(), a.mx.data[n * H + h] = -std::numeric_limits<T>::infinity();
}

// FlashMLA's cos_diff over the positions where the oracle is finite (a lonely token's +inf lse is judged exactly by the
// rule; FlashMLA's tests mask it out of their metric the same way).
inline double finite_cos_diff(const Array<double>& x, const Array<double>& e) {
  double xy = 0, xx_yy = 0;
  for (size_t i = 0; i < e.data.size() && i < x.data.size(); ++i)
    if (std::isfinite(e.data[i])) xy += x.data[i] * e.data[i], xx_yy += x.data[i] * x.data[i] + e.data[i] * e.data[i];
  return 1.0 - 2.0 * xy / std::max(xx_yy, 1e-12);
}

// The oracle's form (stage 03's, mla.hpp): scaled scores over the listed rows, lse by logsumexp_rows, o = sum_j
// e^{s_j - lse} row_j[:R] in list order; at T = double the fp64 oracle, at T = float the float32 baseline.
template <class T>
Attn<T> attend_rows(const Query& qy, const Pool& pool) {
  const int64_t N = qy.N, H = qy.H, D = qy.D, R = qy.R;
  std::vector<int64_t> lens(static_cast<size_t>(N));
  int64_t Lmax = 1;
  for (int64_t n = 0; n < N; ++n) lens[n] = static_cast<int64_t>(qy.rows[n].size()), Lmax = std::max(Lmax, lens[n]);
  const T scale = static_cast<T>(qy.scale);
  Array<T> scores({N, H, Lmax});
  std::fill(scores.data.begin(), scores.data.end(), -std::numeric_limits<T>::infinity());
  Attn<T> a{Array<T>({N, H, R}), Array<T>({N, H}), Array<T>({N, H})};
  std::fill(a.mx.data.begin(), a.mx.data.end(), -std::numeric_limits<T>::infinity());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < lens[n]; ++j) {
      const T* row = pool.row<T>(qy.rows[n][j]);
      for (int64_t h = 0; h < H; ++h) {
        const float* q = &qy.q[(n * H + h) * D];
        T dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += static_cast<T>(q[k]) * row[k];
        scores.data[(n * H + h) * Lmax + j] = scale * dot;
        a.mx.data[n * H + h] = std::max(a.mx.data[n * H + h], scale * dot);
      }
    }
  a.lse = logsumexp_rows(scores, lens);
  std::fill(a.o.data.begin(), a.o.data.end(), T(0));
  for (int64_t n = 0; n < N; ++n) {
    if (lens[n] == 0) {
      set_lonely(a, n, H);
      continue;
    }
    for (int64_t h = 0; h < H; ++h) {
      const T l = a.lse.data[n * H + h];
      T* out = &a.o.data[(n * H + h) * R];
      for (int64_t j = 0; j < lens[n]; ++j) {
        const T w = std::exp(scores.data[(n * H + h) * Lmax + j] - l);
        const T* row = pool.row<T>(qy.rows[n][j]);
        for (int64_t r = 0; r < R; ++r) out[r] += w * row[r];
      }
      if (!qy.sink.empty())
        for (int64_t r = 0; r < R; ++r) out[r] *= sink_factor<T>(qy, h, l);
    }
  }
  return a;
}

// A float64 candidate's allowance for attend_rows' outputs (flashmla_bound.cpp, the derivation): per element of o, lse
// and mx, the oracle's error bound plus a candidate's. base2: the candidate may scale its scores by sm_scale x log2 e
// (sparse prefill); to_base2 then turns the lse and mx bounds into those of the base-2 outputs (the oracle's values).
Attn<double> rows_allowance(const Query& qy, const Pool& pool, bool base2);
void to_base2(Attn<double>& bound, const Array<double>& lse2, const Array<double>& max_logits);

// A candidate computed another way: stage 03's flash_mla rung (flash.hpp) per query token on its listed rows gathered
// into pages of 64, split-KV over split_blocks pages at a time, the splits merged by lse. The sink enters as one more
// split (o = 0, lse = sink) in the merge of o, not in the lse returned. At T = float a float32 kernel (the cache rows as
// it reads them), at T = double a float64 one (the rows as the oracle reads them; online softmax, other sums).
template <class T>
Attn<T> flash_rows(const Query& qy, const Pool& pool, int64_t split_blocks) {
  const int64_t N = qy.N, H = qy.H, D = qy.D, R = qy.R, bs = kBlockSize;
  Config cfg;
  cfg.n_heads = H, cfg.kv_lora_rank = R, cfg.qk_rope = D - R, cfg.qk_nope = R, cfg.softmax_scale = qy.scale;
  Attn<T> a{Array<T>({N, H, R}), Array<T>({N, H}), Array<T>({N, H})};
  const T scale = static_cast<T>(qy.scale);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t L = static_cast<int64_t>(qy.rows[n].size()), W = blocks_for(L, bs);
    if (L == 0) {
      set_lonely(a, n, H);
      continue;
    }
    PagedCache<T> c;
    c.blocks = Array<T>({W, bs, D});
    c.block_table = Array<int32_t>({1, W});
    for (int64_t p = 0; p < W; ++p) c.block_table.data[p] = static_cast<int32_t>(p);
    c.seqlens = {L};
    for (int64_t j = 0; j < L; ++j) std::copy_n(pool.row<T>(qy.rows[n][j]), D, &c.blocks.data[j * D]);
    const int64_t splits = (W + split_blocks - 1) / split_blocks;
    std::vector<T> o_parts(static_cast<size_t>(splits * H * R)), lse_parts(static_cast<size_t>(splits * H));
    const std::vector<T> qn(&qy.q[n * H * D], &qy.q[(n + 1) * H * D]);
    const ConstMatMap<T> Q(qn.data(), H, D);
    for (int64_t s = 0; s < splits; ++s) {
      const int64_t j0 = s * split_blocks * bs, j1 = std::min(L, j0 + split_blocks * bs);
      flash_split(cfg, Q, c, 0, j0, j1, &o_parts[s * H * R], &lse_parts[s * H]);
    }
    flash_combine(splits, H, R, o_parts.data(), lse_parts.data(), &a.o.data[n * H * R], &a.lse.data[n * H]);
    if (!qy.sink.empty()) {  // the sink as a split of its own: no rows (o = 0), lse = the sink logit
      o_parts.resize(static_cast<size_t>((splits + 1) * H * R), T(0)), lse_parts.resize(static_cast<size_t>((splits + 1) * H));
      for (int64_t h = 0; h < H; ++h) lse_parts[splits * H + h] = static_cast<T>(qy.sink[static_cast<size_t>(h)]);
      std::fill(o_parts.begin() + splits * H * R, o_parts.end(), T(0));
      std::vector<T> lse_sink(static_cast<size_t>(H));
      flash_combine(splits + 1, H, R, o_parts.data(), lse_parts.data(), &a.o.data[n * H * R], lse_sink.data());
      for (int64_t h = 0; h < H; ++h)  // a +inf sink takes all the mass (the merge itself would give inf - inf)
        if (qy.sink[static_cast<size_t>(h)] == std::numeric_limits<double>::infinity())
          std::fill_n(&a.o.data[(n * H + h) * R], R, T(0));
    }
    for (int64_t h = 0; h < H; ++h) {
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < L; ++j) {
        const T* row = &c.blocks.data[j * D];
        T dot = 0;
        for (int64_t k = 0; k < D; ++k) dot += qn[h * D + k] * row[k];
        m = std::max(m, scale * dot);
      }
      a.mx.data[n * H + h] = m;
    }
  }
  return a;
}

}  // namespace ladder::mla::flashmla_detail
