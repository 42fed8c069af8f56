// ladder/03-mla/cost.hpp -- stage 03: FLOPs, cache bytes and traffic of one decode step of each rung, as
// formulas of the shape (core/cost.hpp's Cost).
//
// Conventions (the MLA notes' tables count this way: their numbers follow from these rules exactly):
//   * FLOPs = 2 x multiply-adds of the matrix products (projections, q.k, a.V); RMSNorm, RoPE, the
//     scale and the softmax are not counted (O(H L) beside O(H L d)). gemm.hpp counts the same
//     multiply-adds as the rungs run, and tests/03-mla/test_mla_cost.cpp checks count == formula.
//   * bytes = elements x elem_bytes (4 for our fp32 rungs; 2 = bf16 for the notes' tables);
//   * bytes_read: the inputs, each once -- the weights the step uses, the cache (L_b rows per
//     sequence), h; bytes_written: u. So the cache bytes per token are d(bytes_read)/dL at B = 1 and
//     the FLOPs per cached token d(flops)/dL: `ladder reproduce 03-mla` derives both from Cost.
//   * extra_bytes: scratch the rung materialises: scores and weights [B, H, L] (all but flash_mla),
//     CC's decompressed K and V, A_CC's key_states copy, flash_mla's split partials. On a GPU it also
//     travels through HBM; it is what runs out first (deepseekv2-profile's CSVs: max L at B = 32 on
//     the A100).
// DeepSeek-V2 per token per layer (exact, the notes' table): cache CD 128 (192 + 128) 2 = 81,920 B,
// the others (512 + 64) 2 = 1,152 B; FLOPs CD 2 128 192 + 2 128 128 = 81,920, CC 2 512 (128 256) +
// 81,920 = 33,636,352, A_CC / A_CC_ME (and AM, flash_mla) 2 128 (512 + 64) + 2 128 512 = 278,528.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ladder/core/cost.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/03-mla/config.hpp"
#include "ladder/03-mla/flash.hpp"

