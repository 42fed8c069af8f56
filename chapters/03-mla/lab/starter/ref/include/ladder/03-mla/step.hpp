// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/03-mla/step.hpp -- stage 03: one decode step's inputs and outputs, the state a rung prepares, and
// the pieces the rungs share (scores -> softmax per row, the absorbed query, the output projections).
//
// A decode step (q_len 1): each of B sequences brings the hidden state h_b of its new token at
// position q_pos[b] (by default L_b - 1: the cache already holds the new token's own row, as in
// DeepSeek's code, where past_key_value.update runs before the attention). Every rung returns
// u [B, hidden] = W_O [o_1; ...; o_H] (notes: u = W^O o); rungs that materialise them also return the
// scores s = scale * q.k and the attention weights a = softmax(s) as [B, H, Lmax] (entries j >= L_b:
// s = -inf, a = 0); flash_mla returns lse = log sum_j e^{s_j} [B, H] instead.
// Each rung's step comes in two forms: decode_X(W, p, step) returns a new Output, and
// decode_X_into(W, p, step, out) writes into the caller's Output and reuses its storage (same bits).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes
#include "ladder/core/recycle.hpp"
#include "ladder/03-mla/cache.hpp"
#include "ladder/03-mla/gemm.hpp"
#include "ladder/03-mla/layers.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder::mla {

template <class T>
struct Step {
  Mat<T> h;                    // [B, hidden] the new tokens' hidden states
  std::vector<int64_t> q_pos;  // [B] their positions (RoPE)
};

// Working memory a rung keeps in the caller's Output between decode_into calls (flash_mla's per-split
// partials, 134 MB at B = 32, L = 4096), so a loop that decodes into one Output allocates it once. Not
// initialised (each rung writes what it reads); a copy of an Output starts without it. When it dies or
// grows, its buffer goes to the thread's bin (core/recycle.hpp), and it grows from there when it can.
template <class T>
struct Scratch {
  RawBuffer<T> buf;
  Scratch() = default;
  Scratch(const Scratch&) {}
  Scratch& operator=(const Scratch&) { return *this; }
  Scratch(Scratch&&) noexcept = default;
  Scratch& operator=(Scratch&& o) noexcept {  // swap: the old buffer dies with o, into the bin
    std::swap(buf, o.buf);
    return *this;
  }
  ~Scratch() { Recycler<T>::recycle(buf); }
  int64_t size() const { return buf.size; }
  T* get(int64_t n) {  // n elements; replaced only to grow
    if (n > buf.size) {
      Recycler<T>::recycle(buf);
      if (!Recycler<T>::reuse(buf, n)) buf = RawBuffer<T>{std::unique_ptr<T[]>(new T[static_cast<size_t>(n)]), n};
    }
    return buf.data.get();
  }
};

// One step's result. `decode` returns a new one every step; its large arrays (scores, attn [B, H, Lmax]:
// 64 MiB each at B = 32, L = 4096; the scratch) go to the thread's bin of buffers when it dies (core/
// recycle.hpp), and the next step's Output takes them from there (reset_output), so a loop of
// `out = decode(...)` or `{ Output o = decode(...); ... }` touches no fresh pages after its first steps.
// Move assignment swaps, so the assigned-over arrays die with the source (a temporary) into the bin.
template <class T>
struct Output {
  Mat<T> u;         // [B, hidden]
  Array<T> scores;  // [B, H, Lmax] or empty
  Array<T> attn;    // [B, H, Lmax] or empty
  Array<T> lse;     // [B, H] (flash_mla) or empty
  Scratch<T> scratch = {};  // not a result: a rung's working memory kept between decode_into calls

