// mpi/src/serve_demo.cpp -- ladder-serve-demo: a small prefill/decode-disaggregated, expert-parallel serving
// pipeline end to end on N local ranks, timed per stage and checked bit for bit against one process.
//
//   scripts/mpirun -np 4 ladder-serve-demo [--prompts 1,63,64,65,300] [--steps 4] [--layers 2]
//                                          [--layer-shards 1] [--decode-shards 1] [--decode-tp 1]
//                                          [--experts E] [--zipf] [--eplb-redundant R]
//   (--experts: by default the smallest multiple of N that is >= 8; --help prints the usage)
//
// Ranks 0 .. N-2 are prefill instances, rank N-1 the decode instance (DistServe OSDI'24: the phases on
// separate instances; with --decode-shards D the decode instance is the last D ranks, its layers split
// over D pipeline stages; with --decode-tp T each stage is T ranks running every MLA layer tensor-parallel,
// the heads split over them and one all-reduce of u per layer (ladder/mpi/tp.hpp, as ladder-tp-mla): the
// instance is the last D x T ranks; the stage's first rank pulls the stage's KV blocks and broadcasts them
// to the others, since under TP every rank holds the whole latent cache). 1. Prefill: each prefill rank
// runs the stack of stage 03 MLA layers over its prompts into its paged cache (with --layer-shards S the
// layers are split over S pipeline stages).
// 2. Migration: the decode rank pulls every layer's blocks into its own pools
// (ladder/mpi/kv_transport.hpp). 3. Decode: each step runs the MLA layers over the migrated caches
// (flash_mla) on the decode rank, then a MoE layer (stage 04: V3 gate, top-2, a shared expert) whose
// experts are spread E/N over ALL N ranks: the decode batch is dispatched and combined by all-to-all
// (ladder/mpi/ep_a2a.hpp). DeepSeek-V3's decode instances run their MoE expert-parallel over many GPUs
// (the Huawei report); here the prefill ranks, idle once their KV has left, hold experts too.
// --zipf: the gate's selection bias makes the experts' popularity Zipf-like (stage 04's make_bias), so some
// ranks' experts get most of the rows. --eplb-redundant R: the experts sit in E + R slots, (E + R)/N per
// rank, placed by stage 05's balancer (eplb.py's rebalance_experts, global policy) from the expert loads
// of the steps so far (DeepSeek's EPLB places from recent load statistics; before the first step the
// loads are taken as equal); a token's assignment to a replicated expert goes to one replica, round-robin
// by token. After every step the decode rank, which holds the whole batch, broadcasts the step's loads and
// every rank re-places. Every rank builds the whole layer's weights (they are small), so a re-placement
// moves no weights here; on real cards it moves the replicated experts' weights.
// Printed: prefill time (slowest prefill rank), migration time and rate (with --decode-tp, the cache's
// broadcast inside the instance), the decode step split into the MLA layers (of which the TP all-reduces)
// and the MoE all-to-all, the migration's share, the expert rows per rank (with the busiest
// rank's share under plain E/N sharding and, with --eplb-redundant, under the placement used), and one
// correctness line: the MLA output u
// and the MoE output y of every step against the same pipeline in one process (BIT-IDENTICAL or
// DIFFERENT (FAIL), exit 1); with --decode-tp the one-process pipeline sums the same head shards in the
// same order, and a second line says whether every TP rank of the last stage holds the same u (a vote).
// Planted (tests): --test-plant-tp-reverse-sum, TP rank 0 of every stage adds the partials in reverse order.
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/05-eplb/eplb.hpp"
#include "ladder/04-moe/dense.hpp"
#include "ladder/04-moe/gate.hpp"
#include "ladder/04-moe/synthetic.hpp"
#include "ladder/mpi/comm.hpp"
#include "ladder/mpi/ep_a2a.hpp"
#include "ladder/mpi/decode_tp.hpp"
#include "ladder/mpi/kv_transport.hpp"
#include "ladder/mpi/launch.hpp"
#include "ladder/mpi/tp.hpp"

