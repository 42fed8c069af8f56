// ladder/mpi/kv_transport.hpp -- moving a prompt's paged KV cache from prefill ranks to the decode rank
// over MPI, pull-based as in DistServe (OSDI'24): the functions ladder-kv-migrate and ladder-serve-demo
// share. The pipeline itself (what is computed) is ladder/mpi/kv_pipeline.hpp.
//
// Layout: P prefill ranks in P / S groups of S pipeline stages (S = layer_shards), then D x T decode ranks
// (D = decode_shards, T = decode_tp): one decode instance whose layers are split over D pipeline stages,
// each stage T tensor-parallel ranks (stage k is ranks P + k T .. P + k T + T - 1; its first is the stage's
// leader, which does the stage's migration below and then hands the cache to the others: decode_tp.hpp).
// Prefill rank r is stage r mod S of group r / S and holds layers [first_layer(S, s), first_layer(S, s + 1)) and their
// blocks; prompt b goes to group b mod (P / S). A prefill stage computes its layers and sends the
// prompt's hidden states to the next stage; a decode stage does the same on every decode step. This is
// DistServe's resharding case, prefill and decode partitioned differently: each decode stage pulls each
// of its layers' blocks from the prefill rank that owns that layer (any S and D: a decode stage may
// pull from several prefill stages, a prefill stage serve several decode stages), and the block table of
// every layer is rewritten into the decode side's own numbering.
//
// Protocol (two-sided request/response, MPI_Send / MPI_Irecv): a prefill rank announces a finished
// prompt (id, length, blocks, stage) to every decode stage that needs one of its layers; once every
// prefill stage holding one of its layers has announced, a decode stage admits the prompt when its pools
// have room for the prompt and its decode tokens, allocates its own blocks, asks each owner for its
// layers [lo, hi) in a shuffled block order and writes each block into its own. Only a prompt whose every
// block of every layer arrived is admitted; a prefill rank frees a layer's blocks when the decode stage
// that pulled them says DONE, and stops when every decode stage has said STOP. Why not one-sided MPI_Get: the decode rank would need the
// prefill rank's block numbering and a window over its whole pool, and a dead prefill rank would leave
// an MPI_Win_unlock that cannot time out; with messages every wait is a test loop with a deadline that
// names the peer.
#pragma once
#include <mpi.h>

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ladder/mpi/kv_pipeline.hpp"

