// ladder/mpi/kv_pipeline.hpp -- the prefill -> decode pipeline of stage 06 without the transport: what
// a prefill instance computes, the paged cache a decode instance owns (its own block numbering), and
// the decode steps. The MPI program (mpi/src/kv_migrate.cpp) and the one-process reference both run
// these functions; only the way the cache rows reach the decode side differs, so the decode outputs
// must be the same bytes.
//
// Model: one MLA layer of stage 03 (small_config, seeded weights). Prompt b has L_b tokens with hidden
// states h ~ N(0, 1) drawn from its own seed; prefill computes its cache rows [c^KV normed | k^R roped]
// = kv_entries(W, h, 0..L_b-1) (stage 03, ladder/mla/layers.hpp). Decode step t of prompt b draws the
// new token's hidden state from the seed of (b, t), appends its own row at position L_b + t, and runs
// flash_mla (stage 03's paged, split-KV rung) over the batch.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/mla.hpp"

namespace ladder::kvmig {

struct PipelineConfig {
  std::vector<int64_t> prompt_lens{1, 63, 64, 65, 1000};
  int64_t decode_steps = 4;
  int64_t block_size = mla::kBlockSize;
  int64_t decode_blocks = 64;  // capacity of the decode instance's pool, in blocks
  uint64_t seed = 1201;

  int64_t prompts() const { return static_cast<int64_t>(prompt_lens.size()); }
  // Blocks prompt b occupies on the decode side once its N decode tokens are appended.
  int64_t decode_need(int64_t b) const {
    return mla::blocks_for(prompt_lens[static_cast<size_t>(b)] + decode_steps, block_size);
  }
  int64_t max_blocks() const {
    int64_t m = 0;
    for (int64_t b = 0; b < prompts(); ++b) m = std::max(m, decode_need(b));
    return m;
  }
  // A digest of every field: each rank checks that all ranks were given the same configuration.
  uint64_t digest() const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int64_t L : prompt_lens) mix(static_cast<uint64_t>(L));
    mix(static_cast<uint64_t>(decode_steps)), mix(static_cast<uint64_t>(block_size));
    mix(static_cast<uint64_t>(decode_blocks)), mix(seed), mix(static_cast<uint64_t>(prompts()));
    return h;
  }
};

// Launch parameters checked before any work, the same way on every rank (so every rank prints the same
// line and no rank waits for a peer that has already given up).
inline void validate(const PipelineConfig& c) {
  require(c.prompts() >= 1, "kv-migrate: --prompts violates at least one prompt length");
  for (int64_t b = 0; b < c.prompts(); ++b)
    require(c.prompt_lens[static_cast<size_t>(b)] >= 1 && c.prompt_lens[static_cast<size_t>(b)] <= (1 << 20),
            "kv-migrate: --prompts[{}] = {} violates 1 <= length <= 1048576", b, c.prompt_lens[static_cast<size_t>(b)]);
  require(c.decode_steps >= 1 && c.decode_steps <= 1024, "kv-migrate: --steps = {} violates 1 <= steps <= 1024",
          c.decode_steps);
  require(c.block_size >= 1 && c.block_size <= 4096, "kv-migrate: --block-size = {} violates 1 <= size <= 4096",
          c.block_size);
  int64_t need = 0;
  for (int64_t b = 0; b < c.prompts(); ++b) need += c.decode_need(b);
  require(need <= c.decode_blocks,
          "kv-migrate: --decode-blocks = {} violates >= {} (the prompts plus {} decode tokens each need {} blocks of "
          "{} tokens on the decode instance)",
          c.decode_blocks, need, c.decode_steps, need, c.block_size);
}

inline mla::Weights<float> model(const PipelineConfig& c) { return mla::random_weights(mla::small_config(), c.seed); }

