// ladder/03-mla/prefill.hpp -- stage 03: a chunk of q_len new tokens per sequence on a cached prefix, the two
// ways MLA can compute it: decompressed (the prefill rung) and absorbed (the multi-token decode of MTP).
//
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM   (+ flash_mla; + prefill: this file)
//
// Sequence b has a prefix of P_b tokens in the paged cache and brings n_b = q_len_b new tokens at positions
// P_b .. P_b + n_b - 1. The chunk's step:
//   1. its cache rows [RMSNorm(c^KV) | RoPE(k^R)] = kv_entries(h) are written into the paged cache at rows
//      P_b .. P_b + n_b - 1 (the block table must already hold pages for P_b + n_b tokens);
//   2. token i of the chunk (i < n_b) sees keys j <= P_b + i: the causal mask aligned to the bottom right
//      of the [n_b, P_b + n_b] score matrix, so the whole prefix is visible to every new token (a mask
//      aligned top left, j <= i, hides the prefix from the first tokens: tests/03-mla/test_mla_prefill.cpp
//      shows the judge catching it);
//   3. u_t = W_O o_t for each of the N = sum_b n_b tokens, and lse_t,h = log sum_j e^{s_j} over what t sees.
// Decompressed (ChunkPath::Decompressed; prefill as Huawei's DeepSeek-V3/R1 Ascend deployment report runs it,
// §3.1.2 / §3.2.1, and FlashMLA's "MHA mode"):
// K = [W_UK c^KV | k^R] and V = W_UV c^KV for all P_b + n_b tokens (decompress(), cache.hpp), then standard
// attention per head with d_qk = nope + rope (192 at V2) and d_v = v (128). Absorbed (ChunkPath::Absorbed;
// the decode rungs' form, FlashMLA's "MQA mode": d_qk = kv_lora + rope = 576 over the latent cache, d_v =
// 512): q_abs = q^C W_UK per head, scores against the cache rows as stored, o^lat = a c^KV, o = W_UV o^lat.
// With n_b = 1 both are a decode step (CD and A_CC_ME); n_b > 1 with the absorbed path is the decode of
// s_q = n_b query tokens per sequence, causal among them (FlashMLA's s_q, MTP's verify step): attend_chunk
// runs steps 2-3 alone over rows already in the cache (a decode step's input), prefill_chunk all three.
// The FLOPs of both, as formulas of (B, P, q_len): chunk_cost (cost.hpp), checked against the count.
// Every score row is one product over exactly the keys it sees, so the counted FLOPs are the causal ones.
// T = double is the oracle's precision; no OpenMP split changes a bit (each output row is one serial task).
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "ladder/03-mla/absorbed.hpp"
#include "ladder/03-mla/cost.hpp"
#include "ladder/03-mla/decompressed.hpp"