namespace {

using namespace ladder;
using namespace ladder::kvmig;

struct Options {
  PipelineConfig cfg;
  TransportOptions t;
  moe::Index experts = 0;     // 0: the default, the smallest multiple of the rank count >= 8
  moe::Index redundant = 0;  // --eplb-redundant: extra expert slots placed by stage 05's balancer
  bool zipf = false;         // --zipf: Zipf-like expert popularity through the gate's selection bias
  bool plant_swap_weights = false;  // test: the MoE combine weights each output by the next top-k weight
  bool plant_tp_reverse_sum = false;  // test: TP rank 0 of each decode stage sums the partials in reverse
};

int64_t parse_int(const std::string& s, const char* what) { return ladder::mpi::parse_count(s, "serve-demo", what); }

Options parse(int argc, char** argv) {
  Options o;
  o.cfg.prompt_lens = {1, 63, 64, 65, 300};
  o.cfg.layers = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      require(i + 1 < argc, "serve-demo: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--prompts") {
      o.cfg.prompt_lens.clear();
      const std::string v = value();
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        o.cfg.prompt_lens.push_back(parse_int(v.substr(p, q - p), "--prompts"));
        p = q + 1;
      }
    } else if (a == "--steps") o.cfg.decode_steps = parse_int(value(), "--steps");
    else if (a == "--layers") o.cfg.layers = parse_int(value(), "--layers");
    else if (a == "--layer-shards") o.cfg.layer_shards = parse_int(value(), "--layer-shards");
    else if (a == "--decode-shards") o.cfg.decode_shards = parse_int(value(), "--decode-shards");
    else if (a == "--decode-tp") o.cfg.decode_tp = parse_int(value(), "--decode-tp");
    else if (a == "--decode-blocks") o.cfg.decode_blocks = parse_int(value(), "--decode-blocks");
    else if (a == "--experts") o.experts = ladder::mpi::parse_positive(value(), "serve-demo", "--experts");
    else if (a == "--eplb-redundant") o.redundant = parse_int(value(), "--eplb-redundant");
    else if (a == "--zipf") o.zipf = true;
    else if (a == "--timeout") o.t.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-plant-swap-weights") o.plant_swap_weights = true;
    else if (a == "--test-plant-tp-reverse-sum") o.plant_tp_reverse_sum = true;
    else throw Error(fmt::format("serve-demo: unknown argument '{}' (--help lists the options)", a));
  }
  require(o.t.timeout_s >= 1, "serve-demo: --timeout = {} violates >= 1 second", o.t.timeout_s);
  return o;
}

const char* const kUsage =
    "ladder-serve-demo: prefill ranks, KV-cache migration, decode steps whose MoE layer runs expert-parallel on\n"
    "every rank; u and y of every step checked bit for bit against one process.\n"
    "\n"
    "usage: scripts/mpirun -np N build/bin/ladder-serve-demo [options]     (any N >= 2: N - 1 prefill ranks, 1 decode)\n"
    "  --prompts L1,L2,...  prompt lengths, each 1..1048576 (default 1,63,64,65,300)\n"
    "  --steps S            decode steps, 1..1024 (default 4)\n"
    "  --layers L           MLA layers, 1..64 (default 2)\n"
    "  --layer-shards S     prefill pipeline stages, a divisor of the prefill ranks, <= L (default 1)\n"
    "  --decode-shards D    decode pipeline stages, <= L; the last D x T ranks decode (default 1)\n"
    "  --decode-tp T        tensor-parallel ranks per decode stage, a divisor of the model's 8 heads (default 1)\n"
    "  --decode-blocks K    the decode instance's pool in blocks (default 64)\n"
    "  --experts E          routed experts, a multiple of N, >= 2 (default: the smallest multiple of N >= 8)\n"
    "  --zipf               Zipf-like expert popularity (the gate's selection bias)\n"
    "  --eplb-redundant R   R redundant expert slots placed by stage 05's balancer; E + R a multiple of N\n"
    "  --timeout S          every wait's deadline in seconds, >= 1 (default 20)\n"
    "  --test-*             planted bugs the checks must catch (tests/mpi.cmake)\n"
    "  -h, --help           this text\n"
    "Chapter 06 section 15; the header of mpi/src/serve_demo.cpp.\n";

