// tools/ladder/04-moe/reproduce.cpp -- `ladder reproduce 04-moe`.
//
// Stage 04 (gate -> sort -> ragged dot -> unsort + combine). Recomputes, with ladder/04-moe/moe.hpp, the
// numbers the sources print (data/papers/04-moe.json, the single place they are written down):
//   * Huawei A2 (the Huawei report): rows per expert per decode step 72 x 2 x 8 x 32 / 256 = 144 -- the formula,
//     and the mean group size of the stable sort on a routed decode step of that size;
//   * per-card inter-node volume, AllGather/ReduceScatter 3 BS h vs All2All 6 BS h at 4 nodes, top-8 --
//     from a communication model, and counted from the ep_sharded rung's own permutations on a small
//     config (balanced and Zipf-skewed routing);
//   * the same volumes counted at the MPI calls of ladder-ep-moe (mpi/src/ep_moe.cpp), run here with
//     mpirun on 8 local ranks standing for 4 nodes of 2 cards, when Open MPI and that program are built;
//   * DeepSeek's deployment (its day-6 overview): EP32 x 9 and EP144 x 2 routed slots;
//   * FLOPs and bytes per rung from the registry's Cost at DeepSeek-V3 shapes, the dense fallback's
//     FLOP multiple beside the JAX README's remark, and the measured time of every rung on this CPU.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <omp.h>
#include <set>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>

#include "cli.hpp"
#include "paper.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/timing.hpp"
#include "ladder/04-moe/moe.hpp"
#include "source_dir.hpp"

