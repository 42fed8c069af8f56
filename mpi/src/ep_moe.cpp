// mpi/src/ep_moe.cpp -- ladder-ep-moe: one MoE layer (stage 04) with expert parallelism across MPI ranks
// (the second MPI program beside ladder-kv-migrate), checked against the same layer in one process.
//
//   scripts/mpirun -np P ladder-ep-moe [--variant a2a|ag-rs] [--tokens T] [--experts E] [--topk 2] [--zipf]
//                                      [--nodes N] [--eplb-redundant R] [--timeout S]
//   (by default T is the smallest multiple of P >= 64 and E the smallest multiple of P and of the 4 expert
//   groups >= 8, so every P runs; --help prints the usage)
//
// Rank r holds experts [r E/P, (r+1) E/P) and is the home of tokens [r T/P, (r+1) T/P). Every rank runs
// the gate on its own tokens (stage 04's V3 gate), then:
//   a2a    dispatch: counts exchanged with MPI_Alltoall, then each assignment's token row sent to the
//          rank of its expert with MPI_Alltoallv (ladder/mpi/ep_a2a.hpp, shared with ladder-serve-demo: the
//          non-blocking forms, each waited on with a deadline); that rank sorts what it received by expert (stage 04's
//          counting sort) and runs the grouped products (ragged dot); combine: the outputs go back with
//          MPI_Alltoallv in the order they came, and the home rank sums them weighted, in j order.
//   ag-rs  the Huawei report's alternative: MPI_Allgather of every token row and routing, each rank
//          computes the weighted sum of its own experts' outputs for every token, and MPI_Reduce_scatter
//          sums the partial outputs onto the home ranks.
// --nodes N: the P ranks stand for N nodes of P/N cards (rank r on node r / (P/N)). ag-rs then gathers
// hierarchically, as the Huawei report does: an MPI_Allgather among the cards with the same index on
// every node (the only inter-node step: each card receives the (N - 1) BS rows of its peers), then one
// inside the node. Every run prints the dispatch rows each card received from other nodes, counted at
// the MPI calls, in units of BS (tokens per card), beside the model: (N - 1) for the hierarchical
// AllGather, k (N - 1) / N in expectation for All2All (`ladder reproduce 04-moe` runs both).
// --deepep normal|low_latency --case CASE --out DIR: DeepEP's dispatch / combine buffers of a `ladder deepep write`
// case across the ranks, written as a candidate folder for `ladder check` (mpi/src/ep_deepep.cpp says how).
// --eplb-redundant R: stage 05's balancer places E + R expert slots on the P ranks from this batch's
// expert loads (its global policy, eplb.py's rebalance_experts); an assignment to a replicated expert
// goes to replica (token id mod replicas), round-robin by token as DeepSeek's dispatch does. The run
// prints the rows per rank, max / mean, with and without the placement.
// Checks, on every run: routing and per-rank group sizes equal the one-process layer's exactly; the
// layer output within the tolerance rule of the one-process fp64 layer (a2a: bit-identical, since the
// fp64 products are fixed-order loops and the weighted sum runs in the same order); the bytes each
// rank sent, counted at the MPI calls, equal the count derived from the routing alone.
// Every collective goes through comm::Group (ladder/mpi/comm.hpp) with a deadline (--timeout S, 60 by
// default): a rank that never joins (--test-absent-rank R, a test) is one error naming the collective on
// every other rank and an aborted job, not a hang.
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ladder/05-eplb/eplb.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/04-moe/dense.hpp"
#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/gate.hpp"
#include "ladder/04-moe/sorted.hpp"
#include "ladder/04-moe/synthetic.hpp"
#include "ladder/mpi/comm.hpp"
#include "ladder/mpi/ep_a2a.hpp"
#include "ladder/mpi/ep_deepep.hpp"
#include "ladder/mpi/launch.hpp"