// The MoE layer after the MLA stack: hidden = the MLA model's, 61 inner, top-2 of E, a shared expert.
moe::Weights<double> moe_layer(const Options& o) {
  moe::Config m;
  m.hidden = mla::small_config().hidden, m.inter = 61, m.n_experts = o.experts, m.top_k = 2;
  m.route_scale = 2.5, m.shared_inter = 32;
  moe::check_config(m);
  moe::Weights<double> w = moe::make_weights(m, o.cfg.seed + 5);
  if (o.zipf) w.bias = moe::make_bias("zipf", o.experts, o.cfg.seed + 6);
  return w;
}

// The slots of E experts (+ R redundant) on N ranks: plain sharding (slot s = expert s) without EPLB,
// else stage 05's placement of E + R slots from the expert loads `load` [E].
ep::Slots place(const Options& o, int N, const std::vector<double>& load) {
  const moe::Index E = o.experts, R = o.redundant;
  std::vector<moe::Index> phy2log(static_cast<size_t>(E + R));
  if (R == 0) {
    for (moe::Index e = 0; e < E; ++e) phy2log[static_cast<size_t>(e)] = e;
  } else {
    Mat<double> w(1, E);
    for (moe::Index e = 0; e < E; ++e) w(0, e) = load[static_cast<size_t>(e)];
    const eplb::Placement pl = eplb::rebalance_experts(w, E + R, 1, 1, N);
    for (moe::Index sl = 0; sl < E + R; ++sl) phy2log[static_cast<size_t>(sl)] = pl.phy2log(0, sl);
  }
  return ep::make_slots(phy2log, E, N);
}