namespace ladder::mla {

template <class T>
struct Chunk {
  Mat<T> h;                     // [N, hidden], N = sum_b q_lens[b]: the new tokens, sequence after sequence
  std::vector<int64_t> q_lens;  // [B] new tokens of each sequence, >= 1
};

template <class T>
struct ChunkOutput {
  Mat<T> u;      // [N, hidden]
  Array<T> lse;  // [N, H]: log sum_j e^{s_j} over the keys token t sees
};

// The first token of each sequence in the packed [N, *] arrays: first[b] .. first[b + 1] - 1; first[B] = N.
inline std::vector<int64_t> chunk_offsets(const std::vector<int64_t>& q_lens) {
  std::vector<int64_t> first(q_lens.size() + 1, 0);
  for (size_t b = 0; b < q_lens.size(); ++b) first[b + 1] = first[b] + q_lens[b];
  return first;
}

// The chunk's positions: P_b + i for token i of sequence b (prefix = the cache lengths before the chunk).
inline std::vector<int64_t> chunk_positions(const std::vector<int64_t>& prefix, const std::vector<int64_t>& q_lens) {
  std::vector<int64_t> pos;
  for (size_t b = 0; b < q_lens.size(); ++b)
    for (int64_t i = 0; i < q_lens[b]; ++i) pos.push_back(prefix[b] + i);
  return pos;
}

// Checks the chunk against the cache: cache.seqlens are the prefixes (>= 0), and the block table must hold
// pages for prefix + q_len tokens; the weights must include W_DKV and kv_norm (the chunk's cache rows).
template <class T>
void check_chunk(const Weights<T>& W, PagedCache<T>& cache, const Chunk<T>& chunk, const char* who) {
  check_weights(W, who);
  const Config& c = W.cfg;
  require(W.W_DKV.size() > 0 && W.kv_norm.size() > 0,
          "mla {}: weights.W_DKV and kv_norm are empty; a chunk needs them (it writes its own cache rows)", who);
  check_hidden(W, chunk.h, who);
  const int64_t B = static_cast<int64_t>(chunk.q_lens.size());
  require(B >= 1 && B == cache.batch(), "mla {}: q_lens.size = {} violates == cache batch B = {} >= 1", who, B,
          cache.batch());
  for (int64_t b = 0; b < B; ++b) {
    require(chunk.q_lens[b] >= 1, "mla {}: q_lens[{}] = {} violates q_len >= 1", who, b, chunk.q_lens[b]);
    require(cache.seqlens[b] >= 0, "mla {}: cache.seqlens[{}] (the prefix) = {} violates prefix >= 0", who, b,
            cache.seqlens[b]);
  }
  const std::vector<int64_t> first = chunk_offsets(chunk.q_lens);
  require(chunk.h.rows() == first[B], "mla {}: h.rows = {} violates == sum of q_lens = {}", who, chunk.h.rows(),
          first[B]);
  // The cache as it will be after the chunk must be a valid paged cache (pages for every row it writes).
  const std::vector<int64_t> prefix = cache.seqlens;
  for (int64_t b = 0; b < B; ++b) cache.seqlens[b] = prefix[b] + chunk.q_lens[b];
  try {
    check_paged(cache, c, who);
  } catch (...) {
    cache.seqlens = prefix;
    throw;
  }
  cache.seqlens = prefix;
}

// Row j of sequence b, writable.
template <class T>
T* cache_row(PagedCache<T>& c, int64_t b, int64_t j) {
  const int64_t blk = c.block_table.data[b * c.block_table.shape[1] + j / c.block_size];
  return c.blocks.data.data() + (blk * c.block_size + j % c.block_size) * c.kv_dim();
}

// log sum_{j < n} e^{s_j} of scaled scores (the fp64 oracle's form: logsumexp_rows, mla.hpp).
template <class T>
T lse_of(const T* s, int64_t n) {
  T m = s[0];
  for (int64_t j = 1; j < n; ++j) m = std::max(m, s[j]);
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += math::exp(s[j] - m);
  return m + math::log(sum);
}

// Decompressed attention of the chunk: K [B, H, Lmax, nope + rope], V [B, H, Lmax, v] over the cache after the
// chunk; token i of sequence b sees keys j <= diag[b] + i (the prefill passes diag = prefix: bottom right).
// Returns o [N, H * v] and writes lse [N, H].
template <class T>
Mat<T> chunk_attend_decompressed(const Config& c, const Mat<T>& q_nope, const Mat<T>& q_pe, const Array<T>& K,
                                 const Array<T>& V, const std::vector<int64_t>& q_lens,
                                 const std::vector<int64_t>& diag, Array<T>& lse) {
  const int64_t B = static_cast<int64_t>(q_lens.size()), H = c.n_heads, Lmax = K.shape[2], dk = c.q_head();
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  const T scale = static_cast<T>(c.scale());
  Mat<T> o(first[B], H * c.v_head);
  lse = Array<T>({first[B], H});
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const ConstMatMap<T> Kbh(&K.data[(b * H + h) * Lmax * dk], Lmax, dk);
      const ConstMatMap<T> Vbh(&V.data[(b * H + h) * Lmax * c.v_head], Lmax, c.v_head);
      std::vector<T> s(static_cast<size_t>(Lmax)), a(static_cast<size_t>(Lmax));
      Mat<T> q(1, dk);
      for (int64_t i = 0; i < q_lens[b]; ++i) {
        const int64_t t = first[b] + i, n = diag[b] + i + 1;  // keys 0 .. diag + i
        q.leftCols(c.qk_nope) = q_nope.block(t, h * c.qk_nope, 1, c.qk_nope);
        q.rightCols(c.qk_rope) = q_pe.block(t, h * c.qk_rope, 1, c.qk_rope);
        MatMap<T> srow(s.data(), 1, n);
        gemm_nt<T>(q, Kbh.topRows(n), srow);
        scale_and_softmax(s.data(), a.data(), n, scale);
        lse.data[t * H + h] = lse_of(s.data(), n);
        gemm_nn<T>(ConstMatMap<T>(a.data(), 1, n), Vbh.topRows(n), o.block(t, h * c.v_head, 1, c.v_head));
      }
    }
  }
  return o;
}