namespace ladder::cli {
namespace {

using moe::Index;



std::string verdict(double ours, double theirs) { return ours == theirs ? "exact match" : "DIFFERS"; }

// Uniformly routed top-k (k distinct experts per token, drawn by a seeded Rng): a decode step whose
// load is balanced in expectation. Returns topk_idx [T, k].
Array<Index> uniform_routing(Index T, Index k, Index E, uint64_t seed) {
  Rng rng(seed);
  Array<Index> idx({T, k});
  std::vector<Index> perm(static_cast<size_t>(E));
  for (Index t = 0; t < T; ++t) {
    for (Index e = 0; e < E; ++e) perm[static_cast<size_t>(e)] = e;
    for (Index j = 0; j < k; ++j) {  // partial Fisher-Yates: the first k of a random permutation
      const Index r = j + Index(rng.uniform_int(uint64_t(E - j)));
      std::swap(perm[static_cast<size_t>(j)], perm[static_cast<size_t>(r)]);
      idx.data[static_cast<size_t>(t * k + j)] = perm[static_cast<size_t>(j)];
    }
  }
  return idx;
}

void rows_per_expert_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper) {
  r.md += "### Rows per expert per decode step (the Huawei report, A2)\n\n";
  const auto& e = paper.at("a2_rows_per_expert");
  const auto& in = e.at("inputs");
  const Index bs = in.at("batch_per_card"), mtp = in.at("tokens_per_request_with_one_mtp"), k = in.at("top_k"),
              cards = in.at("cards"), E = in.at("routed_experts");
  const double formula = double(bs * mtp * k * cards) / double(E);
  // The same step routed and sorted: T = cards x BS x 2 tokens, T k assignments, stable sort by expert.
  const Index T = bs * mtp * cards;
  const moe::Permutation p = moe::sort_by_expert(uniform_routing(T, k, E, 4401), E);
  Index sum = 0, mx = 0, mn = T * k;
  for (Index g : p.group_sizes) sum += g, mx = std::max(mx, g), mn = std::min(mn, g);
  const double mean = double(sum) / double(E);
  r.line(fmt::format("Huawei report ({}): {} = {}", e.at("section").get<std::string>(), e.at("printed").get<std::string>(),
                     e.at("value").get<double>()));
  r.line(fmt::format("ours, formula BS x tokens x k x cards / E = {} x {} x {} x {} / {} = {:g}: {}", bs, mtp, k, cards, E,
                     formula, verdict(formula, e.at("value").get<double>())));
  r.line(fmt::format("ours, counted: {} tokens routed uniformly (top-{} of {}), stable sort -> group_sizes: mean {:g} "
                     "({}), min {}, max {} (the max is what a balanced-in-expectation step actually costs)",
                     T, k, E, mean, verdict(mean, e.at("value").get<double>()), mn, mx));
}

// Communication: one decode step on P cards in N nodes, BS tokens per card (token t lives on card t / BS).
struct CommCount {
  double ag_per_card = 0, a2a_per_card = 0, a2a_max_card = 0, dedup_per_card = 0;
  Index rows_computed = 0;
};

CommCount count_ep_rows(const moe::Weights<double>& w, const Mat<double>& x, Index P, Index N, Index BS) {
  const moe::Routing<double> ro = moe::gate(w, x);
  const Index k = w.cfg.top_k, E = w.cfg.n_experts, per_node = P / N;
  auto node_of_card = [&](Index c) { return c / per_node; };
  auto node_of_token = [&](Index t) { return node_of_card(t / BS); };
  CommCount c;
  std::vector<Index> a2a(static_cast<size_t>(P), 0);                    // rows a card receives
  std::vector<std::set<Index>> gathered(static_cast<size_t>(N)), routed(static_cast<size_t>(N));
  for (Index s = 0; s < P; ++s) {
    // The rung's own permutation for shard s (ladder/04-moe/dispatch.hpp sort_for_shard): its rows first,
    // every other assignment after them (ragged_dot leaves those rows zero).
    const moe::Permutation p = moe::sort_for_shard(ro.topk_idx, E, P, s);
    Index rows = 0;
    for (Index g : p.group_sizes) rows += g;
    c.rows_computed += rows;
    for (Index i = 0; i < Index(p.sort_idx.size()); ++i) {
      const Index t = p.sort_idx[static_cast<size_t>(i)] / k;
      const bool remote = node_of_token(t) != node_of_card(s);
      if (remote) gathered[static_cast<size_t>(node_of_card(s))].insert(t);  // the rung reads every row of x
      if (i < rows && remote) {
        ++a2a[static_cast<size_t>(s)];  // All2All: one row per assignment routed to a remote expert
        routed[static_cast<size_t>(node_of_card(s))].insert(t);
      }
    }
  }
  double ag = 0, dd = 0, tot = 0, mx = 0;
  for (Index n = 0; n < N; ++n) ag += double(gathered[static_cast<size_t>(n)].size()), dd += double(routed[static_cast<size_t>(n)].size());
  for (Index v : a2a) tot += double(v), mx = std::max(mx, double(v));
  // Hierarchical AllGather: each remote token crosses into a node once (to the peer card) and is then
  // spread inside the node; per card = rows entering its node / cards per node. In units of BS h.
  c.ag_per_card = ag / double(P) / double(BS);
  c.dedup_per_card = dd / double(P) / double(BS);
  c.a2a_per_card = tot / double(P) / double(BS);
  c.a2a_max_card = mx / double(BS);
  return c;
}

void communication_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper) {
  r.md += "### Per-card inter-node volume: AllGather/ReduceScatter vs All2All (the Huawei report, A2)\n\n";
  const auto& ag = paper.at("a2_allgather_inter_node");
  const auto& a2a = paper.at("a2_all2all_inter_node");
  const Index N = ag.at("inputs").at("nodes"), per_node = ag.at("inputs").at("cards_per_node"),
              k = ag.at("inputs").at("top_k"), P = N * per_node;
  // Model: AllGather brings every other node's tokens in once: (N - 1) BS h per card (each card pairs with
  // its peer on each other node). All2All sends each of the k copies of a token to its expert's card; with
  // experts spread evenly over N nodes a copy leaves the node with probability (N - 1) / N: k (N - 1) / N.
  const double model_ag = double(N - 1), model_a2a = double(k) * double(N - 1) / double(N);
  r.line(fmt::format("Huawei report ({}): AllGather {}, All2All {} (at {} nodes of {} cards, top-{})",
                     ag.at("section").get<std::string>(), ag.at("printed").get<std::string>(),
                     a2a.at("printed").get<std::string>(), N, per_node, k));
  r.line(fmt::format("ours, model: AllGather (N - 1) BS h = {:g} BS h ({}); All2All k (N - 1) / N BS h = {:g} BS h ({}); "
                     "ReduceScatter mirrors AllGather",
                     model_ag, verdict(model_ag, ag.at("value").get<double>()), model_a2a,
                     verdict(model_a2a, a2a.at("value").get<double>())));
  // Counted: a small model with the same topology and k (E = 64 experts in 8 groups, top-4 groups),
  // BS = 8 tokens per card, routed by the V3 gate; rows moved counted from the rung's permutations.
  const Index E = 64, BS = 8, D = 16, F = 8;
  const moe::Config cfg{D, F, E, k, 8, 4, 2.5, moe::GateKind::v3_sigmoid, 0};
  std::string table = fmt::format("{:<10} {:>14} {:>16} {:>16} {:>22} {:>12}\n", "routing", "AllGather/card",
                                  "All2All/card", "All2All max card", "node-dedup dispatch", "rows = T k");
  for (const char* bias : {"none", "zipf"}) {
    moe::Weights<double> w = moe::make_weights(cfg, 4402);
    w.bias = moe::make_bias(bias, E, 4403);
    const Mat<double> x = moe::make_tokens(P * BS, D, 4404);
    const CommCount c = count_ep_rows(w, x, P, N, BS);
    // The rung itself computes exactly the rows counted (cross-check with LayerOut::rows_per_shard).
    const auto ro = moe::gate(w, x);
    const auto out = moe::ep_sharded(w, x, ro, P);
    Index rung_rows = 0;
    for (Index v : out.rows_per_shard) rung_rows += v;
    require(rung_rows == c.rows_computed, "reproduce 04-moe: counted {} rows, ep_sharded computed {}", c.rows_computed,
            rung_rows);
    table += fmt::format("{:<10} {:>11.3f} BS {:>13.3f} BS {:>13.3f} BS {:>19.3f} BS {:>12}\n", bias, c.ag_per_card,
                         c.a2a_per_card, c.a2a_max_card, c.dedup_per_card, fmt::format("{} ok", rung_rows));
  }
  r.line(fmt::format("ours, counted from ep_sharded's row movements: P = {} shards in N = {} nodes, E = {}, top-{}, "
                     "BS = {} tokens per card (token t on card t / BS), units of BS h:",
                     P, N, E, k, BS));
  r.block(table);
  r.line("AllGather counts the rows of x each node's shards read that live on another node (the rung reads every "
         "row: dropless keeps the full token list), divided by the cards of a node; All2All counts each routed "
         "assignment whose expert's card is on another node. The node-dedup column (ours, not in the Huawei report) sends a "
         "token to a node once however many of its experts live there. All2All depends on the load (its max card "
         "grows under Zipf routing); AllGather does not -- the Huawei report's reason for preferring it on A2.");
}

