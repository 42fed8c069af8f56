// mpi/src/serve_demo.cpp -- ladder-serve-demo: a small prefill/decode-disaggregated, expert-parallel serving
// pipeline end to end on N local ranks, timed per stage and checked bit for bit against one process.
//
//   mpirun -np 4 --oversubscribe ladder-serve-demo [--prompts 1,63,64,65,300] [--steps 4] [--layers 2]
//                                                  [--layer-shards 1] [--decode-shards 1] [--experts 8]
//
// Ranks 0 .. N-2 are prefill instances, rank N-1 the decode instance (DistServe OSDI'24: the phases on
// separate instances; with --decode-shards D the decode instance is the last D ranks, its layers split
// over D pipeline stages). 1. Prefill: each prefill rank runs the stack of stage 03 MLA layers over its
// prompts into its paged cache (with --layer-shards S the layers are split over S pipeline stages).
// 2. Migration: the decode rank pulls every layer's blocks into its own pools
// (ladder/mpi/kv_transport.hpp). 3. Decode: each step runs the MLA layers over the migrated caches
// (flash_mla) on the decode rank, then a MoE layer (stage 04: V3 gate, top-2, a shared expert) whose
// experts are spread E/N over ALL N ranks: the decode batch is dispatched and combined by all-to-all
// (ladder/mpi/ep_a2a.hpp). DeepSeek-V3's decode instances run their MoE expert-parallel over many GPUs
// (the Huawei report); here the prefill ranks, idle once their KV has left, hold experts too.
// Printed: prefill time (slowest prefill rank), migration time and rate, the decode step split into the
// MLA layers and the MoE all-to-all, the migration's share, and one correctness line: the MLA output u
// and the MoE output y of every step against the same pipeline in one process (BIT-IDENTICAL or
// DIFFERENT (FAIL), exit 1).
#include <mpi.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ladder/moe/dense.hpp"
#include "ladder/moe/gate.hpp"
#include "ladder/moe/synthetic.hpp"
#include "ladder/mpi/ep_a2a.hpp"
#include "ladder/mpi/kv_transport.hpp"
#include "ladder/mpi/launch.hpp"

namespace {

using namespace ladder;
using namespace ladder::kvmig;

struct Options {
  PipelineConfig cfg;
  TransportOptions t;
  moe::Index experts = 8;
  bool plant_swap_weights = false;  // test: the MoE combine weights each output by the next top-k weight
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
    else if (a == "--decode-blocks") o.cfg.decode_blocks = parse_int(value(), "--decode-blocks");
    else if (a == "--experts") o.experts = parse_int(value(), "--experts");
    else if (a == "--timeout") o.t.timeout_s = static_cast<double>(parse_int(value(), "--timeout"));
    else if (a == "--test-plant-swap-weights") o.plant_swap_weights = true;
    else throw Error(fmt::format("serve-demo: unknown argument '{}' (see the header of mpi/src/serve_demo.cpp)", a));
  }
  require(o.t.timeout_s >= 1, "serve-demo: --timeout = {} violates >= 1 second", o.t.timeout_s);
  return o;
}