namespace ladder::kvmig {

using Clock = std::chrono::steady_clock;

enum Tag : int { kAnnounce = 1, kPull = 2, kBlock = 3, kDone = 4, kStop = 5, kActivation = 6, kReport = 7 };

struct TransportOptions {
  double timeout_s = 20;
  int64_t die_after_blocks = -1;   // test: prefill rank 0 stops answering after sending this many blocks
  bool plant_ignore_order = false; // test: the decode rank ignores the order it asked for (must fail)
  bool plant_layer_offset = false; // test: the decode rank files stage s's layer l as layer l + 1 (must fail)
};

inline std::string peer_name(int source) {
  return source == MPI_ANY_SOURCE ? std::string("any rank") : fmt::format("rank {}", source);
}

// Waits for a request until the deadline; on timeout cancels it and throws naming the peer.
inline void wait_within(MPI_Request& req, MPI_Status* st, int peer, double timeout_s, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int done = 0;
  while (true) {
    MPI_Test(&req, &done, st);
    if (done) return;
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  MPI_Cancel(&req);
  MPI_Request_free(&req);
  throw Error(fmt::format("kv-migrate: no {} {} {} within {:.0f} s", what, st ? "from" : "taken by", peer_name(peer),
                          timeout_s));
}

// A receive that cannot hang: MPI_Irecv, then a test loop with a deadline naming the peer.
inline MPI_Status recv(void* buf, int count, MPI_Datatype type, int source, int tag, double timeout_s,
                       const std::string& what) {
  MPI_Request req;
  MPI_Irecv(buf, count, type, source, tag, MPI_COMM_WORLD, &req);
  MPI_Status st;
  wait_within(req, &st, source, timeout_s, what);
  return st;
}

// A send of a large message (rendezvous: it completes only when the peer receives) that cannot hang.
inline void send(const void* buf, int count, MPI_Datatype type, int dest, int tag, double timeout_s,
                 const std::string& what) {
  MPI_Request req;
  MPI_Isend(buf, count, type, dest, tag, MPI_COMM_WORLD, &req);
  wait_within(req, nullptr, dest, timeout_s, what);
}

struct Layout {
  int prefill_ranks = 1;
  int64_t shards = 1;         // prefill pipeline stages per group
  int64_t decode_shards = 1;  // decode pipeline stages
  int64_t decode_tp = 1;      // tensor-parallel ranks per decode stage
  int64_t groups() const { return prefill_ranks / shards; }
  int64_t group_of_prompt(int64_t b) const { return b % groups(); }
  int rank_of(int64_t group, int64_t stage) const { return static_cast<int>(group * shards + stage); }
  // TP rank t of decode stage k (t = 0: the stage's leader, the rank the prefill side talks to).
  int decode_rank(int64_t k, int64_t t = 0) const { return prefill_ranks + static_cast<int>(k * decode_tp + t); }
  int64_t decode_ranks() const { return decode_shards * decode_tp; }
};

// Checked on every rank before any message (every rank prints the same line).
inline Layout make_layout(const PipelineConfig& c, int ranks, const char* program = "kv-migrate") {
  require(ranks > c.decode_shards * c.decode_tp, "{}: {} ranks violates > --decode-shards = {}{} (at least one "
          "prefill rank)", program, ranks, c.decode_shards,
          c.decode_tp > 1 ? fmt::format(" x --decode-tp = {}", c.decode_tp) : std::string());
  const int prefill_ranks = ranks - static_cast<int>(c.decode_shards * c.decode_tp);
  require(prefill_ranks % c.layer_shards == 0,
          "{}: --layer-shards = {} violates a divisor of the prefill rank count {} (every group of prefill "
          "ranks holds all layers)", program, c.layer_shards, prefill_ranks);
  return Layout{prefill_ranks, c.layer_shards, c.decode_shards, c.decode_tp};
}

// The layers [lo, hi) two stages share (empty: lo >= hi).
inline std::pair<int64_t, int64_t> shared_layers(const PipelineConfig& c, int64_t shards_a, int64_t a, int64_t shards_b,
                                                 int64_t b) {
  return {std::max(first_layer(c, shards_a, a), first_layer(c, shards_b, b)),
          std::min(first_layer(c, shards_a, a + 1), first_layer(c, shards_b, b + 1))};
}

// A prefill rank: computes its stage's layers for its group's prompts, announces them, serves PULLs until
// every decode stage said STOP. Returns the seconds spent computing (the activations' waits included).
inline double prefill_serve(const PipelineConfig& c, const TransportOptions& o, int rank, const Layout& lay) {
  const std::vector<mla::Weights<float>> W = model(c);
  const int64_t g = rank / lay.shards, s = rank % lay.shards, G = lay.groups();
  const int64_t l0 = first_layer(c, lay.shards, s), l1 = first_layer(c, lay.shards, s + 1), nl = l1 - l0;
  const int64_t hidden = W[0].cfg.hidden;
  int64_t mine = 0;
  for (int64_t b = g; b < c.prompts(); b += G) mine += mla::blocks_for(c.prompt_lens[static_cast<size_t>(b)], c.block_size);
  BlockPool pool(std::max<int64_t>(mine * nl, 1), c.block_size, W[0].cfg.kv_dim(), c.seed + 100 + static_cast<uint64_t>(rank));
  std::vector<std::vector<int32_t>> held(static_cast<size_t>(c.prompts()));  // [prompt] -> blocks, layer-major
  // The rank's prompts are one prefill batch: all computed, then announced (so the decode rank's pulls,
  // and the migration time it measures, do not wait on this rank's arithmetic).
  std::vector<std::array<int64_t, 4>> announces;
  const auto t0 = Clock::now();
  for (int64_t b = g; b < c.prompts(); b += G) {
    const int64_t L = c.prompt_lens[static_cast<size_t>(b)];
    Mat<float> x(L, hidden);
    if (s == 0) x = prompt_hidden(c, b, hidden);
    else recv(x.data(), static_cast<int>(x.size()), MPI_FLOAT, rank - 1, kActivation, 10 * o.timeout_s,
              fmt::format("hidden states of prompt {} at layer {}", b, l0));
    const PrefillOut p = prefill_layers(W, c, l0, l1, std::move(x));
    if (s + 1 < lay.shards)
      send(p.x.data(), static_cast<int>(p.x.size()), MPI_FLOAT, rank + 1, kActivation, 10 * o.timeout_s,
           fmt::format("hidden states of prompt {} at layer {}", b, l1));
    const int64_t n = mla::blocks_for(L, c.block_size), kv_dim = W[0].cfg.kv_dim();
    auto& blocks = held[static_cast<size_t>(b)];
    for (int64_t i = 0; i < n * nl; ++i) blocks.push_back(pool.take());
    for (int64_t k = 0; k < nl; ++k) {
      const Mat<float>& rows = p.rows[static_cast<size_t>(k)];
      for (int64_t j = 0; j < L; ++j)
        std::copy(rows.row(j).data(), rows.row(j).data() + kv_dim,
                  pool.block(blocks[static_cast<size_t>(k * n + j / c.block_size)]) + (j % c.block_size) * kv_dim);
    }
    announces.push_back({b, L, n, s});
  }
  const double compute_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int64_t k = 0; k < lay.decode_shards; ++k) {
    const auto [lo, hi] = shared_layers(c, lay.shards, s, lay.decode_shards, k);
    if (lo < hi)
      for (const auto& a : announces) MPI_Send(a.data(), 4, MPI_INT64_T, lay.decode_rank(k), kAnnounce, MPI_COMM_WORLD);
  }
  // Serve PULL requests until every decode stage said STOP. The wait is long: prompts are admitted one at a time.
  int64_t sent = 0, stops = 0;
  std::vector<int64_t> msg(static_cast<size_t>(4 + c.max_blocks()));
  while (stops < lay.decode_shards) {
    MPI_Status st = recv(msg.data(), static_cast<int>(msg.size()), MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG,
                         10 * o.timeout_s, "PULL, DONE or STOP from a decode rank");
    const int peer = st.MPI_SOURCE;
    require(peer >= lay.prefill_ranks && (st.MPI_TAG == kStop || st.MPI_TAG == kDone || st.MPI_TAG == kPull),
            "kv-migrate: rank {}: unexpected message (tag {}) from rank {}", rank, st.MPI_TAG, peer);
    if (st.MPI_TAG == kStop) {
      ++stops;
      continue;
    }
    const int64_t b = msg[0], n = msg[1], lo = msg[2], hi = msg[3];
    require(b >= 0 && b < c.prompts() && b % G == g && l0 <= lo && lo < hi && hi <= l1,
            "kv-migrate: rank {}: request from rank {} for layers [{}, {}) of prompt {}, which this rank does not hold",
            rank, peer, lo, hi, b);
    auto& blocks = held[static_cast<size_t>(b)];
    const int64_t have = mla::blocks_for(c.prompt_lens[static_cast<size_t>(b)], c.block_size);
    require(n == have, "kv-migrate: rank {}: PULL of {} blocks for prompt {} which has {}", rank, n, b, have);
    if (st.MPI_TAG == kDone) {  // that decode stage holds every block of these layers: free ours
      for (int64_t i = (lo - l0) * n; i < (hi - l0) * n; ++i) {
        require(blocks[static_cast<size_t>(i)] >= 0, "kv-migrate: rank {}: DONE twice for prompt {}", rank, b);
        pool.give_back(blocks[static_cast<size_t>(i)]);
        blocks[static_cast<size_t>(i)] = -1;
      }
      continue;
    }
    // Every block of the request in flight at once (MPI_Isend), then one wait: the transfers overlap
    // instead of paying a rendezvous round trip per block. Layer by layer, each in the order asked.
    std::vector<MPI_Request> reqs;
    for (int64_t l = lo; l < hi; ++l)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t logical = msg[static_cast<size_t>(4 + i)];
        require(logical >= 0 && logical < n, "kv-migrate: rank {}: PULL asks block {} of prompt {} (has {})", rank,
                logical, b, n);
        if (o.die_after_blocks >= 0 && rank == 0 && sent == o.die_after_blocks) {
          MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);  // the half that was sent
          std::fprintf(stderr, "kv-migrate: rank %d: simulated death after sending %lld blocks (test)\n", rank,
                       static_cast<long long>(sent));
          std::this_thread::sleep_for(std::chrono::duration<double>(20 * o.timeout_s));  // killed by the abort
          std::_Exit(3);
        }
        reqs.emplace_back();
        MPI_Isend(pool.block(blocks[static_cast<size_t>((l - l0) * n + logical)]), static_cast<int>(pool.block_floats()),
                  MPI_FLOAT, peer, kBlock, MPI_COMM_WORLD, &reqs.back());
        ++sent;
      }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  }
  return compute_s;
}

