// ladder/03-mla/synthetic.hpp -- stage 03: seeded decode-step inputs (goldens, tests, reproduce, benchmarks).
//
// A decode problem is (weights, paged cache, step). make_inputs draws, from ladder::Rng(seed):
//   * h [B, hidden] ~ N(0, 1), the new tokens;
//   * the cache of sequence b, L_b rows. prefill = true: the rows a prefill would have written,
//     kv_entries(h_j, j) of N(0, 1) hidden states h_j (j < L_b - 1) and of the new token itself
//     (j = L_b - 1), so the RMSNorm and the RoPE of the cache are real; prefill = false: N(0, 1)
//     rows (fast, for timings at long L, where the values do not matter);
//   * the block table: pages assigned in order, or (shuffled) a random permutation of a pool of
//     needed + spare pages; every row of a page no token owns is NaN (FlashMLA's test fills the cache
//     past cache_seqlens with NaN the same way), so an out-of-bounds read shows.
// q_pos[b] = L_b - 1.
#pragma once
#include <cstdint>
#include <numeric>
#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/03-mla/cache.hpp"
#include "ladder/03-mla/layers.hpp"
#include "ladder/03-mla/prefill.hpp"
#include "ladder/03-mla/step.hpp"

namespace ladder::mla {

struct InputSpec {
  std::vector<int64_t> seqlens;  // L_b per sequence
  uint64_t seed = 1;
  bool shuffled = false;      // shuffled block table
  int64_t spare_blocks = 0;   // NaN pages in the pool that no sequence owns
  bool prefill = true;        // cache rows from kv_entries (true) or N(0, 1) (false)
};

struct Inputs {
  PagedCache<float> cache;
  Step<float> step;
};

// A permutation of [0, n) from rng (Fisher-Yates, Rng::uniform_int so it is the same everywhere).
inline std::vector<int32_t> permutation(int64_t n, Rng& rng) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<size_t>(i)], p[rng.uniform_int(static_cast<uint64_t>(i + 1))]);
  return p;
}

inline Inputs make_inputs(const Weights<float>& W, const InputSpec& spec) {
  const Config& c = W.cfg;
  check_config(c, "make_inputs");
  const int64_t B = static_cast<int64_t>(spec.seqlens.size());
  require(B >= 1, "mla make_inputs: seqlens.size (batch B) = 0 violates B >= 1");
  require(spec.spare_blocks >= 0, "mla make_inputs: spare_blocks = {} violates >= 0", spec.spare_blocks);
  Rng rng(spec.seed);
  Inputs in;
  in.step.h = Mat<float>(B, c.hidden);
  for (int64_t i = 0; i < in.step.h.size(); ++i) in.step.h.data()[i] = static_cast<float>(rng.normal());
  in.step.q_pos = default_positions(spec.seqlens);

  std::vector<Mat<float>> rows;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = spec.seqlens[b];
    require(L >= 1, "mla make_inputs: seqlens[{}] = {} violates L >= 1", b, L);
    if (spec.prefill) {
      Mat<float> hist(L, c.hidden);
      for (int64_t i = 0; i < (L - 1) * c.hidden; ++i) hist.data()[i] = static_cast<float>(rng.normal());
      hist.row(L - 1) = in.step.h.row(b);
      std::vector<int64_t> pos(static_cast<size_t>(L));
      std::iota(pos.begin(), pos.end(), int64_t{0});
      rows.push_back(kv_entries(W, hist, pos));
    } else {
      Mat<float> r(L, c.kv_dim());
      for (int64_t i = 0; i < r.size(); ++i) r.data()[i] = static_cast<float>(rng.normal());
      rows.push_back(std::move(r));
    }
  }

  Array<int32_t> table = contiguous_block_table(spec.seqlens);
  int64_t needed = 0;
  for (int32_t v : table.data) needed += v >= 0;
  const int64_t pool = needed + spec.spare_blocks;
  if (spec.shuffled) {
    const std::vector<int32_t> perm = permutation(pool, rng);
    for (int32_t& v : table.data)
      if (v >= 0) v = perm[static_cast<size_t>(v)];
  }
  in.cache = make_paged(rows, std::move(table), pool);
  return in;
}

// A chunk on a cached prefix (prefill.hpp): sequence b has prefix[b] >= 0 cached rows, kv_entries of N(0, 1)
// history at positions 0 .. P_b - 1, and brings q_lens[b] >= 1 new tokens h ~ N(0, 1) (drawn first, [N,
// hidden]). The block table holds pages for P_b + q_len_b tokens (in order, or shuffled over a pool with
// spare pages); every row past the prefix is NaN until the chunk writes it.
struct ChunkSpec {
  std::vector<int64_t> prefix, q_lens;
  uint64_t seed = 1;
  bool shuffled = false;
  int64_t spare_blocks = 0;
};

struct ChunkInputs {
  PagedCache<float> cache;  // seqlens = prefix
  Chunk<float> chunk;
  std::vector<Mat<float>> prefix_rows;  // [P_b, kv_lora + rope] per sequence: the rows the cache holds
};

inline ChunkInputs make_chunk_inputs(const Weights<float>& W, const ChunkSpec& spec) {
  const Config& c = W.cfg;
  check_config(c, "make_chunk_inputs");
  const int64_t B = static_cast<int64_t>(spec.prefix.size());
  require(B >= 1 && spec.q_lens.size() == spec.prefix.size(),
          "mla make_chunk_inputs: prefix.size = {} and q_lens.size = {} violate equal and >= 1", B, spec.q_lens.size());
  require(spec.spare_blocks >= 0, "mla make_chunk_inputs: spare_blocks = {} violates >= 0", spec.spare_blocks);
  Rng rng(spec.seed);
  ChunkInputs in;
  in.chunk.q_lens = spec.q_lens;
  int64_t N = 0;
  std::vector<int64_t> total;
  for (int64_t b = 0; b < B; ++b) {
    require(spec.q_lens[b] >= 1 && spec.prefix[b] >= 0,
            "mla make_chunk_inputs: q_lens[{}] = {} and prefix[{}] = {} violate q_len >= 1, prefix >= 0", b,
            spec.q_lens[b], b, spec.prefix[b]);
    N += spec.q_lens[b];
    total.push_back(spec.prefix[b] + spec.q_lens[b]);
  }
  in.chunk.h = Mat<float>(N, c.hidden);
  for (int64_t i = 0; i < in.chunk.h.size(); ++i) in.chunk.h.data()[i] = static_cast<float>(rng.normal());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t P = spec.prefix[b];
    Mat<float> hist(P, c.hidden);
    for (int64_t i = 0; i < hist.size(); ++i) hist.data()[i] = static_cast<float>(rng.normal());
    std::vector<int64_t> pos(static_cast<size_t>(P));
    std::iota(pos.begin(), pos.end(), int64_t{0});
    in.prefix_rows.push_back(P > 0 ? kv_entries(W, hist, pos) : Mat<float>(0, c.kv_dim()));
  }
  Array<int32_t> table = contiguous_block_table(total);
  int64_t needed = 0;
  for (int32_t v : table.data) needed += v >= 0;
  const int64_t pool = needed + spec.spare_blocks;
  if (spec.shuffled) {
    const std::vector<int32_t> perm = permutation(pool, rng);
    for (int32_t& v : table.data)
      if (v >= 0) v = perm[static_cast<size_t>(v)];
  }
  in.cache = make_paged(in.prefix_rows, std::move(table), pool);
  return in;
}

}  // namespace ladder::mla
