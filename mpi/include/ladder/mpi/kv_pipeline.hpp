// ladder/mpi/kv_pipeline.hpp -- the prefill -> decode pipeline of stage 06 without the transport: what
// a prefill instance computes, the paged cache a decode instance owns (its own block numbering), and
// the decode steps. The MPI programs (ladder-kv-migrate, ladder-serve-demo) and the one-process
// reference all run these functions; only the way the cache rows reach the decode side differs, so the
// decode outputs must be the same bytes.
//
// Model: a stack of `layers` MLA layers of stage 03 (small_config, seeded weights; layer 0's seed is
// the configuration's, so one layer is the original single-layer pipeline). Prompt b has L_b tokens with
// hidden states x^0 ~ N(0, 1) drawn from its own seed; layer l writes its cache rows [c^KV normed | k^R
// roped] = kv_entries(W_l, x^l, 0..L_b-1) (stage 03, ladder/03-mla/layers.hpp), and, when a layer follows,
// x^{l+1} = x^l + u^l with u^l the layer's causal attention over the prompt: flash_mla with one query per
// token j over rows 0..j (the same arithmetic a decode step at position j does). Decode step t of prompt
// b draws the new token's x^0 from the seed of (b, t); each layer appends its own row at position L_b + t
// and runs flash_mla (stage 03's paged, split-KV rung) over the batch; the step's output is the last
// layer's u. With decode_tp = T > 1 the decode instance runs each layer tensor-parallel over T ranks
// (ladder/mpi/tp_shard.hpp): u is the sum, in rank order, of the T head shards' partial outputs, and the
// one-process reference computes exactly that sum (the same bits as the ranks' all-reduce; not the same
// bits as decoding all heads at once, which sums W_O's inputs in one product).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/mpi/tp_shard.hpp"

namespace ladder::kvmig {

struct PipelineConfig {
  std::vector<int64_t> prompt_lens{1, 63, 64, 65, 1000};
  int64_t decode_steps = 4;
  int64_t block_size = mla::kBlockSize;
  int64_t decode_blocks = 64;  // capacity of the decode instance's pool, in blocks
  uint64_t seed = 1201;
  int64_t layers = 1;        // MLA layers in the stack
  int64_t layer_shards = 1;  // prefill pipeline stages: each prefill rank of a group holds layers/shards
  int64_t decode_shards = 1; // decode pipeline stages: the decode instance's layers split over this many ranks
  int64_t decode_tp = 1;     // tensor-parallel ranks per decode stage: each layer's heads split over them

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
    mix(static_cast<uint64_t>(layers)), mix(static_cast<uint64_t>(layer_shards));
    mix(static_cast<uint64_t>(decode_shards)), mix(static_cast<uint64_t>(decode_tp));
    return h;
  }
};

// Launch parameters checked before any work, the same way on every rank (so every rank prints the same
// line, naming `program`, and no rank waits for a peer that has already given up).
inline void validate(const PipelineConfig& c, const char* program = "kv-migrate") {
  const char* p = program;
  require(c.prompts() >= 1, "{}: --prompts violates at least one prompt length", p);
  for (int64_t b = 0; b < c.prompts(); ++b)
    require(c.prompt_lens[static_cast<size_t>(b)] >= 1 && c.prompt_lens[static_cast<size_t>(b)] <= (1 << 20),
            "{}: --prompts[{}] = {} violates 1 <= length <= 1048576", p, b, c.prompt_lens[static_cast<size_t>(b)]);
  require(c.decode_steps >= 1 && c.decode_steps <= 1024, "{}: --steps = {} violates 1 <= steps <= 1024", p,
          c.decode_steps);
  require(c.block_size >= 1 && c.block_size <= 4096, "{}: --block-size = {} violates 1 <= size <= 4096", p,
          c.block_size);
  require(c.layers >= 1 && c.layers <= 64, "{}: --layers = {} violates 1 <= layers <= 64", p, c.layers);
  require(c.layer_shards >= 1 && c.layer_shards <= c.layers,
          "{}: --layer-shards = {} violates 1 <= shards <= --layers = {}", p, c.layer_shards, c.layers);
  require(c.decode_shards >= 1 && c.decode_shards <= c.layers,
          "{}: --decode-shards = {} violates 1 <= shards <= --layers = {}", p, c.decode_shards, c.layers);
  const int64_t heads = mla::small_config().n_heads;
  require(c.decode_tp >= 1 && heads % c.decode_tp == 0,
          "{}: --decode-tp = {} violates a divisor of the model's {} heads (every TP rank holds heads / TP)", p,
          c.decode_tp, heads);
  int64_t need = 0;
  for (int64_t b = 0; b < c.prompts(); ++b) need += c.decode_need(b);
  require(need <= c.decode_blocks,
          "{}: --decode-blocks = {} violates >= {} (the prompts plus {} decode tokens each need {} blocks of {} "
          "tokens on the decode instance)",
          p, c.decode_blocks, need, c.decode_steps, need, c.block_size);
}

