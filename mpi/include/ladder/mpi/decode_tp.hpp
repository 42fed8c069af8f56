// ladder/mpi/decode_tp.hpp -- tensor parallelism inside the decode instance (--decode-tp), what
// ladder-kv-migrate and ladder-serve-demo share: each decode stage is T ranks; the stage's leader pulls the
// KV blocks (kv_transport.hpp's migrate_in) and broadcasts the whole latent cache to the others
// (share_caches), every rank decodes its heads of each layer and the partial outputs are all-reduced in
// rank order (tp.hpp), and the last stage's ranks vote on their outputs (DecodeTp).
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "ladder/mpi/comm.hpp"
#include "ladder/mpi/kv_pipeline.hpp"
#include "ladder/mpi/kv_transport.hpp"
#include "ladder/mpi/tp.hpp"

namespace ladder::kvmig {

// The caches of a TP group's leader (rank 0 of tp_comm, after migrate_in) to every rank of the group:
// each TP rank holds the whole latent cache (MLA's rows serve every head). The leader's block lists and
// rows held, then the blocks holding prompt rows (each prompt's first blocks_for(L_b)), in one broadcast
// each; the other ranks take the same block ids from their own pools (make_decode_caches with the same
// seed), so every rank of the group has the same numbering. Returns the bytes of cache rows broadcast;
// seconds: the time from the first broadcast's end (every rank of the group has arrived: a rank waiting
// for its leader's migration does not count it) to this rank's last.
inline int64_t share_caches(const PipelineConfig& c, std::vector<DecodeCache>& d, const comm::Group& tp,
                            double* seconds = nullptr) {
  const int t = tp.rank();
  std::vector<int32_t> ids;
  std::vector<int64_t> lens;
  for (const DecodeCache& dl : d)
    for (int64_t b = 0; b < c.prompts(); ++b) {
      lens.push_back(dl.lens[static_cast<size_t>(b)]);
      require(t > 0 || static_cast<int64_t>(dl.blocks[static_cast<size_t>(b)].size()) == c.decode_need(b),
              "kv-migrate: TP leader holds {} blocks of prompt {}, violates {} (admitted whole)",
              dl.blocks[static_cast<size_t>(b)].size(), b, c.decode_need(b));
      for (int64_t i = 0; i < c.decode_need(b); ++i)
        ids.push_back(t == 0 ? dl.blocks[static_cast<size_t>(b)][static_cast<size_t>(i)] : -1);
    }
  tp.bcast(ids.data(), static_cast<int>(ids.size()), 0, "the TP group's block lists' broadcast");
  const auto t0 = Clock::now();
  tp.bcast(lens.data(), static_cast<int>(lens.size()), 0, "the TP group's row counts' broadcast");
  // The blocks holding rows, in (layer, prompt, logical block) order.
  const int64_t bf = d.empty() ? 0 : d[0].pool.block_floats();
  int64_t nblocks = 0;
  for (size_t l = 0; l < d.size(); ++l)
    for (int64_t b = 0; b < c.prompts(); ++b)
      nblocks += mla::blocks_for(c.prompt_lens[static_cast<size_t>(b)], c.block_size);
  require(nblocks * bf < (int64_t{1} << 31), "kv-migrate: {} cache floats to broadcast violates < 2^31 (one MPI count)",
          nblocks * bf);
  std::vector<float> rows(static_cast<size_t>(nblocks * bf));
  auto each_block = [&](auto&& f) {  // f(layer cache, its block id, position in `rows`)
    size_t at = 0, id = 0;
    for (DecodeCache& dl : d)
      for (int64_t b = 0; b < c.prompts(); ++b) {
        const int64_t used = mla::blocks_for(c.prompt_lens[static_cast<size_t>(b)], c.block_size);
        for (int64_t i = 0; i < c.decode_need(b); ++i, ++id)
          if (i < used) f(dl, ids[id], at), at += static_cast<size_t>(bf);
      }
  };
  if (t == 0)
    each_block([&](DecodeCache& dl, int32_t blk, size_t at) { std::copy_n(dl.pool.block(blk), bf, rows.data() + at); });
  tp.bcast(rows.data(), static_cast<int>(rows.size()), 0, "the TP group's cache broadcast");
  if (t > 0) {
    size_t id = 0, li = 0;
    for (DecodeCache& dl : d)
      for (int64_t b = 0; b < c.prompts(); ++b) {
        auto& own = dl.blocks[static_cast<size_t>(b)];
        own.clear();
        for (int64_t i = 0; i < c.decode_need(b); ++i) {
          dl.pool.claim(ids[id++]);
          own.push_back(ids[id - 1]);
        }
        dl.lens[static_cast<size_t>(b)] = lens[li++];
      }
    each_block([&](DecodeCache& dl, int32_t blk, size_t at) { std::copy_n(rows.data() + at, bf, dl.pool.block(blk)); });
  }
  if (seconds) *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return static_cast<int64_t>(rows.size() * sizeof(float));
}

// A rank's place on the decode side and its tensor parallelism (--decode-tp), what ladder-kv-migrate and
// ladder-serve-demo share: decode stage k and TP rank t of T (rank P + k T + t), the stage's group (a split
// of `world`, made by every rank: call the constructor on all), the stage's caches (the leader, t = 0,
// pulls them with migrate_in; it broadcasts them to the others, share_caches), this rank's head shards and
// the attention that runs them with the all-reduce, and the vote of the last stage's TP ranks.
class DecodeTp {
 public:
  DecodeTp(const Layout& lay, int rank, const comm::Group& world)
      : T_(lay.decode_tp), decoding_(rank >= lay.prefill_ranks),
        k_(decoding_ ? (rank - lay.prefill_ranks) / T_ : -1), t_(decoding_ ? (rank - lay.prefill_ranks) % T_ : -1),
        group_(T_ > 1 ? world.split(decoding_ ? static_cast<int>(k_) : -1, static_cast<int>(t_))
                      : comm::Group::none()) {}