// Absorbed attention of the chunk over the contiguous compressed cache kv [B, Lmax, kv_lora + rope]:
// S [H, n] = q_abs_t c^KV^T + q^R_t k^R^T for every head at once (A_CC_ME's products), token i of sequence b
// seeing keys j <= diag[b] + i. Returns o^lat [N, H * kv_lora] and writes lse [N, H].
template <class T>
Mat<T> chunk_attend_absorbed(const Config& c, const Mat<T>& q_abs, const Mat<T>& q_pe, const Array<T>& kv,
                             const std::vector<int64_t>& q_lens, const std::vector<int64_t>& diag, Array<T>& lse) {
  const int64_t B = static_cast<int64_t>(q_lens.size()), H = c.n_heads, Lmax = kv.shape[1], D = c.kv_dim();
  const int64_t R = c.kv_lora_rank;
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  const T scale = static_cast<T>(c.scale());
  Mat<T> o_lat(first[B], H * R);
  lse = Array<T>({first[B], H});
#pragma omp parallel for schedule(dynamic)
  for (int64_t t = 0; t < first[B]; ++t) {
    const int64_t b = std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1;
    const int64_t n = diag[b] + (t - first[b]) + 1;
    const ConstMatMap<T> rows(&kv.data[b * Lmax * D], n, D);
    const ConstMatMap<T> qa(q_abs.row(t).data(), H, R), qr(q_pe.row(t).data(), H, c.qk_rope);
    Mat<T> S(H, n), A(H, n);
    gemm_nt<T>(qa, rows.leftCols(R), S);
    gemm_nt<T>(qr, rows.rightCols(c.qk_rope), S, true);
    for (int64_t h = 0; h < H; ++h) {
      scale_and_softmax(&S(h, 0), &A(h, 0), n, scale);
      lse.data[t * H + h] = lse_of(&S(h, 0), n);
    }
    MatMap<T> ot(o_lat.row(t).data(), H, R);
    gemm_nn<T>(A, rows.leftCols(R), ot);
  }
  return o_lat;
}

// The attention of tokens whose rows are already in the cache: the last q_lens[b] of sequence b's seqlens[b]
// tokens, at positions seqlens[b] - q_lens[b] + i, token i seeing keys j <= seqlens[b] - q_lens[b] + i. With
// the absorbed path this is a decode step of s_q = q_lens[b] query tokens per sequence, the rows read as given
// (MTP's verify; FlashMLA's s_q); with q_lens all 1 it is a decode step (CD's or A_CC_ME's arithmetic).
// W_DKV and kv_norm are not needed (no row is formed). Returns u [N, hidden] and lse [N, H].
// q_pos (optional, [N]): the tokens' positions for RoPE where they are not seqlens[b] - q_lens[b] + i (the
// contract passes a case's own q_pos; the visibility stays as above).
template <class T>
ChunkOutput<T> attend_chunk(const Weights<T>& W, const PagedCache<T>& cache, const Mat<T>& h,
                            const std::vector<int64_t>& q_lens, ChunkPath path,
                            const std::vector<int64_t>* q_pos = nullptr) {
  const char* who = path == ChunkPath::Decompressed ? "attend_chunk (decompressed)" : "attend_chunk (absorbed)";
  check_weights(W, who);
  check_hidden(W, h, who);
  check_paged(cache, W.cfg, who);
  const Config& c = W.cfg;
  const int64_t B = cache.batch();
  require(static_cast<int64_t>(q_lens.size()) == B, "mla {}: q_lens.size = {} violates == cache batch B = {}", who,
          q_lens.size(), B);
  std::vector<int64_t> diag(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    require(q_lens[b] >= 1 && q_lens[b] <= cache.seqlens[b],
            "mla {}: q_lens[{}] = {} violates 1 <= q_len <= cache.seqlens[{}] = {}", who, b, q_lens[b], b,
            cache.seqlens[b]);
    diag[b] = cache.seqlens[b] - q_lens[b];
  }
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  require(h.rows() == first[B], "mla {}: h.rows = {} violates == sum of q_lens = {}", who, h.rows(), first[B]);
  const Mat<T> cQ = query_latent(W, h);
  if (q_pos)
    require(static_cast<int64_t>(q_pos->size()) == first[B], "mla {}: q_pos.size = {} violates == sum of q_lens = {}",
            who, q_pos->size(), first[B]);
  const Mat<T> q_nope = query_nope(W, cQ), q_pe = query_rope(W, cQ, q_pos ? *q_pos : chunk_positions(diag, q_lens));
  ChunkOutput<T> out;
  out.u.resize(first[B], c.hidden);
  const Array<T> kv = gather(cache);
  if (path == ChunkPath::Decompressed) {
    Array<T> K, V;
    decompress(W, kv, cache.seqlens, K, V);  // every token of prefix and chunk, every head
    output_projection(W, chunk_attend_decompressed(c, q_nope, q_pe, K, V, q_lens, diag, out.lse), out.u);
  } else {
    const Mat<T> o_lat = chunk_attend_absorbed(c, absorb_query(W, q_nope), q_pe, kv, q_lens, diag, out.lse);
    output_projection(W, absorb_output(W, o_lat), out.u);
  }
  return out;
}