// ladder-ep-moe beside this executable and mpirun on PATH, or the reason they are not there.
std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = std::min(p.find(':', start), p.size());
    const std::filesystem::path cand = std::filesystem::path(p.substr(start, end - start)) / name;
    if (!p.substr(start, end - start).empty() && access(cand.c_str(), X_OK) == 0) return cand.string();
    start = end + 1;
  }
  return {};
}

// Runs a command, returns its stdout + stderr and exit status.
std::pair<std::string, int> run_command(const std::string& cmd) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return {"popen failed", -1};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  const int st = pclose(f);
  return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
}

void mpi_section(MarkdownReport& r) {
  r.md += "### The same volumes counted at the MPI calls (ladder-ep-moe)\n\n";
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path exe = ec ? std::filesystem::path() : self.parent_path() / "ladder-ep-moe";
  const std::string mpirun = find_program("mpirun");
  if (exe.empty() || !std::filesystem::exists(exe) || mpirun.empty()) {
    r.line(fmt::format("NOT RUN: {} (Open MPI: Debian's openmpi-bin and libopenmpi-dev, which scripts/setup installs; "
                       "ladder-ep-moe is built when CMake finds MPI)",
                       mpirun.empty() ? "mpirun is not on PATH" : "ladder-ep-moe was not built beside this ladder"));
    return;
  }
  const std::regex inter(R"(mean ([0-9.]+) BS, max ([0-9.]+) BS)");
  std::string table = fmt::format("{:<8} {:<10} {:>18} {:>17} {:>8}\n", "variant", "routing", "inter-node/card",
                                  "busiest card", "layer");
  for (const char* variant : {"ag-rs", "a2a"})
    for (const char* routing : {"balanced", "zipf"}) {
      const std::string cmd = fmt::format(
          "OMP_NUM_THREADS=1 '{}' {}--oversubscribe -np 8 '{}' --variant {} --experts 32 --topk 8 --tokens 64 --nodes 4{}",
          mpirun, geteuid() == 0 ? "--allow-run-as-root " : "", exe.string(), variant,
          std::string(routing) == "zipf" ? " --zipf" : "");
      const auto [out, rc] = run_command(cmd);
      std::smatch m;
      const bool pass = rc == 0 && out.find(": PASS") != std::string::npos;
      if (!std::regex_search(out, m, inter)) {
        const std::string tail = out.size() > 400 ? out.substr(out.size() - 400) : out;
        r.line(fmt::format("FAILED: {} (exit {}): {}", cmd, rc, tail));
        continue;
      }
      table += fmt::format("{:<8} {:<10} {:>15} BS {:>14} BS {:>8}\n", variant, routing, m[1].str(), m[2].str(),
                           pass ? "PASS" : "FAIL");
    }
  r.line("mpirun -np 8 ladder-ep-moe --experts 32 --topk 8 --tokens 64 --nodes 4: 8 processes on this machine standing "
         "for 4 nodes of 2 cards, BS = 8 tokens per card; rows each card received from other nodes in the dispatch, "
         "counted at the MPI calls (ag-rs gathers hierarchically: across nodes among same-index cards, then inside "
         "the node); `layer` = routing and group sizes exact, output equal to the one-process layer, bytes equal "
         "to the routing's count:");
  r.block(table);
  r.line("The hierarchical AllGather receives exactly (N - 1) BS = 3 BS per card whatever the routing, the report's "
         "3 BS h; All2All averages about k (N - 1) / N = 6 BS and its busiest card grows with the skew -- the "
         "report's 6 BS h and its argument against All2All.");
}