struct Migrated {
  std::vector<DecodeCache> caches;                    // [layer - first layer of the decode stage]
  double seconds = 0;                                 // first PULL to last block, summed over prompts
  int64_t bytes = 0;
  std::vector<std::pair<double, double>> per_prompt;  // (bytes, seconds) of each prompt's migration
};

// Decode stage k: admits every prompt, pulling each of its layers' blocks from the prefill rank that owns
// the layer, then sends STOP to every prefill rank.
inline Migrated migrate_in(const PipelineConfig& c, const TransportOptions& o, const Layout& lay, int64_t kv_dim,
                           int64_t k = 0) {
  const int64_t S = lay.shards, d0 = first_layer(c, lay.decode_shards, k), d1 = first_layer(c, lay.decode_shards, k + 1);
  Migrated m;
  m.caches = make_decode_caches(c, kv_dim, c.seed + 29, d0, d1);  // not the reference's numbering
  std::vector<DecodeCache>& d = m.caches;
  Rng order_rng(c.seed + 4242 + static_cast<uint64_t>(k));
  int64_t expect = 0;  // bit s: prefill stage s holds one of this stage's layers
  for (int64_t s = 0; s < S; ++s) {
    const auto [lo, hi] = shared_layers(c, S, s, lay.decode_shards, k);
    if (lo < hi) expect |= int64_t{1} << s;
  }
  std::vector<int64_t> stages_in(static_cast<size_t>(c.prompts()), 0);  // bit s: stage s announced
  std::vector<int64_t> msg(static_cast<size_t>(4 + c.max_blocks()));
  for (int64_t admitted = 0; admitted < c.prompts();) {
    int64_t announce[4];
    const MPI_Status st = recv(announce, 4, MPI_INT64_T, MPI_ANY_SOURCE, kAnnounce, 10 * o.timeout_s, "ANNOUNCE");
    const int peer = st.MPI_SOURCE;
    const int64_t b = announce[0], L = announce[1], n = announce[2], s = announce[3];
    require(b >= 0 && b < c.prompts() && L == c.prompt_lens[static_cast<size_t>(b)] &&
                n == mla::blocks_for(L, c.block_size) && s >= 0 && s < S && (expect >> s & 1) &&
                peer == lay.rank_of(lay.group_of_prompt(b), s) && !(stages_in[static_cast<size_t>(b)] >> s & 1),
            "kv-migrate: rank {} announced prompt {} of {} tokens in {} blocks (stage {}), which the configuration "
            "does not have", peer, b, L, n, s);
    stages_in[static_cast<size_t>(b)] |= int64_t{1} << s;
    if (stages_in[static_cast<size_t>(b)] != expect) continue;  // wait for every layer's owner
    // Admission: room for the prompt AND its decode tokens in every layer, before any block is requested.
    require(d[0].pool.free_blocks() >= c.decode_need(b),
            "kv-migrate: decode rank: prompt {} needs {} blocks per layer, {} free: not admitted", b, c.decode_need(b),
            d[0].pool.free_blocks());
    for (DecodeCache& dl : d)
      for (int64_t i = 0; i < c.decode_need(b); ++i) dl.blocks[static_cast<size_t>(b)].push_back(dl.pool.take());
    const std::vector<int32_t> order = mla::permutation(n, order_rng);
    msg[0] = b, msg[1] = n;
    for (int64_t i = 0; i < n; ++i) msg[static_cast<size_t>(4 + i)] = order[static_cast<size_t>(i)];
    const auto t0 = Clock::now();
    // Every block's receive is posted at once, straight into its own block (MPI matches messages of one
    // source and tag in the order they were sent, which is the order asked for), then one deadline.
    std::vector<MPI_Request> reqs;
    std::vector<int> from;  // the peer of each request
    for (int64_t s2 = 0; s2 < S; ++s2) {
      const auto [lo, hi] = shared_layers(c, S, s2, lay.decode_shards, k);
      if (lo >= hi) continue;
      const int owner = lay.rank_of(lay.group_of_prompt(b), s2);
      msg[2] = lo, msg[3] = hi;
      MPI_Send(msg.data(), static_cast<int>(4 + n), MPI_INT64_T, owner, kPull, MPI_COMM_WORLD);
      for (int64_t l = lo; l < hi; ++l) {
        const int64_t into = o.plant_layer_offset ? d0 + (l - d0 + 1) % (d1 - d0) : l;
        DecodeCache& dl = d[static_cast<size_t>(into - d0)];
        for (int64_t i = 0; i < n; ++i) {
          const int64_t logical = o.plant_ignore_order ? i : order[static_cast<size_t>(i)];
          reqs.emplace_back();
          from.push_back(owner);
          MPI_Irecv(dl.pool.block(dl.blocks[static_cast<size_t>(b)][static_cast<size_t>(logical)]),
                    static_cast<int>(dl.pool.block_floats()), MPI_FLOAT, owner, kBlock, MPI_COMM_WORLD, &reqs.back());
        }
      }
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(o.timeout_s);
    int all = 0;
    for (int64_t polls = 0;; ++polls) {  // spin first (progress for the transfers), then yield the core
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &all, MPI_STATUSES_IGNORE);
      if (all || Clock::now() > deadline) break;
      if (polls > 100000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (!all) {
      int missing_from = -1;
      int64_t received = 0, expected = 0;
      std::vector<char> arrived(reqs.size(), 0);
      for (size_t i = 0; i < reqs.size(); ++i) {
        int flag = reqs[i] == MPI_REQUEST_NULL;
        if (!flag) MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
        arrived[i] = static_cast<char>(flag);
        if (!flag) {
          MPI_Cancel(&reqs[i]);
          MPI_Request_free(&reqs[i]);
          if (missing_from < 0) missing_from = from[i];
        }
      }
      for (size_t i = 0; i < reqs.size(); ++i)
        if (from[i] == missing_from) ++expected, received += arrived[i];
      for (DecodeCache& dl : d) {  // nothing of a half-received prompt stays, in any layer
        for (int32_t blk : dl.blocks[static_cast<size_t>(b)]) dl.pool.give_back(blk);
        dl.blocks[static_cast<size_t>(b)].clear();
      }
      throw Error(fmt::format("kv-migrate: decode rank: no block {} of {} of prompt {} ({} received) from rank {} "
                              "within {:.0f} s; the prompt is not admitted and nothing is decoded",
                              received + 1, expected, b, received, missing_from, o.timeout_s));
    }
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    const double bytes = double(reqs.size()) * double(d[0].pool.block_floats()) * double(sizeof(float));
    m.seconds += took;
    m.bytes += static_cast<int64_t>(bytes);
    m.per_prompt.emplace_back(bytes, took);
    for (DecodeCache& dl : d) dl.lens[static_cast<size_t>(b)] = L;  // admitted: every block of every layer arrived
    for (int64_t s2 = 0; s2 < S; ++s2) {
      const auto [lo, hi] = shared_layers(c, S, s2, lay.decode_shards, k);
      if (lo >= hi) continue;
      const int64_t done[4] = {b, n, lo, hi};
      MPI_Send(done, 4, MPI_INT64_T, lay.rank_of(lay.group_of_prompt(b), s2), kDone, MPI_COMM_WORLD);
    }
    ++admitted;
  }
  for (int r = 0; r < lay.prefill_ranks; ++r) {
    const int64_t stop[4] = {-1, 0, 0, 0};
    MPI_Send(stop, 4, MPI_INT64_T, r, kStop, MPI_COMM_WORLD);
  }
  return m;
}

}  // namespace ladder::kvmig