// Writes the chunk's cache rows [RMSNorm(c^KV) | RoPE(k^R)] = kv_entries(h, pos) into the paged cache, which
// already counts them: token i of sequence b goes to row seqlens[b] - q_lens[b] + i. Returns the rows [N, kv_dim].
template <class T>
Mat<T> write_chunk_rows(const Weights<T>& W, PagedCache<T>& cache, const std::vector<int64_t>& q_lens,
                        const Mat<T>& h, const std::vector<int64_t>& pos) {
  const Mat<T> rows = kv_entries(W, h, pos);  // [N, kv_lora + rope]
  const std::vector<int64_t> first = chunk_offsets(q_lens);
  for (size_t b = 0; b < q_lens.size(); ++b)
    for (int64_t i = 0; i < q_lens[b]; ++i)
      std::copy(rows.row(first[b] + i).data(), rows.row(first[b] + i).data() + W.cfg.kv_dim(),
                cache_row(cache, static_cast<int64_t>(b), cache.seqlens[b] - q_lens[b] + i));
  return rows;
}

// The chunk's step: writes its cache rows (cache.seqlens grow by q_lens), then attend_chunk. q_pos (optional,
// [N]): positions other than prefix + i, for the rows' and the queries' RoPE alike.
template <class T>
ChunkOutput<T> prefill_chunk(const Weights<T>& W, PagedCache<T>& cache, const Chunk<T>& chunk, ChunkPath path,
                             const std::vector<int64_t>* q_pos = nullptr) {
  const char* who = path == ChunkPath::Decompressed ? "prefill" : "chunk (absorbed)";
  check_chunk(W, cache, chunk, who);
  const std::vector<int64_t> pos = q_pos ? *q_pos : chunk_positions(cache.seqlens, chunk.q_lens);
  require(static_cast<int64_t>(pos.size()) == chunk.h.rows(), "mla {}: q_pos.size = {} violates == sum of q_lens = {}",
          who, pos.size(), chunk.h.rows());
  for (size_t b = 0; b < chunk.q_lens.size(); ++b) cache.seqlens[b] += chunk.q_lens[b];
  write_chunk_rows(W, cache, chunk.q_lens, chunk.h, pos);
  return attend_chunk(W, cache, chunk.h, chunk.q_lens, path, &pos);
}

// ---- the two chunk paths as registered rungs (mla.hpp's chunk_rung): their decode-step form -------------------
// A decode step is a chunk of one token per sequence whose row is already in the cache: attend_chunk with
// q_lens all 1 over the prepared paged cache, read in place (the decompressed path is then CC's arithmetic,
// the absorbed one A_CC_ME's: their Cost). u and lse; no scores (one score row per task, never stored).
template <class T>
Prepared<T> prepare_chunk(const Weights<T>& W, const PagedCache<T>& cache) {
  check_paged(cache, W.cfg, "chunk rung");
  Prepared<T> p;
  p.seqlens = cache.seqlens;
  p.paged = cache;
  return p;
}

template <class T, ChunkPath path>
Output<T> decode_chunk(const Weights<T>& W, const Prepared<T>& p, const Step<T>& s) {
  check_step(W, p, s, path == ChunkPath::Decompressed ? "prefill (decode step)" : "chunk_absorbed (decode step)");
  const ChunkOutput<T> o = attend_chunk(W, p.paged, s.h, std::vector<int64_t>(p.paged.seqlens.size(), 1), path,
                                        &s.q_pos);
  Output<T> out;
  out.u = o.u;
  out.lse = o.lse;
  return out;
}

template <class T, ChunkPath path>
void decode_chunk_into(const Weights<T>& W, const Prepared<T>& p, const Step<T>& s, Output<T>& out) {
  out = decode_chunk<T, path>(W, p, s);
}

}  // namespace ladder::mla