void deployment_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper) {
  r.md += "### Deployments: experts per card\n\n";
  const Index E = 256;  // DeepSeek-V3 n_routed_experts (data/models)
  const auto& a2 = paper.at("a2_decode_experts_per_card");
  const Index dec = a2.at("inputs").at("decode_cards"), pre = a2.at("inputs").at("prefill_cards");
  r.line(fmt::format("Huawei A2 (Huawei report, {}): decode EP{} -> {} / {} = {} routed per card (printed {}); prefill EP{} -> "
                     "{} / {} = {} (printed {}); plus 1 shared expert per card",
                     a2.at("section").get<std::string>(), dec, E, dec, E / dec, a2.at("value").at("decode").get<Index>(),
                     pre, E, pre, E / pre, a2.at("value").at("prefill").get<Index>()));
  for (const char* id : {"day6_prefill", "day6_decode"}) {
    const auto& d = paper.at(id).at("value");
    const Index ep = d.at("ep"), per = d.at("routed_per_gpu"), slots = ep * per;
    r.line(fmt::format("DeepSeek day-6 overview ({}): EP{} x {} routed per GPU = {} slots = {} experts + {} "
                       "redundant (printed {} redundant: {}); + {} shared per GPU",
                       paper.at(id).at("section").get<std::string>(), ep, per, slots, E, slots - E,
                       d.at("redundant").get<Index>(), verdict(double(slots - E), d.at("redundant").get<double>()),
                       d.at("shared_per_gpu").get<Index>()));
  }
}

void cost_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper, const Registry& reg) {
  r.md += "### FLOPs and bytes per rung (registry Cost) at DeepSeek-V3 shapes\n\n";
  const Index T = 128, D = 7168, F = 2048, E = 256, k = 8, Fs = 2048;
  const Shape s{T, D, F, E, k, Fs};
  std::string t = fmt::format("{:<16} {:>12} {:>12} {:>10} {:>14}\n", "rung", "GFLOP", "MB moved", "FLOP/B", "scratch MB");
  for (const Rung* rung : reg.stage(moe::kStage, "ref")) {
    const Cost c = rung->cost(s);
    t += fmt::format("{:<16} {:>12.2f} {:>12.1f} {:>10.1f} {:>14.1f}\n", rung->id, c.flops / 1e9, c.bytes() / 1e6,
                     c.flops / c.bytes(), c.extra_bytes / 1e6);
  }
  r.line(fmt::format("one layer, T = {} tokens, D = {}, F = {}, E = {}, top-{}, one shared expert Fs = {} (fp32 bytes):",
                     T, D, F, E, k, Fs));
  r.block(t);
  const Cost routed = moe::routed_cost(s, true), dense = moe::fallback_cost(s);
  const Shape s0{T, D, F, E, k, 0};
  const double routed_only = moe::fallback_cost(s0).flops / moe::routed_cost(s0, true).flops;
  r.line(fmt::format("dense fallback / routed FLOPs: {:.2f}x without the shared expert (E / k = {}), {:.2f}x with it",
                     routed_only, E / k, dense.flops / routed.flops));
  r.line(fmt::format("JAX DeepSeek-R1 README ({}): \"{}\" -- the README gives no number; the multiple above is what a "
                     "lowering that runs every token through every expert pays.",
                     paper.at("jax_ragged_dot_note").at("section").get<std::string>(),
                     paper.at("jax_ragged_dot_note").at("printed").get<std::string>()));
}