// Prefill of prompt b: its cache rows [L_b, kv_lora + rope].
inline Mat<float> prefill_rows(const mla::Weights<float>& W, const PipelineConfig& c, int64_t b) {
  const int64_t L = c.prompt_lens[static_cast<size_t>(b)];
  Rng rng(c.seed * 1000003ull + static_cast<uint64_t>(b));
  Mat<float> h(L, W.cfg.hidden);
  for (int64_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(rng.normal());
  std::vector<int64_t> pos(static_cast<size_t>(L));
  std::iota(pos.begin(), pos.end(), int64_t{0});
  return mla::kv_entries(W, h, pos);
}

// A pool of blocks with a free list; `order` seeds the order blocks are handed out in, so two instances
// number the same logical blocks differently (the block table is rewritten on migration, not copied).
class BlockPool {
 public:
  BlockPool(int64_t blocks, int64_t block_size, int64_t kv_dim, uint64_t order)
      : block_size_(block_size), kv_dim_(kv_dim),
        data_({blocks, block_size, kv_dim}, std::numeric_limits<float>::quiet_NaN()) {
    Rng rng(order);
    free_ = mla::permutation(blocks, rng);
  }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int32_t take() {
    require(!free_.empty(), "kv-migrate: block pool exhausted");
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  void give_back(int32_t b) {
    std::fill_n(block(b), block_size_ * kv_dim_, std::numeric_limits<float>::quiet_NaN());
    free_.push_back(b);
  }
  float* block(int32_t b) { return data_.data.data() + static_cast<int64_t>(b) * block_size_ * kv_dim_; }
  const float* block(int32_t b) const { return data_.data.data() + static_cast<int64_t>(b) * block_size_ * kv_dim_; }
  int64_t block_floats() const { return block_size_ * kv_dim_; }
  const Array<float>& data() const { return data_; }

 private:
  int64_t block_size_, kv_dim_;
  Array<float> data_;
  std::vector<int32_t> free_;
};

// The decode instance's cache: its pool and, per admitted prompt, its own block list.
struct DecodeCache {
  BlockPool pool;
  std::vector<std::vector<int32_t>> blocks;  // [prompt] -> own block ids, logical order
  std::vector<int64_t> lens;                 // [prompt] -> rows held (0: not admitted)
};

inline DecodeCache make_decode_cache(const PipelineConfig& c, int64_t kv_dim, uint64_t order) {
  return DecodeCache{BlockPool(c.decode_blocks, c.block_size, kv_dim, order),
                     std::vector<std::vector<int32_t>>(static_cast<size_t>(c.prompts())),
                     std::vector<int64_t>(static_cast<size_t>(c.prompts()), 0)};
}

// Admits prompt b from its rows directly (the one-process path).
inline void admit_rows(DecodeCache& d, const PipelineConfig& c, int64_t b, const Mat<float>& rows) {
  const int64_t kv_dim = rows.cols(), bs = c.block_size;
  auto& own = d.blocks[static_cast<size_t>(b)];
  for (int64_t i = 0; i < c.decode_need(b); ++i) own.push_back(d.pool.take());
  for (int64_t j = 0; j < rows.rows(); ++j)
    std::copy(rows.row(j).data(), rows.row(j).data() + kv_dim, d.pool.block(own[static_cast<size_t>(j / bs)]) + (j % bs) * kv_dim);
  d.lens[static_cast<size_t>(b)] = rows.rows();
}

// N decode steps over every admitted prompt (all must be); returns u of each step, [B, hidden].
inline std::vector<Mat<float>> decode(const mla::Weights<float>& W, const PipelineConfig& c, DecodeCache d) {
  const int64_t B = c.prompts(), bs = c.block_size, kv_dim = W.cfg.kv_dim();
  for (int64_t b = 0; b < B; ++b)
    require(d.lens[static_cast<size_t>(b)] == c.prompt_lens[static_cast<size_t>(b)],
            "kv-migrate: prompt {} was not admitted whole ({} of {} rows): nothing is decoded", b,
            d.lens[static_cast<size_t>(b)], c.prompt_lens[static_cast<size_t>(b)]);
  mla::PagedCache<float> cache;
  cache.block_size = bs;
  cache.block_table = Array<int32_t>({B, c.max_blocks()}, -1);
  for (int64_t b = 0; b < B; ++b)
    for (size_t i = 0; i < d.blocks[static_cast<size_t>(b)].size(); ++i)
      cache.block_table.data[b * c.max_blocks() + static_cast<int64_t>(i)] = d.blocks[static_cast<size_t>(b)][i];
  const auto rung = mla::reference_rung<float>(mla::Variant::flash_mla);
  std::vector<Mat<float>> out;
  for (int64_t t = 0; t < c.decode_steps; ++t) {
    mla::Step<float> step;
    step.h = Mat<float>(B, W.cfg.hidden);
    for (int64_t b = 0; b < B; ++b) {
      Rng rng(c.seed * 7919ull + static_cast<uint64_t>(b) * 65537ull + static_cast<uint64_t>(t));
      for (int64_t k = 0; k < W.cfg.hidden; ++k) step.h(b, k) = static_cast<float>(rng.normal());
      const int64_t j = d.lens[static_cast<size_t>(b)];  // the new token's row
      const Mat<float> row = mla::kv_entries(W, Mat<float>(step.h.row(b)), {j});
      std::copy(row.data(), row.data() + kv_dim,
                d.pool.block(d.blocks[static_cast<size_t>(b)][static_cast<size_t>(j / bs)]) + (j % bs) * kv_dim);
      d.lens[static_cast<size_t>(b)] = j + 1;
      step.q_pos.push_back(j);
    }
    cache.seqlens = d.lens;
    cache.blocks = d.pool.data();
    out.push_back(mla::run(rung, W, cache, step).u);
  }
  return out;
}

// The one-process reference: prefill every prompt, admit its rows, decode.
inline std::vector<Mat<float>> one_process(const PipelineConfig& c) {
  const mla::Weights<float> W = model(c);
  DecodeCache d = make_decode_cache(c, W.cfg.kv_dim(), c.seed + 17);
  for (int64_t b = 0; b < c.prompts(); ++b) admit_rows(d, c, b, prefill_rows(W, c, b));
  return decode(W, c, std::move(d));
}

}  // namespace ladder::kvmig