namespace {

using namespace ladder;
using namespace ladder::moe;

struct Options {
  std::string variant = "a2a";
  Index tokens = 0;  // 0 here and in cfg.n_experts: the defaults, resolved against the rank count (setup)
  Config cfg;
  bool zipf = false;
  bool plant_swap_weights = false;
  bool plant_node_order = false;  // test: the hierarchical gather places each node's block one node off (must fail)
  Index nodes = 1;      // ranks grouped into this many nodes (inter-node rows counted; ag-rs gathers hierarchically)
  Index redundant = 0;  // EPLB: extra expert slots (stage 05 places E + redundant replicas on the ranks)
  double timeout_s = 60;  // every collective's deadline (comm.hpp)
  int absent_rank = -1;   // test: this rank never joins a collective (the others must fail by the deadline)
  uint64_t seed = 1202;
  ep::DeepEpOptions deepep;  // --deepep MODE --case CASE --out DIR: DeepEP's buffers (mpi/src/ep_deepep.cpp)
};

Index parse_int(const std::string& s, const char* what) { return ladder::mpi::parse_count(s, "ep-moe", what); }

Options parse(int argc, char** argv) {
  Options o;
  o.cfg.hidden = 97, o.cfg.inter = 61, o.cfg.n_experts = 0, o.cfg.top_k = 2, o.cfg.n_group = 4, o.cfg.topk_group = 2;
  o.cfg.route_scale = 2.5, o.cfg.shared_inter = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      require(i + 1 < argc, "ep-moe: {} needs a value", a);
      return argv[++i];
    };
    if (a == "--variant") o.variant = value();
    else if (a == "--tokens") o.tokens = ladder::mpi::parse_positive(value(), "ep-moe", "--tokens");
    else if (a == "--experts") o.cfg.n_experts = ladder::mpi::parse_positive(value(), "ep-moe", "--experts");
    else if (a == "--groups") o.cfg.n_group = parse_int(value(), "--groups");
    else if (a == "--topk") o.cfg.top_k = parse_int(value(), "--topk");
    else if (a == "--hidden") o.cfg.hidden = parse_int(value(), "--hidden");
    else if (a == "--zipf") o.zipf = true;
    else if (a == "--nodes") o.nodes = parse_int(value(), "--nodes");
    else if (a == "--eplb-redundant") o.redundant = parse_int(value(), "--eplb-redundant");
    else if (a == "--test-plant-swap-weights") o.plant_swap_weights = true;
    else if (a == "--test-plant-node-order") o.plant_node_order = true;
    else if (a == "--deepep") o.deepep.mode = value();
    else if (a == "--case") o.deepep.case_dir = value();
    else if (a == "--out") o.deepep.out = value();
    else if (a == "--test-plant-next-rank") o.deepep.plant_next_rank = true;
    else if (a == "--test-plant-drop-scale") o.deepep.plant_drop_scale = true;
    else if (a == "--timeout") o.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-absent-rank") o.absent_rank = static_cast<int>(parse_int(value(), "--test-absent-rank"));
    else throw Error(fmt::format("ep-moe: unknown argument '{}' (--help lists the options)", a));
  }
  require(o.variant == "a2a" || o.variant == "ag-rs", "ep-moe: --variant '{}' violates a2a or ag-rs", o.variant);
  require(o.timeout_s >= 1, "ep-moe: --timeout = {} violates >= 1 second", o.timeout_s);
  if (!o.deepep.mode.empty()) ep::deepep_layout(o.deepep.mode);  // names --deepep when it is neither mode
  require(!o.deepep.mode.empty() || (o.deepep.case_dir.empty() && o.deepep.out.empty() && !o.deepep.plant_next_rank &&
          !o.deepep.plant_drop_scale), "ep-moe: --case, --out and --test-plant-next-rank / drop-scale violate "
          "--deepep normal|low_latency given");
  o.deepep.timeout_s = o.timeout_s;
  return o;
}