namespace ladder::mla {

enum class Variant { CD, CC, A_CC, A_CC_ME, AM, flash_mla };

// The registry's cost shape: {B, L, elem_bytes, hidden, H, q_lora, kv_lora, nope, rope, v}
// (every sequence of the batch at cache length L).
inline Shape cost_shape(const Config& c, int64_t B, int64_t L, int64_t elem_bytes = 4) {
  return {B, L, elem_bytes, c.hidden, c.n_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope, c.qk_rope, c.v_head};
}

struct CostShape {
  Config cfg;
  double B = 1, L = 1, e = 4;
};

inline CostShape parse_cost_shape(const Shape& s) {
  require(s.size() == 10, "mla cost: shape {} must be {{B, L, elem_bytes, hidden, H, q_lora, kv_lora, nope, rope, v}}",
          shape_str(s));
  require(s[0] >= 1, "mla cost: B = {} violates B >= 1", s[0]);
  require(s[1] >= 0, "mla cost: L = {} violates L >= 0", s[1]);
  require(s[2] >= 1, "mla cost: elem_bytes = {} violates elem_bytes >= 1", s[2]);
  CostShape r;
  r.cfg.hidden = s[3], r.cfg.n_heads = s[4], r.cfg.q_lora_rank = s[5], r.cfg.kv_lora_rank = s[6];
  r.cfg.qk_nope = s[7], r.cfg.qk_rope = s[8], r.cfg.v_head = s[9];
  check_config(r.cfg, "cost");
  r.B = static_cast<double>(s[0]), r.L = static_cast<double>(s[1]), r.e = static_cast<double>(s[2]);
  return r;
}

// Per-query FLOPs by where they go (the notes' AM argument: "201 + 671 vs 67 + 185 MFLOP").
struct QueryFlops {
  double q_down = 0;     // c^Q = W_DQ h
  double q_rope = 0;     // q^R = W_QR c^Q
  double q_nope = 0;     // the nope path to the scores: W_UQ (CD, CC); W_UQ then W_UK (absorbed); W_absQ (AM)
  double out = 0;        // to u: W_O (CD, CC); W_UV then W_O (absorbed); W_absO (AM)
  double total() const { return q_down + q_rope + q_nope + out; }
};

inline QueryFlops query_flops(Variant v, const Config& c) {
  const double H = static_cast<double>(c.n_heads), D = static_cast<double>(c.hidden);
  const double ql = static_cast<double>(c.q_lora_rank), R = static_cast<double>(c.kv_lora_rank);
  const double nope = static_cast<double>(c.qk_nope), rope = static_cast<double>(c.qk_rope);
  const double vd = static_cast<double>(c.v_head);
  QueryFlops f{2 * D * ql, 2 * ql * H * rope, 2 * ql * H * nope, 2 * H * vd * D};
  if (v == Variant::A_CC || v == Variant::A_CC_ME || v == Variant::flash_mla) {
    f.q_nope += 2 * H * nope * R;  // q_abs = q^C W_UK
    f.out += 2 * H * R * vd;       // o = W_UV o^lat
  } else if (v == Variant::AM) {
    f.q_nope = 2 * H * R * ql;  // q_abs = W_absQ c^Q
    f.out = 2 * D * H * R;      // u = W_absO o^lat
  }
  return f;
}

// FLOPs per cached token per step.
inline double flops_per_cached_token(Variant v, const Config& c) {
  const double H = static_cast<double>(c.n_heads), R = static_cast<double>(c.kv_lora_rank);
  const double cd = 2 * H * static_cast<double>(c.q_head()) + 2 * H * static_cast<double>(c.v_head);
  switch (v) {
    case Variant::CD: return cd;
    case Variant::CC: return 2 * R * H * static_cast<double>(c.kv_b_rows()) + cd;  // decompress, then CD
    default: return 2 * H * static_cast<double>(c.kv_dim()) + 2 * H * R;          // latent q.k and a.c
  }
}

// Cache elements per token: CD keeps K and V of every head, the others one compressed row.
inline double cache_elems_per_token(Variant v, const Config& c) {
  if (v == Variant::CD) return static_cast<double>(c.n_heads * (c.q_head() + c.v_head));
  return static_cast<double>(c.kv_dim());
}

// Weight elements the step reads (W_DKV runs at prefill, not in the step).
inline double weight_elems(Variant v, const Config& c) {
  const double H = static_cast<double>(c.n_heads), D = static_cast<double>(c.hidden);
  const double ql = static_cast<double>(c.q_lora_rank), R = static_cast<double>(c.kv_lora_rank);
  const double common = ql * D + ql + H * static_cast<double>(c.qk_rope) * ql;  // W_DQ, q_norm, W_QR
  const double w_uq = H * static_cast<double>(c.qk_nope) * ql, w_o = D * H * static_cast<double>(c.v_head);
  const double kv_b = H * static_cast<double>(c.kv_b_rows()) * R;
  switch (v) {
    case Variant::CD: return common + w_uq + w_o;
    case Variant::AM: return common + H * R * ql + D * H * R;  // W_absQ, W_absO
    default: return common + w_uq + kv_b + w_o;               // CC decompresses through kv_b too
  }
}

// Scratch elements (see the header).
inline double scratch_elems(Variant v, const Config& c, double B, double L) {
  const double H = static_cast<double>(c.n_heads), scores = 2 * B * H * L;
  switch (v) {
    case Variant::CC: return scores + B * H * L * static_cast<double>(c.q_head() + c.v_head);
    case Variant::A_CC: return scores + B * H * L * static_cast<double>(c.kv_dim());
    case Variant::flash_mla: {
      const double splits = static_cast<double>(num_splits(static_cast<int64_t>(L), kBlockSize, FlashParams{}));
      return B * splits * H * static_cast<double>(c.kv_lora_rank + 1);
    }
    default: return scores;
  }
}

inline Cost step_cost(Variant v, const Shape& shape) {
  const CostShape s = parse_cost_shape(shape);
  const Config& c = s.cfg;
  const double io = s.B * static_cast<double>(c.hidden) * s.e;  // h in, u out
  return Cost{s.B * (query_flops(v, c).total() + s.L * flops_per_cached_token(v, c)),
              weight_elems(v, c) * s.e + s.B * s.L * cache_elems_per_token(v, c) * s.e + io, io,
              scratch_elems(v, c, s.B, s.L) * s.e};
}

// ---- a chunk of q_len new tokens per sequence on a cached prefix (prefill.hpp) ----------------------------
//
// Both paths, per sequence with prefix P and chunk n (L = P + n after it), count the same query path, W_O
// and the chunk's cache rows (W_DKV: 2 hidden (kv_lora + rope) per token, which a decode step does not
// count: its row is an input). They differ in three places:
//   decompressed: 2 H kv_lora (nope + v) per token of L (K, V of prefix AND chunk), 2 H (nope + rope + v)
//                 per visible query-key pair;
//   absorbed:     2 H kv_lora (nope + v) per chunk token (q^C W_UK, W_UV o^lat), 2 H (2 kv_lora + rope) per pair.
// The causal pairs: n P + n (n + 1) / 2 (token i sees P + i + 1 keys). So
//   F_abs - F_dec = 2 H [pairs (2 kv_lora - nope - v) - P kv_lora (nope + v)]
// and the paths cost the same at pairs = P c, c = kv_lora (nope + v) / (2 kv_lora - nope - v), i.e.
//   n* = sqrt((P + 1/2)^2 + 2 P c) - (P + 1/2):
// absorbed is cheaper below n*, decompressed above; n* -> c (170.7 at DeepSeek-V2 and V3) as P grows, is 0 at
// P = 0 (nothing to decompress: absorbing only adds work), and depends on neither H nor B nor hidden.
// Bytes: both read the same weights (kv_b included: W_UK, W_UV), the prefix's compressed rows and h, and write
// the chunk's rows and u; the scratch differs: decompressed K, V (B H L (nope + rope + v)) against q_abs and
// o^lat (2 B n H kv_lora). Not counted: the contiguous copy of the cache both reference paths gather (a kernel
// reads the pages in place) and the one score row per head a task keeps.
enum class ChunkPath { Decompressed, Absorbed };

// The chunk's cost shape: {B, P, q_len, elem_bytes, hidden, H, q_lora, kv_lora, nope, rope, v} (every sequence
// with prefix P and q_len new tokens).
inline Shape chunk_cost_shape(const Config& c, int64_t B, int64_t P, int64_t q_len, int64_t elem_bytes = 4) {
  return {B, P, q_len, elem_bytes, c.hidden, c.n_heads, c.q_lora_rank, c.kv_lora_rank, c.qk_nope, c.qk_rope, c.v_head};
}

// Query-key pairs of one sequence's causal chunk: token i (i < n) sees P + i + 1 keys.
inline double causal_pairs(double P, double n) { return n * P + n * (n + 1) / 2; }

inline Cost chunk_cost(ChunkPath path, const Shape& shape) {
  require(shape.size() == 11,
          "mla chunk cost: shape {} must be {{B, P, q_len, elem_bytes, hidden, H, q_lora, kv_lora, nope, rope, v}}",
          shape_str(shape));
  require(shape[2] >= 1, "mla chunk cost: q_len = {} violates q_len >= 1", shape[2]);
  // The decode shape's parser checks B, P (as L >= 0), elem_bytes and the config.
  const CostShape s = parse_cost_shape({shape[0], shape[1], shape[3], shape[4], shape[5], shape[6], shape[7],
                                        shape[8], shape[9], shape[10]});
  const Config& c = s.cfg;
  const double P = s.L, n = static_cast<double>(shape[2]), D = static_cast<double>(c.hidden);
  const double H = static_cast<double>(c.n_heads), R = static_cast<double>(c.kv_lora_rank);
  const double kv = static_cast<double>(c.kv_dim()), pairs = causal_pairs(P, n);
  const bool dec = path == ChunkPath::Decompressed;
  const Variant like = dec ? Variant::CD : Variant::A_CC_ME;  // the decode rung of the same arithmetic
  double flops = n * (query_flops(like, c).total() + 2 * D * kv) + pairs * flops_per_cached_token(like, c);
  if (dec) flops += (P + n) * 2 * R * H * static_cast<double>(c.kv_b_rows());
  const double weights = weight_elems(Variant::CC, c) + kv * D + R;  // + W_DKV, kv_norm
  const double scratch = dec ? H * (P + n) * static_cast<double>(c.q_head() + c.v_head) : 2 * n * H * R;
  return Cost{s.B * flops, (weights + s.B * (P * kv + n * D)) * s.e, s.B * n * (kv + D) * s.e, s.B * scratch * s.e};
}

// The q_len at which both paths cost the same FLOPs for a prefix of P tokens (the formula above; +inf when
// 2 kv_lora <= nope + v, where the absorbed path is never the dearer one).
inline double chunk_crossover(const Config& c, double P) {
  const double R = static_cast<double>(c.kv_lora_rank), nv = static_cast<double>(c.qk_nope + c.v_head);
  if (2 * R <= nv) return std::numeric_limits<double>::infinity();
  const double cc = R * nv / (2 * R - nv);
  return std::sqrt((P + 0.5) * (P + 0.5) + 2 * P * cc) - (P + 0.5);
}

// Everything one step touches, resident at once: weights, cache, scratch, h and u.
inline double resident_bytes(const Cost& c) { return c.bytes_read + c.bytes_written + c.extra_bytes; }

}  // namespace ladder::mla