// Layer l's weights (layer 0: the configuration's seed).
inline std::vector<mla::Weights<float>> model(const PipelineConfig& c) {
  std::vector<mla::Weights<float>> W;
  for (int64_t l = 0; l < c.layers; ++l)
    W.push_back(mla::random_weights(mla::small_config(), c.seed + static_cast<uint64_t>(l) * 7777u));
  return W;
}

// The first layer of pipeline stage s of `shards`: stage s holds layers [first_layer(s), first_layer(s + 1)).
inline int64_t first_layer(const PipelineConfig& c, int64_t shards, int64_t s) { return s * c.layers / shards; }

// Prompt b's hidden states at layer 0: [L_b, hidden].
inline Mat<float> prompt_hidden(const PipelineConfig& c, int64_t b, int64_t hidden) {
  const int64_t L = c.prompt_lens[static_cast<size_t>(b)];
  Rng rng(c.seed * 1000003ull + static_cast<uint64_t>(b));
  Mat<float> h(L, hidden);
  for (int64_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(rng.normal());
  return h;
}

// Causal attention of layer W over a prompt's own rows [L, kv_dim]: token j attends rows 0..j. One
// flash_mla call whose batch is the prompt's tokens, every one reading the same pages through its own
// block-table row with seqlen j + 1 (what decoding token j would compute).
inline Mat<float> causal_attention(const mla::Weights<float>& W, const PipelineConfig& c, const Mat<float>& rows,
                                   const Mat<float>& x) {
  const int64_t L = rows.rows(), kv_dim = rows.cols(), bs = c.block_size, nb = mla::blocks_for(L, bs);
  mla::PagedCache<float> cache;
  cache.block_size = bs;
  cache.blocks = Array<float>({nb, bs, kv_dim}, 0.0f);
  std::copy(rows.data(), rows.data() + rows.size(), cache.blocks.data.data());
  cache.block_table = Array<int32_t>({L, nb}, -1);
  mla::Step<float> step;
  step.h = x;
  for (int64_t j = 0; j < L; ++j) {
    for (int64_t i = 0; i < nb; ++i) cache.block_table.data[j * nb + i] = static_cast<int32_t>(i);
    cache.seqlens.push_back(j + 1);
    step.q_pos.push_back(j);
  }
  return mla::run(mla::reference_rung<float>(mla::Variant::flash_mla), W, cache, step).u;
}

// Prefill of layers [l0, l1) of prompt b from its hidden states x at layer l0: each layer's cache rows
// [L_b, kv_lora + rope] in `rows`, and x at layer l1 (computed only when a layer follows l1 - 1).
struct PrefillOut {
  std::vector<Mat<float>> rows;
  Mat<float> x;
};
inline PrefillOut prefill_layers(const std::vector<mla::Weights<float>>& W, const PipelineConfig& c, int64_t l0,
                                 int64_t l1, Mat<float> x) {
  std::vector<int64_t> pos(static_cast<size_t>(x.rows()));
  std::iota(pos.begin(), pos.end(), int64_t{0});
  PrefillOut out;
  for (int64_t l = l0; l < l1; ++l) {
    out.rows.push_back(mla::kv_entries(W[static_cast<size_t>(l)], x, pos));
    if (l + 1 < c.layers) x += causal_attention(W[static_cast<size_t>(l)], c, out.rows.back(), x);
  }
  out.x = std::move(x);
  return out;
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
  // Takes block b out of the free list (a copy of another pool's allocation: a TP rank's cache mirrors its
  // stage leader's block numbering).
  void claim(int32_t b) {
    const auto it = std::find(free_.begin(), free_.end(), b);
    require(it != free_.end(), "kv-migrate: block {} claimed but not free", b);
    free_.erase(it);
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

// The decode instance's caches for layers [l0, l1), one per layer (each its own pool and numbering).
inline std::vector<DecodeCache> make_decode_caches(const PipelineConfig& c, int64_t kv_dim, uint64_t order,
                                                   int64_t l0 = 0, int64_t l1 = -1) {
  std::vector<DecodeCache> d;
  for (int64_t l = l0; l < (l1 < 0 ? c.layers : l1); ++l)
    d.push_back(make_decode_cache(c, kv_dim, order + static_cast<uint64_t>(l) * 31u));
  return d;
}

// The new tokens of decode step t: x^0 [B, hidden], each prompt's row from the seed of (b, t).
inline Mat<float> step_tokens(const PipelineConfig& c, int64_t t, int64_t hidden) {
  Mat<float> h(c.prompts(), hidden);
  for (int64_t b = 0; b < c.prompts(); ++b) {
    Rng rng(c.seed * 7919ull + static_cast<uint64_t>(b) * 65537ull + static_cast<uint64_t>(t));
    for (int64_t k = 0; k < hidden; ++k) h(b, k) = static_cast<float>(rng.normal());
  }
  return h;
}

using StepInput = std::function<Mat<float>(int64_t)>;                  // t -> x entering the first layer
using StepOutput = std::function<void(int64_t, const Mat<float>&)>;   // (t, what step t produced)
// Layer l's attention output u [B, hidden] for a decode step over its cache (default: flash_mla with the
// whole layer; a TP rank: its head shard, then the all-reduce).
using Attend = std::function<Mat<float>(int64_t, const mla::PagedCache<float>&, const mla::Step<float>&)>;

// The one-process emulation of a layer run tensor-parallel over tp ranks: every shard's partial u with
// flash_mla, summed in rank order (ladder/mpi/tp_shard.hpp). tp = 1: the whole layer, as the default.
inline Attend emulated_tp(const std::vector<mla::Weights<float>>& W, int64_t tp) {
  if (tp == 1) return {};
  auto shards = std::make_shared<std::vector<std::vector<mla::Weights<float>>>>();  // [layer][rank]
  for (const auto& Wl : W) {
    shards->emplace_back();
    for (int64_t q = 0; q < tp; ++q) shards->back().push_back(tp::shard_of(Wl, q, tp));
  }
  return [shards](int64_t l, const mla::PagedCache<float>& cache, const mla::Step<float>& step) {
    const auto rung = mla::reference_rung<float>(mla::Variant::flash_mla);
    std::vector<Mat<float>> partials;
    for (const auto& Wq : (*shards)[static_cast<size_t>(l)]) partials.push_back(mla::run(rung, Wq, cache, step).u);
    return tp::emulate_in_rank_order(partials);
  };
}

// N decode steps through layers [l0, l1) (a decode pipeline stage; all layers by default) over their
// caches d[l - l0], every prompt admitted whole. Step t starts from x_in(t) (default: the new tokens);
// each layer appends the token's row at position L_b + t and runs flash_mla over the batch. Returns, per
// step, what leaves the range: x^{l1} = x + u when a layer follows, else the last layer's u [B, hidden];
// after_step(t, it), when given, runs inside step t (a pipeline stage's send, the serve demo's MoE);
// attend, when given, computes each layer's u (a TP rank's shard and all-reduce). Every rank of a TP group
// appends the same rows: the cache rows come from the replicated W_DKV, so each holds the whole cache.
inline std::vector<Mat<float>> decode_layers(const std::vector<mla::Weights<float>>& W, const PipelineConfig& c,
                                             int64_t l0, int64_t l1, std::vector<DecodeCache> d,
                                             const StepInput& x_in, const StepOutput& after_step,
                                             const Attend& attend = {}) {
  const int64_t B = c.prompts(), bs = c.block_size, kv_dim = W[0].cfg.kv_dim(), hidden = W[0].cfg.hidden;
  require(static_cast<int64_t>(d.size()) == l1 - l0, "kv-migrate: {} layer caches for layers [{}, {})", d.size(), l0, l1);
  std::vector<mla::PagedCache<float>> cache(d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    DecodeCache& dl = d[i];
    for (int64_t b = 0; b < B; ++b)
      require(dl.lens[static_cast<size_t>(b)] == c.prompt_lens[static_cast<size_t>(b)],
              "kv-migrate: prompt {} was not admitted whole in layer {} ({} of {} rows): nothing is decoded", b,
              l0 + static_cast<int64_t>(i), dl.lens[static_cast<size_t>(b)], c.prompt_lens[static_cast<size_t>(b)]);
    auto& cl = cache[i];
    cl.block_size = bs;
    cl.block_table = Array<int32_t>({B, c.max_blocks()}, -1);
    for (int64_t b = 0; b < B; ++b)
      for (size_t j = 0; j < dl.blocks[static_cast<size_t>(b)].size(); ++j)
        cl.block_table.data[b * c.max_blocks() + static_cast<int64_t>(j)] = dl.blocks[static_cast<size_t>(b)][j];
  }
  const auto rung = mla::reference_rung<float>(mla::Variant::flash_mla);
  std::vector<Mat<float>> out;
  for (int64_t t = 0; t < c.decode_steps; ++t) {
    mla::Step<float> step;
    step.h = x_in ? x_in(t) : step_tokens(c, t, hidden);
    for (int64_t b = 0; b < B; ++b) step.q_pos.push_back(d[0].lens[static_cast<size_t>(b)]);  // the new token's row
    Mat<float> u;
    for (int64_t l = l0; l < l1; ++l) {
      DecodeCache& dl = d[static_cast<size_t>(l - l0)];
      const mla::Weights<float>& Wl = W[static_cast<size_t>(l)];
      for (int64_t b = 0; b < B; ++b) {
        const int64_t j = dl.lens[static_cast<size_t>(b)];
        const Mat<float> row = mla::kv_entries(Wl, Mat<float>(step.h.row(b)), {j});
        std::copy(row.data(), row.data() + kv_dim,
                  dl.pool.block(dl.blocks[static_cast<size_t>(b)][static_cast<size_t>(j / bs)]) + (j % bs) * kv_dim);
        dl.lens[static_cast<size_t>(b)] = j + 1;
      }
      auto& cl = cache[static_cast<size_t>(l - l0)];
      cl.seqlens = dl.lens;
      cl.blocks = dl.pool.data();
      u = attend ? attend(l, cl, step) : mla::run(rung, Wl, cl, step).u;
      if (l + 1 < c.layers) step.h += u;  // x^{l+1} = x^l + u^l
    }
    Mat<float> leaving = l1 < c.layers ? std::move(step.h) : std::move(u);
    if (after_step) after_step(t, leaving);
    out.push_back(std::move(leaving));
  }
  return out;
}

// Every layer in one place: returns the last layer's u of each step.
inline std::vector<Mat<float>> decode(const std::vector<mla::Weights<float>>& W, const PipelineConfig& c,
                                      std::vector<DecodeCache> d, const StepOutput& after_step = {},
                                      const Attend& attend = {}) {
  return decode_layers(W, c, 0, c.layers, std::move(d), {}, after_step, attend);
}

// The one-process reference: prefill every prompt through every layer, admit its rows, decode (each
// layer's heads split over c.decode_tp shards and their outputs summed in rank order, as the TP ranks do).
inline std::vector<Mat<float>> one_process(const PipelineConfig& c, const StepOutput& after_step = {}) {
  const std::vector<mla::Weights<float>> W = model(c);
  std::vector<DecodeCache> d = make_decode_caches(c, W[0].cfg.kv_dim(), c.seed + 17);
  for (int64_t b = 0; b < c.prompts(); ++b) {
    const PrefillOut p = prefill_layers(W, c, 0, c.layers, prompt_hidden(c, b, W[0].cfg.hidden));
    for (int64_t l = 0; l < c.layers; ++l) admit_rows(d[static_cast<size_t>(l)], c, b, p.rows[static_cast<size_t>(l)]);
  }
  return decode(W, c, std::move(d), after_step, emulated_tp(W, c.decode_tp));
}

}  // namespace ladder::kvmig