const char* const kUsage =
    "ladder-ep-moe: one MoE layer (stage 04) expert-parallel over the ranks, checked against the same layer in\n"
    "one process (routing and group sizes exact, output within the tolerance rule, bytes equal to the routing's).\n"
    "\n"
    "usage: scripts/mpirun -np P build/bin/ladder-ep-moe [options]     (any P >= 1)\n"
    "  --variant a2a|ag-rs  all-to-all dispatch / combine, or AllGather + ReduceScatter (default a2a)\n"
    "  --tokens T           tokens, a multiple of P (default: the smallest multiple of P >= 64)\n"
    "  --experts E          routed experts, a multiple of P and of --groups (default: the smallest such E >= 8)\n"
    "  --groups G, --topk K expert groups (default 4) and experts per token (default 2)\n"
    "  --hidden D           hidden size (default 97)\n"
    "  --zipf               Zipf-like expert popularity (the gate's selection bias)\n"
    "  --nodes N            the ranks as N nodes of P / N cards, N a divisor of P (default 1)\n"
    "  --eplb-redundant R   R redundant expert slots placed by stage 05's balancer; E + R a multiple of P\n"
    "  --timeout S          every collective's deadline in seconds, >= 1 (default 60)\n"
    "  --deepep MODE        normal | low_latency: DeepEP's dispatch / combine buffers of a case (chapter 04 section 12)\n"
    "  --case C, --out DIR  with --deepep: a `ladder deepep write` case (-np = its num_ranks); the folder for `ladder check`\n"
    "  --test-*             planted bugs and failures the checks must catch (tests/mpi.cmake)\n"
    "  -h, --help           this text\n"
    "Chapter 04 section 6; the header of mpi/src/ep_moe.cpp.\n";

// Every check of the arguments against the rank count P, local to the rank (run_ranks shares the verdict).
Options setup(int argc, char** argv, int P) {
  Options o = parse(argc, argv);
  if (!o.deepep.mode.empty()) ep::deepep_setup(o.deepep, P);
  if (o.tokens == 0) o.tokens = ladder::mpi::round_up_multiple(64, P);
  if (o.cfg.n_experts == 0) {
    Index m = P;  // lcm(P, groups)
    while (o.cfg.n_group >= 1 && m % o.cfg.n_group != 0) m += P;
    o.cfg.n_experts = ladder::mpi::round_up_multiple(8, m);
  }
  check_config(o.cfg);
  const Index E = o.cfg.n_experts, T = o.tokens;
  require(E % P == 0, "ep-moe: --experts = {} violates a multiple of the rank count {} (experts are sharded E/P per "
          "rank, and the plain sharding is the comparison point)", E, P);
  require(T % P == 0 && T >= P, "ep-moe: --tokens = {} violates a positive multiple of the rank count {}", T, P);
  require((E + o.redundant) % P == 0, "ep-moe: --experts + --eplb-redundant = {} violates a multiple of the rank "
          "count {} (every rank holds the same number of slots)", E + o.redundant, P);
  require(o.nodes >= 1 && P % o.nodes == 0, "ep-moe: --nodes = {} violates a divisor of the rank count {} (every node "
          "holds the same number of cards)", o.nodes, P);
  return o;
}

uint64_t digest(const Options& o) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (char ch : o.variant) mix(static_cast<uint64_t>(ch));
  for (Index v : {o.tokens, o.cfg.n_experts, o.cfg.n_group, o.cfg.top_k, o.cfg.hidden, o.nodes, o.redundant})
    mix(static_cast<uint64_t>(v));
  mix((o.zipf ? 1u : 0u) | (o.plant_swap_weights ? 2u : 0u) | (o.plant_node_order ? 4u : 0u));
  mix(static_cast<uint64_t>(o.timeout_s)), mix(static_cast<uint64_t>(o.absent_rank + 1)), mix(o.seed);
  for (const std::string* s : {&o.deepep.mode, &o.deepep.case_dir, &o.deepep.out})
    for (char ch : *s + '\0') mix(static_cast<uint64_t>(ch));
  mix((o.deepep.plant_next_rank ? 1u : 0u) | (o.deepep.plant_drop_scale ? 2u : 0u));
  return h;
}