  bool decoding() const { return decoding_; }
  int64_t stage() const { return k_; }
  int64_t tp_rank() const { return t_; }
  int64_t tp() const { return T_; }
  double share_s = 0;         // the cache broadcast on this rank (share_caches' seconds)
  int64_t shared_bytes = 0;   // cache bytes this rank broadcast (the leader: T - 1 copies)
  double allreduce_s = 0;     // the all-reduces of this rank's decode

  // This rank's caches for its stage's layers: pulled by the leader, broadcast to the other TP ranks.
  Migrated migrate(const PipelineConfig& c, const TransportOptions& o, const Layout& lay, int64_t kv_dim) {
    Migrated m;
    if (t_ == 0) m = migrate_in(c, o, lay, kv_dim, k_);
    else m.caches = make_decode_caches(c, kv_dim, c.seed + 29, first_layer(c, lay.decode_shards, k_),
                                       first_layer(c, lay.decode_shards, k_ + 1));
    if (T_ > 1) shared_bytes = share_caches(c, m.caches, group_, &share_s) * (t_ == 0 ? T_ - 1 : 0);
    return m;
  }

  // The attention of layers [l0, l1) on this TP rank: its heads' partial u, then the all-reduce in rank
  // order (plant_reverse, a test: TP rank 0 sums in reverse). Empty (the whole layer) when T = 1. Valid
  // while this object is.
  Attend attend(const std::vector<mla::Weights<float>>& W, int64_t l0, int64_t l1, bool plant_reverse = false) {
    if (T_ == 1) return {};
    shards_.clear();
    for (int64_t l = l0; l < l1; ++l) shards_.push_back(tp::shard_of(W[static_cast<size_t>(l)], t_, T_));
    return [this, l0, plant_reverse](int64_t l, const mla::PagedCache<float>& cache, const mla::Step<float>& step) {
      const auto rung = mla::reference_rung<float>(mla::Variant::flash_mla);
      const Mat<float> partial = mla::run(rung, shards_[static_cast<size_t>(l - l0)], cache, step).u;
      const auto a0 = Clock::now();
      Mat<float> u = tp::allreduce_in_rank_order(partial, group_, fmt::format("layer {}'s TP all-reduce", l),
                                                 plant_reverse && t_ == 0);
      allreduce_s += std::chrono::duration<double>(Clock::now() - a0).count();
      return u;
    };
  }

  // Every TP rank of the stage holds the same bytes of `us` (a hash of each rank's, min = max over the
  // group); true without TP. Every rank of the stage calls it.
  bool vote(const std::vector<Mat<float>>& us) const {
    if (T_ == 1) return true;
    uint64_t h = 1469598103934665603ull;
    for (const Mat<float>& u : us)
      for (const unsigned char *p = reinterpret_cast<const unsigned char*>(u.data()),
                               *e = p + static_cast<size_t>(u.size()) * sizeof(float);
           p < e; ++p)
        h = (h ^ *p) * 1099511628211ull;
    uint64_t lo = 0, hi = 0;
    group_.allreduce(&h, &lo, 1, comm::Op::min, "the TP ranks' vote");
    group_.allreduce(&h, &hi, 1, comm::Op::max, "the TP ranks' vote");
    return lo == hi;
  }

 private:
  int64_t T_;
  bool decoding_;
  int64_t k_, t_;
  comm::Group group_;
  std::vector<mla::Weights<float>> shards_;  // [layer - l0]: this rank's heads of each layer
};

}  // namespace ladder::kvmig