  Output() = default;
  Output(Mat<T> u_, Array<T> scores_ = {}, Array<T> attn_ = {}, Array<T> lse_ = {})  // as the aggregate's {u, ...}
      : u(std::move(u_)), scores(std::move(scores_)), attn(std::move(attn_)), lse(std::move(lse_)) {}
  Output(const Output&) = default;
  Output& operator=(const Output&) = default;
  Output(Output&&) noexcept = default;
  Output& operator=(Output&& o) noexcept {
    u.swap(o.u);
    std::swap(scores, o.scores);
    std::swap(attn, o.attn);
    std::swap(lse, o.lse);
    std::swap(scratch.buf, o.scratch.buf);
    return *this;
  }
  ~Output() {
    Recycler<T>::recycle(scores.data);
    Recycler<T>::recycle(attn.data);
  }
};

// AM's precomputed products (once per model): W_absQ [H * kv_lora, q_lora], W_absO [hidden, H * kv_lora].
template <class T>
struct Absorbed {
  Mat<T> W_absQ, W_absO;
};

// What a rung builds before its decode steps (its prepare function, outside the timed step).
template <class T>
struct Prepared {
  std::vector<int64_t> seqlens;  // [B]
  Array<T> kv;                   // CC, A_CC, A_CC_ME, AM: the contiguous compressed cache [B, Lmax, kv_dim]
  Array<T> K, V;                 // CD: [B, H, Lmax, nope + rope], [B, H, Lmax, v]
  PagedCache<T> paged;           // flash_mla: the paged cache, read in place
  std::shared_ptr<const Absorbed<T>> absorbed;  // AM (shared: one copy per model, not per cache)

  int64_t batch() const { return static_cast<int64_t>(seqlens.size()); }
  int64_t max_len() const {
    int64_t m = 0;
    for (int64_t L : seqlens) m = std::max(m, L);
    return m;
  }
};

// The default step of a cache: q_pos[b] = L_b - 1.
inline std::vector<int64_t> default_positions(const std::vector<int64_t>& seqlens) {
  std::vector<int64_t> p;
  for (int64_t L : seqlens) p.push_back(L - 1);
  return p;
}

template <class T>
void check_step(const Weights<T>& W, const Prepared<T>& p, const Step<T>& s, const char* who) {
  check_config(W.cfg, who);
  check_hidden(W, s.h, who);
  require(s.h.rows() == p.batch(), "mla {}: h.rows = {} violates h.rows == cache batch B = {}", who, s.h.rows(),
          p.batch());
  require(static_cast<int64_t>(s.q_pos.size()) == p.batch(), "mla {}: q_pos.size = {} violates == B = {}", who,
          s.q_pos.size(), p.batch());
}

// a = shape, every entry v; keeps a's storage when it is large enough (no allocation, no page faults), and
// fills in parallel when there is a lot to fill.
template <class T>
void refill(Array<T>& a, const Shape& shape, T v) {
  a.shape = shape;
  const int64_t n = numel(shape);
  if (static_cast<int64_t>(a.data.capacity()) < n && !Recycler<T>::reuse(a.data, n)) {
    a.data.assign(static_cast<size_t>(n), v);
    return;
  }
  a.data.resize(static_cast<size_t>(n));
  constexpr int64_t chunk = int64_t{1} << 20;
#pragma omp parallel for schedule(static) if (n > chunk)
  for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c)
    std::fill(a.data.begin() + c * chunk, a.data.begin() + std::min(n, (c + 1) * chunk), v);
}

// a = [B, H, Lmax] with entries j >= seqlens[b] of every row (b, h) equal to v. Entries j < L_b are
// left as they are: every rung writes all of them (scores, then attn = softmax(scores)), so filling
// them too would be a pass over the whole array for nothing (at B = 32, L = 4096 the two arrays are
// 128 MiB; the A_CC_ME step did not get measurably faster without it: 372-382 ms against 376-382,
// three alternating runs each on a 2-core Zen 4, within the noise). Fresh storage is filled whole,
// like refill. test_03_mla's decode_into case checks the tails over steps of different shapes.
template <class T>
void refill_tails(Array<T>& a, const std::vector<int64_t>& seqlens, int64_t H, int64_t Lmax, T v) {
  const int64_t B = static_cast<int64_t>(seqlens.size()), n = B * H * Lmax;
  if (static_cast<int64_t>(a.data.capacity()) < n && !Recycler<T>::reuse(a.data, n)) {
    refill(a, {B, H, Lmax}, v);
    return;
  }
  a.shape = {B, H, Lmax};
  a.data.resize(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 20))
  for (int64_t bh = 0; bh < B * H; ++bh)
    std::fill(a.data.begin() + bh * Lmax + std::min(Lmax, seqlens[static_cast<size_t>(bh / H)]),
              a.data.begin() + (bh + 1) * Lmax, v);
}