void measured_section(MarkdownReport& r, const ReproduceContext& ctx, const Registry& reg) {
  r.md += "### Measured time per rung on this CPU (float32)\n\n";
  // quick: the golden model's shape; full: a wider layer where the products dominate.
  const moe::Config cfg = ctx.quick ? moe::Config{97, 61, 16, 4, 4, 2, 2.5, moe::GateKind::v3_sigmoid, 61}
                                    : moe::Config{512, 256, 32, 4, 4, 2, 2.5, moe::GateKind::v3_sigmoid, 256};
  const Index T = ctx.quick ? 128 : 256;
  const int reps = ctx.quick ? 3 : 5;
  const moe::Weights<float> w = moe::make_weights(cfg, 4405).cast<float>();
  const Mat<float> x = moe::make_tokens(T, cfg.hidden, 4406).cast<float>();
  const moe::Routing<float> ro = moe::gate(w, x);
  moe::LayerOptions opt;
  opt.shards = 4;
  const Shape s{T, cfg.hidden, cfg.inter, cfg.n_experts, cfg.top_k, cfg.shared_inter};
  std::string t = fmt::format("{:<16} {:>12} {:>12} {:>10}\n", "rung", "ms (median)", "GFLOP (Cost)", "GFLOP/s");
  double t_loop = 0, t_fallback = 0;
  for (const Rung* rung : reg.stage(moe::kStage, "ref")) {
    double sec = 0;
    if (rung->id == "gate") {
      const auto& g = rung->fn<moe::GateFns>();
      sec = median_seconds([&] { (void)g.f32(w, x); }, reps);
    } else {
      const auto& f = rung->fn<moe::LayerFns>();
      sec = median_seconds([&] { (void)f.f32(w, x, ro, opt); }, reps);
    }
    if (rung->id == "dense_loop") t_loop = sec;
    if (rung->id == "dense_fallback") t_fallback = sec;
    const double gf = rung->cost(s).flops / 1e9;
    t += fmt::format("{:<16} {:>12.3f} {:>12.4f} {:>10.2f}\n", rung->id, sec * 1e3, gf, gf / sec);
  }
  r.line(fmt::format("T = {}, D = {}, F = {}, E = {}, top-{}, Fs = {}; {} OpenMP threads; median of {} runs{}:", T,
                     cfg.hidden, cfg.inter, cfg.n_experts, cfg.top_k, cfg.shared_inter, omp_get_max_threads(), reps,
                     ctx.quick ? " (--quick: the golden model's shape)" : ""));
  r.block(t);
  r.line(fmt::format("dense fallback / dense loop time: {:.2f}x (Cost predicts {:.2f}x). These references are "
                     "written to be read, not to be fast; bench/04-moe/bench.cpp measures the ragged dot against Eigen's "
                     "GEMM at DeepSeek-V3 expert shapes.",
                     t_fallback / t_loop, moe::fallback_cost(s).flops / moe::routed_cost(s, false).flops));
}

}  // namespace

std::string reproduce_04_moe(const ReproduceContext& ctx) {
  const auto paper = paper_entries("04-moe", false);
  Registry reg;
  register_moe(reg);
  MarkdownReport r;
  r.md += "## 04-moe: gate -> sort -> ragged dot -> unsort + combine\n\n";
  rows_per_expert_section(r, paper);
  communication_section(r, paper);
  mpi_section(r);
  deployment_section(r, paper);
  cost_section(r, paper, reg);
  measured_section(r, ctx, reg);
  return r.md;
}

}  // namespace ladder::cli