// The MoE layer after the MLA stack: hidden = the MLA model's, 61 inner, top-2 of E, a shared expert.
moe::Weights<double> moe_layer(const Options& o) {
  moe::Config m;
  m.hidden = mla::small_config().hidden, m.inter = 61, m.n_experts = o.experts, m.top_k = 2;
  m.route_scale = 2.5, m.shared_inter = 32;
  moe::check_config(m);
  return moe::make_weights(m, o.cfg.seed + 5);
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int run(const Options& o, int rank, int N, const Layout& lay) {
  const PipelineConfig& c = o.cfg;
  const moe::Weights<double> w = moe_layer(o);
  std::vector<moe::Index> identity(static_cast<size_t>(o.experts));
  for (moe::Index e = 0; e < o.experts; ++e) identity[static_cast<size_t>(e)] = e;
  const ep::Slots slots = ep::make_slots(identity, o.experts, N);
  const int last = N - 1;  // the last decode stage: the batch's MoE tokens live here
  int64_t expert_rows = 0;  // rows this rank's experts computed over all steps
  // Every rank joins every step; x: this rank's home tokens. The deadline is long: a prefill rank enters
  // the first step while the decode side is still migrating and running its MLA layers.
  auto moe_step = [&](const Mat<double>& x, bool plant) {
    moe::Routing<double> r{Array<moe::Index>({x.rows(), 2}), Array<double>({x.rows(), 2})};
    if (x.rows() > 0) r = moe::gate(w, x);
    ep::A2AOut a = ep::a2a_moe(w, x, r, 0, slots, rank, N, 10 * o.t.timeout_s, plant);
    for (moe::Index g : a.group_sizes) expert_rows += g;
    if (x.rows() > 0) moe::add_shared(w, x, a.y);
    return a.y;
  };
  double prefill_s = 0, migrate_s = 0, decode_s = 0, moe_s = 0;
  int64_t bytes = 0;
  std::vector<Mat<float>> us;
  std::vector<Mat<double>> ys;
  const int64_t hidden = w.cfg.hidden, D = lay.decode_shards;
  if (rank < lay.prefill_ranks) {
    prefill_s = prefill_serve(c, o.t, rank, lay);
    for (int64_t t = 0; t < c.decode_steps; ++t) moe_step(Mat<double>(0, hidden), false);
  } else {  // decode stage k of D: its layers, then (last stage) the MoE layer on the batch
    const int64_t k = rank - lay.prefill_ranks, l0 = first_layer(c, D, k), l1 = first_layer(c, D, k + 1);
    const std::vector<mla::Weights<float>> W = model(c);
    Migrated m = migrate_in(c, o.t, lay, W[0].cfg.kv_dim(), k);
    migrate_s = m.seconds, bytes = m.bytes;
    StepInput x_in;
    if (k > 0)
      x_in = [&](int64_t t) {
        Mat<float> x(c.prompts(), hidden);
        recv(x.data(), static_cast<int>(x.size()), MPI_FLOAT, rank - 1, kActivation, 10 * o.t.timeout_s,
             fmt::format("hidden states of decode step {} at layer {}", t, l0));
        return x;
      };
    const auto d0 = Clock::now();
    us = decode_layers(W, c, l0, l1, std::move(m.caches), x_in, [&](int64_t t, const Mat<float>& x) {
      if (k + 1 < D)
        send(x.data(), static_cast<int>(x.size()), MPI_FLOAT, rank + 1, kActivation, 10 * o.t.timeout_s,
             fmt::format("hidden states of decode step {} at layer {}", t, l1));
      const auto e0 = Clock::now();
      Mat<double> y = moe_step(rank == last ? Mat<double>(x.cast<double>()) : Mat<double>(0, hidden),
                               rank == last && o.plant_swap_weights);
      if (rank == last) ys.push_back(std::move(y));
      moe_s += since(e0);
    });
    decode_s = since(d0);
  }
  // Per-rank figures to the last rank (non-blocking collectives with a deadline, like every wait here).
  double slowest_prefill = 0, slowest_migration = 0;
  int64_t all_bytes = 0;
  std::vector<int64_t> rows(static_cast<size_t>(N));
  MPI_Request req;
  MPI_Ireduce(&prefill_s, &slowest_prefill, 1, MPI_DOUBLE, MPI_MAX, last, MPI_COMM_WORLD, &req);
  ep::wait_collective(req, o.t.timeout_s, "the prefill times' reduce");
  MPI_Ireduce(&migrate_s, &slowest_migration, 1, MPI_DOUBLE, MPI_MAX, last, MPI_COMM_WORLD, &req);
  ep::wait_collective(req, o.t.timeout_s, "the migration times' reduce");
  MPI_Ireduce(&bytes, &all_bytes, 1, MPI_INT64_T, MPI_SUM, last, MPI_COMM_WORLD, &req);
  ep::wait_collective(req, o.t.timeout_s, "the migrated bytes' reduce");
  MPI_Igather(&expert_rows, 1, MPI_INT64_T, rows.data(), 1, MPI_INT64_T, last, MPI_COMM_WORLD, &req);
  ep::wait_collective(req, o.t.timeout_s, "the expert rows' gather");
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
  const double step_s = decode_s / double(c.decode_steps);
  fmt::print("serve-demo: {} ranks: {} prefill ({} group(s) x {} stage(s)) -> {} decode stage(s), {} MLA layers; MoE "
             "{} experts over all {} ranks ({} each), top-2, all-to-all dispatch/combine\n",
             N, lay.prefill_ranks, lay.groups(), lay.shards, D, c.layers, o.experts, N, o.experts / N);
  fmt::print("  prefill    {:9.3f} ms  (slowest prefill rank; prompts [{}])\n", slowest_prefill * 1e3,
             fmt::join(c.prompt_lens, ","));
  fmt::print("  migration  {:9.3f} ms  ({} bytes, {:.2f} GB/s)\n", migrate_s * 1e3, bytes, bytes / migrate_s / 1e9);
  fmt::print("  decode     {:9.3f} ms per step over {} steps (MLA layers {:.3f} ms + MoE all-to-all {:.3f} ms)\n",
             step_s * 1e3, c.decode_steps, (decode_s - moe_s) / double(c.decode_steps) * 1e3,
             moe_s / double(c.decode_steps) * 1e3);
  fmt::print("  migration = {:.2f} decode steps; migration / (migration + {} decode steps) = {:.1f}%\n",
             migrate_s / step_s, c.decode_steps, 100 * migrate_s / (migrate_s + decode_s));
  fmt::print("  expert rows per rank over the steps: {}\n", fmt::join(rows, " "));
  fmt::print("  decode output vs one process (MLA u and MoE y of every step): {}\n",
             u_same && y_same ? "BIT-IDENTICAL"
                              : fmt::format("DIFFERENT (FAIL): u {}, y {}", u_same ? "same" : "different",
                                            y_same ? "same" : "different"));
  return u_same && y_same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return ladder::mpi::run_ranks(argc, argv, "ladder-serve-demo", [&](int rank, int size, bool& checked) {
    const Options o = parse(argc, argv);
    require(size >= 2, "serve-demo: {} rank(s) violates >= 2 (prefill ranks + one decode rank; mpirun -np N)", size);
    ladder::mpi::require_same_config(o.cfg.digest() ^ (static_cast<uint64_t>(o.experts) * 0x9e3779b97f4a7c15ull), rank,
                                     "serve-demo");
    validate(o.cfg);
    const Layout lay = make_layout(o.cfg, size);
    require(o.experts >= 2 && o.experts % size == 0, "serve-demo: --experts = {} violates a multiple (>= 2) of the "
            "rank count {} (every rank holds E/N experts)", o.experts, size);
    moe_layer(o);
    checked = true;
    return run(o, rank, size, lay);
  });
}