// Sum over steps of the busiest rank's rows, over the sum of the mean rank's: how long the expert part of
// the steps takes against a perfect balance. rows[t][r]: rows of rank r in step t.
double busiest_share(const std::vector<std::vector<int64_t>>& rows) {
  double mx = 0, mean = 0;
  for (const auto& st : rows) {
    int64_t m = 0, sum = 0;
    for (int64_t v : st) m = std::max(m, v), sum += v;
    mx += double(m), mean += double(sum) / double(st.size());
  }
  return mean > 0 ? mx / mean : 1.0;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int run(const Options& o, int rank, int N, const Layout& lay) {
  const PipelineConfig& c = o.cfg;
  // Every rank's collectives (comm.hpp), with the ordinary deadline and the steps' long one (below).
  const comm::Group world = comm::Group::world(o.t.timeout_s), world_slow = world.with_timeout(10 * o.t.timeout_s);
  const moe::Weights<double> w = moe_layer(o);
  const moe::Index E = o.experts;
  std::vector<double> load_sum(static_cast<size_t>(E), 0.0);  // expert loads of the steps so far
  ep::Slots slots = place(o, N, std::vector<double>(static_cast<size_t>(E), 1.0));
  const int last = N - 1;  // the last decode stage: the batch's MoE tokens live here
  std::vector<int64_t> expert_rows;  // [step] rows this rank's slots computed
  std::vector<int64_t> loads;        // [step][E] the batch's expert loads (every rank receives them)
  // Every rank joins every step; x: this rank's home tokens. The deadline is long: a prefill rank enters
  // the first step while the decode side is still migrating and running its MLA layers.
  auto moe_step = [&](const Mat<double>& x, bool plant) {
    moe::Routing<double> r{Array<moe::Index>({x.rows(), 2}), Array<double>({x.rows(), 2})};
    if (x.rows() > 0) r = moe::gate(w, x);
    ep::A2AOut a = ep::a2a_moe(w, x, r, 0, slots, world_slow, plant);
    int64_t n = 0;
    for (moe::Index g : a.group_sizes) n += g;
    expert_rows.push_back(n);
    // The step's expert loads, counted where the batch lives, to every rank; then every rank re-places.
    std::vector<int64_t> step_load(static_cast<size_t>(E), 0);
    for (moe::Index e : r.topk_idx.data) ++step_load[static_cast<size_t>(e)];
    world_slow.bcast(step_load.data(), static_cast<int>(E), last, "the expert loads' broadcast");
    loads.insert(loads.end(), step_load.begin(), step_load.end());
    for (moe::Index e = 0; e < E; ++e) load_sum[static_cast<size_t>(e)] += double(step_load[static_cast<size_t>(e)]);
    if (o.redundant > 0) slots = place(o, N, load_sum);
    if (x.rows() > 0) moe::add_shared(w, x, a.y);
    return a.y;
  };
  double prefill_s = 0, migrate_s = 0, decode_s = 0, moe_s = 0;
  int64_t bytes = 0;
  std::vector<Mat<float>> us;
  std::vector<Mat<double>> ys;
  const int64_t hidden = w.cfg.hidden, D = lay.decode_shards, T = lay.decode_tp;
  DecodeTp dtp(lay, rank, world_slow);  // this rank's decode stage and TP rank (every rank: the split)
  const int64_t k = dtp.stage(), tr = dtp.tp_rank();
  bool tp_same = true;  // the last stage's TP ranks all hold the same u (the vote below)
  if (!dtp.decoding()) {
    prefill_s = prefill_serve(c, o.t, rank, lay);
    for (int64_t t = 0; t < c.decode_steps; ++t) moe_step(Mat<double>(0, hidden), false);
  } else {  // decode stage k of D, TP rank tr of T: its layers (its heads of each), then (last rank) the MoE layer
    const int64_t l0 = first_layer(c, D, k), l1 = first_layer(c, D, k + 1);
    const std::vector<mla::Weights<float>> W = model(c);
    Migrated m = dtp.migrate(c, o.t, lay, W[0].cfg.kv_dim());  // the leader pulls, then the cache to every TP rank
    migrate_s = m.seconds, bytes = m.bytes;
    StepInput x_in;
    if (k > 0)
      x_in = [&](int64_t t) {  // from the same TP rank of the stage before
        Mat<float> x(c.prompts(), hidden);
        recv(x.data(), static_cast<int>(x.size()), MPI_FLOAT, lay.decode_rank(k - 1, tr), kActivation,
             10 * o.t.timeout_s, fmt::format("hidden states of decode step {} at layer {}", t, l0));
        return x;
      };
    const auto d0 = Clock::now();
    us = decode_layers(W, c, l0, l1, std::move(m.caches), x_in, [&](int64_t t, const Mat<float>& x) {
      if (k + 1 < D)
        send(x.data(), static_cast<int>(x.size()), MPI_FLOAT, lay.decode_rank(k + 1, tr), kActivation,
             10 * o.t.timeout_s, fmt::format("hidden states of decode step {} at layer {}", t, l1));
      const auto e0 = Clock::now();
      Mat<double> y = moe_step(rank == last ? Mat<double>(x.cast<double>()) : Mat<double>(0, hidden),
                               rank == last && o.plant_swap_weights);
      if (rank == last) ys.push_back(std::move(y));
      moe_s += since(e0);
    }, dtp.attend(W, l0, l1, o.plant_tp_reverse_sum));
    decode_s = since(d0);
    if (k + 1 == D) tp_same = dtp.vote(us);  // the same u bytes on every TP rank of the last stage
  }
  const double share_s = dtp.share_s, allreduce_s = dtp.allreduce_s;
  const int64_t shared_bytes = dtp.shared_bytes;
  // Per-rank figures to the last rank (non-blocking collectives with a deadline, like every wait here).
  double slowest_prefill = 0, slowest_migration = 0;
  int64_t all_bytes = 0;
  const int64_t steps = c.decode_steps;
  std::vector<int64_t> rows(static_cast<size_t>(N * steps));  // [rank][step]
  world.reduce(&prefill_s, &slowest_prefill, 1, comm::Op::max, last, "the prefill times' reduce");
  world.reduce(&migrate_s, &slowest_migration, 1, comm::Op::max, last, "the migration times' reduce");
  world.reduce(&bytes, &all_bytes, 1, comm::Op::sum, last, "the migrated bytes' reduce");
  double slowest_share = 0;
  int64_t all_shared = 0;
  world.reduce(&share_s, &slowest_share, 1, comm::Op::max, last, "the cache broadcasts' times' reduce");
  world.reduce(&shared_bytes, &all_shared, 1, comm::Op::sum, last, "the broadcast bytes' reduce");
  require(int64_t(expert_rows.size()) == steps, "serve-demo: rank {} ran {} MoE steps, violates --steps = {}", rank,
          expert_rows.size(), steps);
  world.gather(expert_rows.data(), static_cast<int>(steps), rows.data(), last, "the expert rows' gather");
  if (rank != last) return 0;
  migrate_s = slowest_migration, bytes = all_bytes;

  // The same pipeline in one process: prefill, admit, decode, the MoE layer on all tokens in one place.
  std::vector<Mat<double>> want_y;
  const std::vector<Mat<float>> want_u = one_process(c, [&](int64_t, const Mat<float>& u) {
    const Mat<double> x = u.cast<double>();
    want_y.push_back(moe::sorted_dropless(w, x, moe::gate(w, x)).y);
  });
  auto same = [](const auto& a, const auto& b) {
    bool eq = a.size() == b.size();
    for (size_t t = 0; eq && t < a.size(); ++t)
      eq = a[t].size() == b[t].size() &&
           std::memcmp(a[t].data(), b[t].data(), static_cast<size_t>(a[t].size()) * sizeof(*a[t].data())) == 0;
    return eq;
  };
  const bool u_same = same(us, want_u), y_same = same(ys, want_y);
  const int64_t w_heads = mla::small_config().n_heads;
  const double step_s = decode_s / double(c.decode_steps);
  fmt::print("serve-demo: {} ranks: {} prefill ({} group(s) x {} stage(s)) -> {} decode stage(s){}, {} MLA layers; MoE "
             "{} experts over all {} ranks ({} each), top-2, all-to-all dispatch/combine\n",
             N, lay.prefill_ranks, lay.groups(), lay.shards, D,
             T > 1 ? fmt::format(" x {} TP ranks ({} of the {} heads each)", T, w_heads / T, w_heads) : std::string(),
             c.layers, o.experts, N, o.experts / N);
  fmt::print("  prefill    {:9.3f} ms  (slowest prefill rank; prompts [{}])\n", slowest_prefill * 1e3,
             fmt::join(c.prompt_lens, ","));
  fmt::print("  migration  {:9.3f} ms  ({} bytes, {:.2f} GB/s)\n", migrate_s * 1e3, bytes, bytes / migrate_s / 1e9);
  if (T > 1)
    fmt::print("  TP cache   {:9.3f} ms  (slowest rank; each stage's first rank broadcasts the latent cache it pulled to "
               "the stage's {} other TP rank(s): {} bytes received in all)\n", slowest_share * 1e3, T - 1, all_shared);
  fmt::print("  decode     {:9.3f} ms per step over {} steps (MLA layers {:.3f} ms{} + MoE all-to-all {:.3f} ms)\n",
             step_s * 1e3, c.decode_steps, (decode_s - moe_s) / double(c.decode_steps) * 1e3,
             T > 1 ? fmt::format(" [the last stage's TP all-reduces {:.3f} ms of it; per layer each rank sends its "
                                 "[{}, {}] fp32 partial to {} other(s)]",
                                 allreduce_s / double(c.decode_steps) * 1e3, c.prompts(), hidden, T - 1)
                   : std::string(),
             moe_s / double(c.decode_steps) * 1e3);
  fmt::print("  migration = {:.2f} decode steps; migration / (migration + {} decode steps) = {:.1f}%\n",
             migrate_s / step_s, c.decode_steps, 100 * migrate_s / (migrate_s + decode_s));
  // Rows per rank and step as run, and as plain E/N sharding would have had them (expert e on rank e/(E/N)).
  std::vector<std::vector<int64_t>> ran(static_cast<size_t>(steps), std::vector<int64_t>(static_cast<size_t>(N)));
  auto plain = ran;
  std::vector<int64_t> total(static_cast<size_t>(N), 0);
  for (int64_t t = 0; t < steps; ++t)
    for (int q = 0; q < N; ++q) {
      const int64_t v = rows[static_cast<size_t>(q * steps + t)];
      ran[static_cast<size_t>(t)][static_cast<size_t>(q)] = v, total[static_cast<size_t>(q)] += v;
    }
  for (int64_t t = 0; t < steps; ++t)
    for (moe::Index e = 0; e < E; ++e)
      plain[static_cast<size_t>(t)][static_cast<size_t>(e / (E / N))] += loads[static_cast<size_t>(t * E + e)];
  fmt::print("  expert rows per rank over the steps: {}; busiest rank / mean, summed over the steps: plain E/N "
             "sharding {:.2f}{}\n",
             fmt::join(total, " "), busiest_share(plain),
             o.redundant ? fmt::format(", EPLB with {} redundant slots {:.2f} (from step 2 on: {:.2f} vs {:.2f})",
                                       o.redundant, busiest_share(ran),
                                       busiest_share({ran.begin() + std::min<int64_t>(1, steps), ran.end()}),
                                       busiest_share({plain.begin() + std::min<int64_t>(1, steps), plain.end()}))
                         : std::string());
  if (T > 1)
    fmt::print("  TP ranks of the last decode stage hold the same u (a vote over its {} ranks): {}\n", T,
               tp_same ? "SAME" : "DIFFERENT (FAIL)");
  fmt::print("  decode output vs one process (MLA u and MoE y of every step): {}\n",
             u_same && y_same ? "BIT-IDENTICAL"
                              : fmt::format("DIFFERENT (FAIL): u {}, y {}", u_same ? "same" : "different",
                                            y_same ? "same" : "different"));
  return u_same && y_same && tp_same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ladder::mpi::run_ranks(
      argc, argv, "ladder-serve-demo", kUsage,
      [&](int, int size, uint64_t& digest) {
        Options o = parse(argc, argv);
        require(size >= 2, "serve-demo: {} rank(s) violates >= 2 (prefill ranks + one decode rank; mpirun -np N)",
                size);
        if (o.experts == 0) o.experts = ladder::mpi::round_up_multiple(8, size);
        digest = o.cfg.digest() ^ (static_cast<uint64_t>(o.experts) * 0x9e3779b97f4a7c15ull) ^
                 (static_cast<uint64_t>(o.redundant) * 0xbf58476d1ce4e5b9ull) ^ (o.zipf ? 0x94d049bb133111ebull : 0);
        validate(o.cfg, "serve-demo");
        make_layout(o.cfg, size, "serve-demo");
        require(o.experts >= 2 && o.experts % size == 0, "serve-demo: --experts = {} violates a multiple (>= 2) of the "
                "rank count {} (every rank holds E/N experts)", o.experts, size);
        require(o.redundant >= 0 && (o.experts + o.redundant) % size == 0, "serve-demo: --experts + --eplb-redundant "
                "= {} violates a multiple of the rank count {} (every rank holds the same number of slots)",
                o.experts + o.redundant, size);
        moe_layer(o);
        return o;
      },
      [&](const Options& o, int rank, int size) { return run(o, rank, size, make_layout(o.cfg, size, "serve-demo")); });
}
