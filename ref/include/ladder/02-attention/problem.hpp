// ladder/02-attention/problem.hpp -- stage 02: the shape every attention rung shares, the causal rule,
// tile sizes, and the traffic counter of the tiled rungs.
//
//   01 softmax     naive -> safe -> online
// > 02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward   <- this stage
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Layout: Q, dQ are [B, H, Nq, d]; K, dK are [B, H_kv, Nk, d]; V, dV are [B, H_kv, Nk, d_v]; O, dO are
// [B, H, Nq, d_v]; L, m, D are [B, H, Nq]; all row-major, so head (b, h) is the contiguous block starting
// at row (b * H + h) * N. H_kv = H and d_v = d except in the shapes only the oracle checks (below).
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ladder/core/error.hpp"

namespace ladder::attention {

// One attention call: batch B, heads H, Nq query rows, Nk key/value rows, head dim d.
// S = scale Q K^T. causal: query i attends key j iff j <= i + (Nk - Nq), the mask aligned to the
// bottom-right corner as in FlashAttention-2 (>= 2.1): the last query sees every key, so a decode
// step (Nq = 1) sees the whole cache, and when Nq > Nk the first Nq - Nk rows see no key at all.
//
// Shapes only the oracle (naive) checks; every other rung refuses them (check_problem names the constraint):
//   * GQA / MQA: H_kv key/value heads (0: H), H % H_kv == 0; query head h reads kv head h / (H / H_kv),
//     FlashAttention's convention (flash_attn_func: "If Q, K, V have different number of heads, heads of
//     Q 0, 1, 2 attend to head 0 of K, V; 3, 4, 5 to head 1"). dK, dV sum over the group's query heads.
//   * d_v: the value head dim (0: d): V [B, H_kv, Nk, d_v], O [B, H, Nq, d_v] (MLA prefill: d = 192, d_v = 128).
//   * a sliding window, FlashAttention's window_size = (left, right), -1 unbounded, bottom-right aligned:
//     key j is visible to query i iff i + Nk - Nq - left <= j <= i + Nk - Nq + right; causal is right = 0.
//   * seqlens [B] (flash_attn_with_kvcache's cache_seqlens): batch row b has n_b keys; keys j >= n_b are
//     masked and every rule above is aligned with n_b in place of Nk. Empty: n_b = Nk.
struct Problem {
  int64_t B = 1, H = 1, Nq = 1, Nk = 1, d = 1;
  double scale = 1.0;
  bool causal = false;
  int64_t H_kv = 0, dv = 0;
  int64_t window_left = -1, window_right = -1;
  std::vector<int64_t> seqlens = {};