// Sizes out for a step: u [B, hidden]; scores = -inf and attn = 0 [B, H, Lmax] past each L_b (entries
// j < L_b are the rung's to write, refill_tails), or both empty; lse empty (flash_mla sets it). An
// Output passed again (decode_into) keeps its storage: a serving loop that decodes into the same Output
// every step allocates nothing after the first, where a fresh Output costs the kernel's zero-fill of
// 128 MiB of new pages per step at B = 32, L = 4096 (bench/03-mla/bench.cpp times both).
template <class T>
void reset_output(Output<T>& out, const Config& c, const std::vector<int64_t>& seqlens, int64_t Lmax, bool scores) {
  const int64_t B = static_cast<int64_t>(seqlens.size());
  out.u.resize(B, c.hidden);
  if (scores) {
    refill_tails(out.scores, seqlens, c.n_heads, Lmax, -std::numeric_limits<T>::infinity());
    refill_tails(out.attn, seqlens, c.n_heads, Lmax, T(0));
  } else {
    out.scores = Array<T>();
    out.attn = Array<T>();
  }
  out.lse = Array<T>();
}

template <class T>
Output<T> make_output(const Config& c, const std::vector<int64_t>& seqlens, int64_t Lmax, bool scores) {
  Output<T> out;
  reset_output(out, c, seqlens, Lmax, scores);
  return out;
}

// s[0, L) *= scale, then a = softmax(s) by the safe rung of stage 01 (ladder/01-softmax/softmax.hpp, notes Alg. 2).
template <class T>
void scale_and_softmax(T* s, T* a, int64_t L, T scale) {
  for (int64_t j = 0; j < L; ++j) s[j] *= scale;
  softmax::safe_row(s, a, L);
}

// q_abs_h = q^C_h W_UK(h) for every head (notes: einsum('hdc,bhid->bhic', q_absorb, q_nope)):
// [B, H * kv_lora] from q^C [B, H * nope].
template <class T>
Mat<T> absorb_query(const Weights<T>& W, const Mat<T>& q_nope) {
  const Config& c = W.cfg;
  Mat<T> q_abs(q_nope.rows(), c.n_heads * c.kv_lora_rank);
#pragma omp parallel for schedule(static)  // one region for all heads, not one per small product
  for (int64_t h = 0; h < c.n_heads; ++h)
    gemm_nn<T>(q_nope.middleCols(h * c.qk_nope, c.qk_nope), W.W_UK(h), q_abs.middleCols(h * c.kv_lora_rank, c.kv_lora_rank));
  return q_abs;
}

// o_h = W_UV(h) o^lat_h for every head (notes eq. (5): einsum('bhqc,hdc->bhqd', o_, W_UV)):
// [B, H * v] from the attention output in latent space o^lat [B, H * kv_lora].
template <class T>
LADDER_LAB_ENTRY Mat<T> absorb_output(const Weights<T>& W, const Mat<T>& o_lat) {
  const Config& c = W.cfg;
  Mat<T> o(o_lat.rows(), c.n_heads * c.v_head);
  // TODO(lab: absorb_output): o_h = o^lat_h W_UV(h)^T for every head h: one gemm_nt per head into o
  return o;
}

// u = W_O o (notes eq. (6)): [B, hidden] from o [B, H * v].
template <class T>
void output_projection(const Weights<T>& W, const Mat<T>& o, Mat<T>& u) {
  gemm_nt<T>(o, W.W_O, u);
}

}  // namespace ladder::mla