struct Layer {
  Weights<double> w;
  Mat<double> x;  // [T, D], all tokens (each rank draws the same; it uses only its own rows)
};

Layer make_layer(const Options& o) {
  Layer l{make_weights(o.cfg, o.seed), make_tokens(o.tokens, o.cfg.hidden, o.seed + 1)};
  if (o.zipf) l.w.bias = make_bias("zipf", o.cfg.n_experts, o.seed + 2);
  return l;
}

// Runs after setup's checks passed on every rank (run_ranks); an error here aborts the job.
int run(const Options& o, int rank, int P) {
  if (!o.deepep.mode.empty()) return ep::deepep_run_ranks(o.deepep, rank, P);
  const Index E = o.cfg.n_experts, T = o.tokens, D = o.cfg.hidden, k = o.cfg.top_k;
  const Index S = (E + o.redundant) / P, Tp = T / P, t0 = rank * Tp;
  const comm::Group world = comm::Group::world(o.timeout_s);  // every collective's deadline (comm.hpp)
  if (rank == o.absent_rank) {  // test: this rank never joins; the others' first collective must time out
    std::this_thread::sleep_for(std::chrono::duration<double>(10 * o.timeout_s));  // ended by their abort
    return 3;
  }
  const int C = static_cast<int>(P / o.nodes);  // cards per node
  auto node_of = [C](int q) { return q / C; };
  int64_t inter_rows = 0;  // dispatch rows this rank received from ranks on other nodes, counted at the calls
  const Layer l = make_layer(o);
  const Mat<double> xh = l.x.middleRows(t0, Tp);
  const Routing<double> r = gate(l.w, xh);  // home tokens only
  // The one-process layer (every rank computes it; it is also this batch's load statistics for EPLB).
  const Routing<double> rall = gate(l.w, l.x);
  const LayerOut<double> ref = sorted_dropless(l.w, l.x, rall);
  // Slots: without EPLB slot s holds expert s; with it, stage 05's placement of E + R slots.
  std::vector<Index> phy2log(static_cast<size_t>(E + o.redundant));
  if (o.redundant == 0) {
    for (Index e = 0; e < E; ++e) phy2log[static_cast<size_t>(e)] = e;
  } else {
    Mat<double> load = Mat<double>::Zero(1, E);
    for (Index g = 0; g < E; ++g) load(0, g) = double(ref.group_sizes[static_cast<size_t>(g)]);
    const eplb::Placement pl = eplb::rebalance_experts(load, E + o.redundant, 1, 1, P);
    for (Index sl = 0; sl < E + o.redundant; ++sl) phy2log[static_cast<size_t>(sl)] = pl.phy2log(0, sl);
  }
  const ep::Slots slots = ep::make_slots(phy2log, E, P);
  auto slot_of = [&](Index token, Index e) { return slots.slot_of(token, e); };
  auto rank_of = [&](Index slot) { return slots.rank_of(slot); };
  Mat<double> y = Mat<double>::Zero(Tp, D);
  std::vector<Index> my_group_sizes(static_cast<size_t>(S), 0);
  int64_t sent_bytes = 0, model_bytes = 0;
  auto wa = [&](Index a) { return o.plant_swap_weights ? (a / k) * k + (a % k + 1) % k : a; };  // planted bug

  if (o.variant == "a2a") {
    // Dispatch, grouped products, combine: ladder/mpi/ep_a2a.hpp.
    ep::A2AOut a = ep::a2a_moe(l.w, xh, r, t0, slots, world, o.plant_swap_weights);
    y = std::move(a.y);
    my_group_sizes = a.group_sizes;
    sent_bytes = a.sent_bytes;
    for (int p = 0; p < P; ++p)
      if (node_of(p) != node_of(rank)) inter_rows += a.recv_rows[static_cast<size_t>(p)];
  } else {
    // AllGather every token row and its routing; each rank computes its experts' weighted outputs for all
    // tokens; ReduceScatter sums the partials onto the home ranks.
    Mat<double> xall(T, D);
    if (o.nodes == 1) {
      world.allgather(xh.data(), static_cast<int>(Tp * D), xall.data(), "the token rows' all-gather");
    } else {
      // Hierarchical: across nodes among the cards with the same local index, then inside the node.
      const int N = static_cast<int>(o.nodes), local = rank % C;
      const comm::Group across = world.split(local, node_of(rank));  // its rank there = the node
      const comm::Group inside = world.split(node_of(rank), local);  // its rank there = the local index
      std::vector<double> peers(static_cast<size_t>(N * Tp * D));   // [node][Tp][D] of local index `local`
      across.allgather(xh.data(), static_cast<int>(Tp * D), peers.data(), "the across-node all-gather");
      const int across_size = across.size(), across_rank = across.rank();
      for (int m = 0; m < across_size; ++m)  // the across step's receive count from each other node's card
        if (m != across_rank) inter_rows += int64_t{Tp * D} / D;
      std::vector<double> all(static_cast<size_t>(T * D));           // [local][node][Tp][D]
      inside.allgather(peers.data(), static_cast<int>(N * Tp * D), all.data(), "the in-node all-gather");
      for (int l2 = 0; l2 < C; ++l2)
        for (int n = 0; n < N; ++n)  // rank n C + l2's block -> its tokens' rows
          std::copy_n(all.data() + (static_cast<size_t>(l2) * N + static_cast<size_t>(n)) * static_cast<size_t>(Tp * D),
                      Tp * D, xall.data() + static_cast<size_t>(((o.plant_node_order ? n + 1 : n) % N) * C + l2) *
                                                static_cast<size_t>(Tp * D));
    }
    std::vector<int64_t> idx(static_cast<size_t>(T * k));
    std::vector<double> wts(static_cast<size_t>(T * k));
    world.allgather(r.topk_idx.data.data(), static_cast<int>(Tp * k), idx.data(), "the routing's all-gather");
    world.allgather(r.topk_weight.data.data(), static_cast<int>(Tp * k), wts.data(), "the weights' all-gather");
    // This rank's block reaches every other rank once: flat, to P - 1 ranks; hierarchical, to N - 1 peers
    // across and then N blocks to C - 1 cards inside: (N - 1) + N (C - 1) = P - 1 blocks either way.
    sent_bytes += int64_t{P - 1} * Tp * D * 8;
    if (o.nodes == 1) inter_rows = 0;  // one node: nothing crosses
    std::vector<Index> keys(static_cast<size_t>(T * k));
    for (Index a = 0; a < T * k; ++a) {
      const Index sl = slot_of(a / k, idx[static_cast<size_t>(a)]);
      keys[static_cast<size_t>(a)] = rank_of(sl) == rank ? sl - rank * S : S;  // other ranks' slots: sentinel
    }
    const Permutation p = sort_by_key(keys, S);
    my_group_sizes = p.group_sizes;
    const Mat<double> o = ep::slot_products(l.w, slots, rank, gather_rows(xall, p.sort_idx, k, T * k), p.group_sizes);
    Mat<double> partial = Mat<double>::Zero(T, D);
    for (Index a = 0; a < T * k; ++a)
      if (keys[static_cast<size_t>(a)] < S)
        partial.row(a / k) += wts[static_cast<size_t>(wa(a))] * o.row(p.inverse[static_cast<size_t>(a)]);
    std::vector<int> counts(static_cast<size_t>(P), static_cast<int>(Tp * D));
    world.reduce_scatter(partial.data(), y.data(), counts, comm::Op::sum, "the partial outputs' reduce-scatter");
    sent_bytes += int64_t{P - 1} * Tp * D * 8;  // reduce-scatter: each rank's share of the other ranks' rows
  }
  add_shared(l.w, xh, y);

  bool routing_same = true;
  for (Index i = 0; i < Tp * k; ++i)
    routing_same = routing_same && r.topk_idx.data[static_cast<size_t>(i)] == rall.topk_idx.data[static_cast<size_t>(t0 * k + i)] &&
                   r.topk_weight.data[static_cast<size_t>(i)] == rall.topk_weight.data[static_cast<size_t>(t0 * k + i)];
  // Group sizes: the rows of each logical expert, summed over its slots on every rank, equal the
  // one-process layer's (without EPLB each expert has one slot, so this is the per-rank equality).
  std::vector<int64_t> per_expert(static_cast<size_t>(E), 0), all_expert(static_cast<size_t>(E), 0);
  for (Index g = 0; g < S; ++g) per_expert[static_cast<size_t>(phy2log[static_cast<size_t>(rank * S + g)])] += my_group_sizes[static_cast<size_t>(g)];
  world.allreduce(per_expert.data(), all_expert.data(), static_cast<int>(E), comm::Op::sum, "the group sizes' all-reduce");
  bool groups_same = true;
  for (Index e = 0; e < E; ++e) groups_same = groups_same && all_expert[static_cast<size_t>(e)] == ref.group_sizes[static_cast<size_t>(e)];
  // Rows per rank (the load EPLB balances), with this run's slots and with the plain E/P sharding.
  int64_t my_rows = 0;
  for (Index g : my_group_sizes) my_rows += g;
  std::vector<int64_t> rows(static_cast<size_t>(P));
  world.allgather(&my_rows, 1, rows.data(), "the rows per rank's all-gather");
  std::vector<int64_t> plain(static_cast<size_t>(P), 0);
  for (Index e = 0; e < E; ++e) plain[static_cast<size_t>(e / (E / P))] += ref.group_sizes[static_cast<size_t>(e)];
  auto imbalance = [](const std::vector<int64_t>& v) {
    int64_t mx = 0, sum = 0;
    for (int64_t x : v) mx = std::max(mx, x), sum += x;
    return sum ? double(mx) * double(v.size()) / double(sum) : 1.0;
  };
  // The byte count from the routing alone (the communication model): a2a sends each assignment whose
  // expert is on another rank once out and once back; ag-rs moves (P - 1) T/P rows per rank each way.
  int64_t model_inter = 0;  // the same inter-node rows from the routing alone
  if (o.variant == "a2a") {
    for (Index a = 0; a < T * k; ++a) {
      const int home2 = static_cast<int>((a / k) / Tp), dst2 = rank_of(slot_of(a / k, rall.topk_idx.data[static_cast<size_t>(a)]));
      if (dst2 == rank && node_of(home2) != node_of(rank)) ++model_inter;
    }
    for (Index a = 0; a < T * k; ++a) {
      const int home = static_cast<int>((a / k) / Tp), dst = rank_of(slot_of(a / k, rall.topk_idx.data[static_cast<size_t>(a)]));
      if (home != dst && home == rank) model_bytes += D * 8;  // dispatch out
      if (home != dst && dst == rank) model_bytes += D * 8;   // combine back
    }
  } else {
    model_bytes = 2 * int64_t{P - 1} * Tp * D * 8;
    model_inter = int64_t{o.nodes - 1} * Tp;
  }
  const Mat<double> want = ref.y.middleRows(t0, Tp);
  const bool bitwise = std::memcmp(y.data(), want.data(), static_cast<size_t>(want.size()) * sizeof(double)) == 0;
  // Judged as `ladder check 04-moe` judges a float64 y (ref/src/04-moe/contract.cpp, core/contract.hpp): the
  // fp64 layer summed in another order (ag-rs: the reduce-scatter adds the ranks' partials) must be within
  // (k + 1) x the float32 layer's error scaled to double, plus the floor -- k and the floor from the contract.
  Mat<float> y32;
  {
    const FixedOrder pinned;  // the baseline in the contract's fixed order (core/fixed_order.hpp)
    y32 = dense_loop(l.w.cast<float>(), Mat<float>(xh.cast<float>()), r.cast<float>());
  }
  const Array<double> oracle = Array<double>::from(want);
  const CompareReport cmp = compare(oracle, Array<double>::from(y),
                                    fp64_baseline(oracle, Array<float>::from(y32).cast<double>()),
                                    contract("04-moe").tolerance("y", DType::F8));
  const bool within = cmp.pass;
  const double max_err = cmp.max_abs_err, scale = cmp.tol;
  const bool ok = routing_same && groups_same && within && sent_bytes == model_bytes && inter_rows == model_inter;
  int all_ok = ok ? 1 : 0, sum_ok = 0;
  world.allreduce(&all_ok, &sum_ok, 1, comm::Op::sum, "the checks' vote");
  std::vector<int64_t> bytes(static_cast<size_t>(P));
  world.gather(&sent_bytes, 1, bytes.data(), 0, "the sent bytes' gather");
  std::vector<int64_t> inter(static_cast<size_t>(P));
  world.gather(&inter_rows, 1, inter.data(), 0, "the inter-node rows' gather");
  fmt::print("ep-moe rank {}: routing {}, group sizes {}, output {} (max abs err {:.3e}, tolerance {:.3e}), sent {} bytes "
             "(model {}: {})\n", rank, routing_same ? "exact" : "DIFFERENT", groups_same ? "exact" : "DIFFERENT",
             bitwise ? "bit-identical" : (within ? "within tolerance" : "OUTSIDE TOLERANCE"), max_err, scale,
             sent_bytes, model_bytes, sent_bytes == model_bytes ? "equal" : "DIFFERENT");
  std::fflush(stdout);
  world.barrier("the barrier before rank 0's summary");
  if (rank == 0) {
    fmt::print("ep-moe rows per rank: {} (max/mean {:.3f}); plain E/P sharding: {} (max/mean {:.3f}){}\n",
               fmt::join(rows, " "), imbalance(rows), fmt::join(plain, " "), imbalance(plain),
               o.redundant ? fmt::format(" [EPLB, {} redundant slots]", o.redundant) : std::string());
    if (o.nodes > 1) {
      int64_t mx = 0, sum = 0;
      for (int64_t v : inter) mx = std::max(mx, v), sum += v;
      const double model = o.variant == "a2a" ? double(k) * double(o.nodes - 1) / double(o.nodes) : double(o.nodes - 1);
      fmt::print("ep-moe inter-node dispatch rows per card, counted at the MPI calls ({} nodes of {} cards, BS = {}): "
                 "mean {:.3f} BS, max {:.3f} BS (model: {} {:.3f} BS{})\n",
                 o.nodes, C, Tp, double(sum) / double(P) / double(Tp), double(mx) / double(Tp),
                 o.variant == "a2a" ? "All2All k (N - 1) / N =" : "hierarchical AllGather N - 1 =", model,
                 o.variant == "a2a" ? ", in expectation over uniform routing" : ", exactly");
    }
    fmt::print("ep-moe {} on {} ranks, T = {}, E = {}, k = {}, D = {}: {}\n", o.variant, P, T, E, k, D,
               sum_ok == P ? "PASS" : "FAIL");
  }
  return sum_ok == P ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ladder::mpi::run_ranks(
      argc, argv, "ladder-ep-moe", kUsage,
      [&](int, int size, uint64_t& h) {
        Options o = setup(argc, argv, size);
        h = digest(o);
        return o;
      },
      [&](const Options& o, int rank, int size) { return run(o, rank, size); });
}