  // The usual scale 1/sqrt(d) (Vaswani et al. 2017).
  static Problem make(int64_t B, int64_t H, int64_t Nq, int64_t Nk, int64_t d, bool causal = false) {
    Problem p;
    p.B = B, p.H = H, p.Nq = Nq, p.Nk = Nk, p.d = d, p.causal = causal;
    p.scale = d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0;
    return p;
  }
  int64_t heads() const { return B * H; }
  int64_t kv_heads() const { return H_kv > 0 ? H_kv : H; }
  int64_t group() const { return H / kv_heads(); }  // query heads per kv head
  int64_t dim_v() const { return dv > 0 ? dv : d; }
  int64_t keys(int64_t b) const { return seqlens.empty() ? Nk : seqlens[static_cast<size_t>(b)]; }
  int64_t right() const { return causal ? 0 : window_right; }  // -1: unbounded
  // True for the shape every rung computes: H_kv = H, d_v = d, no window, no per-sequence lengths.
  bool plain() const {
    return kv_heads() == H && dim_v() == d && window_left < 0 && window_right < 0 && seqlens.empty();
  }
  // The last key query row i (of batch row b) may attend; < first_key(i, b) means the row is fully masked.
  int64_t last_key(int64_t i, int64_t b = 0) const {
    const int64_t n = keys(b);
    return right() < 0 ? n - 1 : std::min(n - 1, i + n - Nq + right());
  }
  int64_t first_key(int64_t i, int64_t b = 0) const {
    return window_left < 0 ? 0 : std::max<int64_t>(0, i + keys(b) - Nq - window_left);
  }
  // The first query row that may attend key j (rows before it are masked for j); plain problems only.
  int64_t first_row(int64_t j) const { return causal ? std::max<int64_t>(0, j - (Nk - Nq)) : 0; }
};

// Every rung calls this first: sizes positive, scale finite, the optional shapes consistent. A fully
// masked row is not an error: it is defined as O = 0, L = m = -inf and zero gradients (see attention.hpp).
// Only the naive rung (the oracle) passes general = true: every other rung computes plain problems only,
// and is refused the others by name rather than computing garbage.
inline void check_problem(const Problem& p, const char* rung, bool general = false) {
  require(p.B >= 1, "attention {}: B = {} violates B >= 1", rung, p.B);
  require(p.H >= 1, "attention {}: H = {} violates H >= 1", rung, p.H);
  require(p.Nq >= 1, "attention {}: Nq = {} violates Nq >= 1", rung, p.Nq);
  require(p.Nk >= 1, "attention {}: Nk = {} violates Nk >= 1", rung, p.Nk);
  require(p.d >= 1, "attention {}: d = {} violates d >= 1", rung, p.d);
  require(std::isfinite(p.scale), "attention {}: scale = {} violates scale finite", rung, p.scale);
  require(p.H_kv >= 0, "attention {}: H_kv = {} violates H_kv >= 1 (0: H_kv = H_q)", rung, p.H_kv);
  require(p.H % p.kv_heads() == 0, "attention {}: H_q = {}, H_kv = {} violates H_q % H_kv == 0", rung, p.H,
          p.kv_heads());
  require(p.dv >= 0, "attention {}: d_v = {} violates d_v >= 1 (0: d_v = d)", rung, p.dv);
  require(p.window_left >= -1 && p.window_right >= -1,
          "attention {}: window_size = ({}, {}) violates left, right >= -1 (-1: unbounded)", rung, p.window_left,
          p.window_right);
  require(!p.causal || p.window_right <= 0,
          "attention {}: causal with window_size right = {} violates right in {{-1, 0}} (causal is right = 0)", rung,
          p.window_right);
  require(p.seqlens.empty() || static_cast<int64_t>(p.seqlens.size()) == p.B,
          "attention {}: seqlens has {} entries, violates one per batch row (B = {})", rung, p.seqlens.size(), p.B);
  for (size_t b = 0; b < p.seqlens.size(); ++b)
    require(p.seqlens[b] >= 0 && p.seqlens[b] <= p.Nk, "attention {}: seqlens[{}] = {} violates 0 <= seqlens[b] <= Nk = {}",
            rung, b, p.seqlens[b], p.Nk);
  if (general) return;
  require(p.kv_heads() == p.H, "attention {}: H_q = {}, H_kv = {} violates H_q == H_kv (GQA / MQA: naive only)", rung,
          p.H, p.kv_heads());
  require(p.dim_v() == p.d, "attention {}: d = {}, d_v = {} violates d_v == d (naive only)", rung, p.d, p.dim_v());
  require(p.window_left < 0 && p.window_right < 0,
          "attention {}: window_size = ({}, {}) violates no window (-1, -1) (sliding windows: naive only)", rung,
          p.window_left, p.window_right);
  require(p.seqlens.empty(), "attention {}: seqlens given violates no per-sequence lengths (naive only)", rung);
}

template <class... P>
void check_pointers(const char* rung, P... ptrs) {
  require(((ptrs != nullptr) && ...), "attention {}: null input or output pointer", rung);
}

// ---- tiles ------------------------------------------------------------------------------------

// Br query rows x Bc key rows per tile (notes §3.7; FlashAttention's notation).
struct Tiles {
  int64_t Br = 0, Bc = 0;
};

inline void check_tiles(const Tiles& t) {
  require(t.Br >= 1, "attention tiled: Br = {} violates Br >= 1", t.Br);
  require(t.Bc >= 1, "attention tiled: Bc = {} violates Bc >= 1", t.Bc);
}

// FlashAttention-1's rule (Alg. 1, line 1) for an on-chip memory of M elements: Bc = ceil(M / 4d),
// Br = min(Bc, d). On a GPU the S tile lives in registers, which caps Br; used for the A100 model.
inline Tiles fa1_tiles(int64_t d, int64_t M) {
  require(d >= 1 && M >= 4 * d, "attention fa1_tiles: M = {} violates M >= 4d = {}", M, 4 * d);
  const int64_t Bc = (M + 4 * d - 1) / (4 * d);
  return Tiles{std::min(Bc, d), Bc};
}

// The CPU default. On-chip memory = one core's L2 (kOnChipBytes, 1 MiB on the machines this was tuned
// on). One tile step touches Q_i, O_i (Br x d each), K_j, V_j (Bc x d each) and S_ij (Br x Bc); with
// Br = Bc = B that is 4Bd + B^2 elements. We take the largest multiple of 16 that fits in M elements,
// at most 256. Why not FA1's Br = min(Bc, d): on a CPU the S tile is ordinary cached memory, and the
// two tile GEMMs (S = Q_i K_j^T, O_i += P V_j) need both sides >= ~128 to run near the GEMM rate;
// K and V are re-read once per query block, so a larger Br also cuts traffic. The cap of 256 keeps
// enough query blocks for the threads at N ~ 1k and is where the GEMM rate stops improving.
inline constexpr int64_t kOnChipBytes = int64_t{1} << 20;

inline Tiles cpu_tiles(int64_t d, int64_t M) {
  require(d >= 1, "attention cpu_tiles: d = {} violates d >= 1", d);
  require(M >= 1, "attention cpu_tiles: M = {} violates M >= 1", M);
  int64_t B = 16;
  for (int64_t b = 32; b <= 256; b += 16)
    if (4 * b * d + b * b <= M) B = b;
  return Tiles{B, B};
}

template <class T>
Tiles default_tiles(int64_t d) {
  return cpu_tiles(d, kOnChipBytes / static_cast<int64_t>(sizeof(T)));
}

// ---- counted traffic ---------------------------------------------------------------------------

// Elements moved between the "HBM" arrays (Q, K, V, O, L, ...) and the tile buffers (the "SRAM"),
// counted by the tiled rungs as they copy; tests check it against the Cost formula. Each task adds
// its own totals once, so the sums are exact and independent of the thread count.
struct Traffic {
  std::atomic<int64_t> read{0}, written{0};
  void add(int64_t r, int64_t w) {
    read += r;
    written += w;
  }
};

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

}  // namespace ladder::attention
