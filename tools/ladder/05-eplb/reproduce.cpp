// tools/ladder/05-eplb/reproduce.cpp -- `ladder reproduce 05-eplb`.
//
// Recomputes with ladder/05-eplb/eplb.hpp the numbers the EPLB sources print (data/papers/05-eplb.json): the
// README example (exact), its global-policy variant, the EPLB code reading's worked example (its
// intermediate tables and the 8 per-GPU totals), then runs DeepSeek-V3-scale placements on a seeded
// Zipf-skewed load: imbalance before and after, a lower bound, and the measured rebalance time.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <omp.h>

#include "cli.hpp"
#include "paper.hpp"
#include "report.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/timing.hpp"
#include "ladder/05-eplb/eplb.hpp"
#include "source_dir.hpp"

namespace ladder::cli {
namespace {

using eplb::Index;



// "what: exact match with SOURCE (n of n entries)" or where the first difference is.
template <class M>
std::string match_line(const std::string& what, const std::string& source, const nlohmann::json& expected,
                       const M& ours) {
  const nlohmann::json rows = expected.front().is_array() ? expected : nlohmann::json::array({expected});
  Index n = 0, diff = 0;
  std::string first;
  bool shape_ok = static_cast<Index>(rows.size()) == ours.rows();
  for (Index i = 0; shape_ok && i < ours.rows(); ++i) {
    shape_ok = static_cast<Index>(rows[static_cast<size_t>(i)].size()) == ours.cols();
    for (Index j = 0; shape_ok && j < ours.cols(); ++j, ++n) {
      const double want = rows[static_cast<size_t>(i)][static_cast<size_t>(j)].get<double>();
      if (static_cast<double>(ours(i, j)) != want && diff++ == 0)
        first =
            fmt::format(" (first at [{}, {}]: ours {}, {} {})", i, j, static_cast<double>(ours(i, j)), source, want);
    }
  }
  if (!shape_ok)
    return fmt::format("{}: shape [{}, {}] differs from {}'s: MISMATCH", what, ours.rows(), ours.cols(), source);
  if (diff == 0) return fmt::format("{}: exact match with {} ({} of {} entries)", what, source, n, n);
  return fmt::format("{}: DIFFERS from {} in {} of {} entries{}", what, source, diff, n, first);
}

Mat<double> readme_weight() {
  Mat<double> w(2, 12);
  w << 90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86,  //
      20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27;
  return w;
}

void readme_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper) {
  r.md += "### The EPLB README example\n\n";
  r.line("README example: 2 layers x 12 experts -> 16 replicas, 4 groups, 2 nodes, 8 GPUs");
  const Mat<double> w = readme_weight();
  const eplb::Placement p = eplb::rebalance_experts(w, 16, 4, 2, 8);
  r.line(eplb_report::summary_line(p));
  r.line(match_line("phy2log", "the README", paper.at("readme_phy2log"), p.phy2log));
  r.line(match_line("logcnt", "eplb.py", paper.at("readme_logcnt"), p.logcnt));
  r.line(match_line("group -> node", "eplb.py", paper.at("readme_group_to_node"), eplb::group_nodes(p, 4)));
  r.line(match_line("layer-0 GPU loads", "the README's placement", paper.at("readme_gpu_loads_layer0"),
                    Mat<double>(eplb::gpu_loads(w, p).row(0))));
  r.block(eplb_report::layer_placement(w, p, 0) + eplb_report::layer_placement(w, p, 1) +
          eplb_report::imbalance_table(w, p));
  const eplb::Placement g = eplb::rebalance_experts(w, 16, 3, 2, 8);
  r.line(fmt::format("global variant (3 groups on 2 nodes: 3 % 2 != 0 -> {} policy)", eplb::policy_name(g.policy)));
  r.line(match_line("phy2log", "eplb.py's output (the README prints only the hierarchical example)",
                    paper.at("readme_global_phy2log"), g.phy2log));
}

void seed_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper) {
  r.md += "### The worked example of \"DeepSeek Expert Parallelism Load Balancer (EPLB) Code Reading\"\n\n";
  r.line("the code reading's worked example: the README load through rebalance_experts_hierarchical, step by step");
  const Mat<double> w = readme_weight();
  eplb::HierarchicalTrace<double> t;
  const eplb::Replication rep = eplb::rebalance_experts_hierarchical(w, 16, 4, 2, 8, &t);
  r.line(match_line("step 1 tokens_per_group", "the code reading", paper.at("seed_group_loads"), t.tokens_per_group));
  r.line(match_line("step 3 tokens_per_phy", "the code reading", paper.at("seed_tokens_per_phy"), t.tokens_per_phy));
  r.line(match_line("step 3 pphy2phy (tie-order dependent)", "the code reading", paper.at("seed_pphy2phy"), t.pphy2phy));
  const eplb::Placement p = eplb::make_placement(rep, eplb::Policy::hierarchical, 4, 2, 8);
  const Mat<double> totals = eplb::gpu_loads(w, p).colwise().sum();
  std::string ours;
  for (Index g = 0; g < totals.cols(); ++g) ours += fmt::format("{}{:g}", g ? ", " : "", totals(0, g));
  r.line(fmt::format("per-GPU totals over both layers: [{}]", ours));
  r.line(match_line("per-GPU totals", "the code reading's printout", paper.at("seed_gpu_totals"), totals));
}

// Any placement with R slots has a GPU at least as loaded as the mean and as its heaviest replica; the
// heaviest replica is smallest with replicate_experts' counts (it minimises max weight / logcnt).
double lower_bound_overall(const Mat<double>& w, Index R, Index num_gpus) {
  const eplb::Replication rep = eplb::replicate_experts(w, R);
  double sum_bound = 0, sum_mean = 0;
  for (Index l = 0; l < w.rows(); ++l) {
    double heaviest = 0;
    for (Index e = 0; e < w.cols(); ++e)
      heaviest = std::max(heaviest, w(l, e) / static_cast<double>(rep.logcnt(l, e)));
    const double mean = w.row(l).sum() / static_cast<double>(num_gpus);
    sum_bound += std::max(mean, heaviest);
    sum_mean += mean;
  }
  return sum_mean > 0 ? sum_bound / sum_mean : 1.0;
}

void v3_section(MarkdownReport& r, const std::map<std::string, nlohmann::json>& paper, bool quick) {
  const Index L = paper.at("v3_moe_layers").get<Index>(), n = paper.at("v3_routed_experts").at("experts").get<Index>();
  const Index groups = paper.at("v3_routed_experts").at("groups").get<Index>();
  const auto& pre = paper.at("v3_prefill_layout");
  const auto& dec = paper.at("v3_decode_layout");
  const Index tokens = quick ? 2048 : 16384;
  const int reps = quick ? 5 : 21;
  const double target_ms = paper.at("v3_rebalance_time_target").get<double>();
  r.md += "### DeepSeek-V3 scale\n\n";
  r.line(fmt::format("DeepSeek-V3 scale: {} MoE layers x {} experts ({} groups) -> {} replicas; load = {} tokens x "
                     "top-8 per layer, Zipf(s) expert popularity in a random order per layer (eplb::zipf_loads, "
                     "seed 5)",
                     L, n, groups, pre.at("replicas").get<Index>(), tokens));
  r.md += "| layout | policy | Zipf s | imbalance before | after | lower bound | node imbalance after | "
          "median rebalance ms |\n|---|---|---|---|---|---|---|---|\n";
  fmt::print("{:<28} {:<13} {:>6} {:>8} {:>8} {:>8} {:>10} {:>9}\n", "layout", "policy", "s", "before", "after",
             "bound", "node after", "ms");
  double prefill_ms = 0;
  for (double s : {0.6, 1.0}) {
    Rng rng(5);
    const Mat<double> w = eplb::zipf_loads(rng, L, n, tokens * 8, s);
    for (const auto* lay : {&pre, &dec}) {
      const Index R = lay->at("replicas").get<Index>(), N = lay->at("nodes").get<Index>(),
                  G = lay->at("gpus").get<Index>();
      eplb::Placement p;
      const double sec = median_seconds([&] { p = eplb::rebalance_experts(w, R, groups, N, G); }, reps);
      if (lay == &pre && s == 1.0) prefill_ms = sec * 1e3;
      const double before = eplb::imbalance(eplb::static_gpu_loads(w, G)).overall;
      const double after = eplb::imbalance(eplb::gpu_loads(w, p)).overall;
      const double nodes = eplb::imbalance(eplb::node_loads(eplb::gpu_loads(w, p), N)).overall;
      const std::string layout = fmt::format("{} nodes x {} GPUs, {} slots", N, G / N, R);
      fmt::print("{:<28} {:<13} {:>6.1f} {:>8.3f} {:>8.3f} {:>8.3f} {:>10.3f} {:>9.3f}\n", layout,
                 eplb::policy_name(p.policy), s, before, after, lower_bound_overall(w, R, G), nodes, sec * 1e3);
      r.md += fmt::format("| {} | {} | {:.1f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} |\n", layout,
                          eplb::policy_name(p.policy), s, before, after, lower_bound_overall(w, R, G), nodes,
                          sec * 1e3);
    }
  }
  r.md += "\n";
  r.line(fmt::format("imbalance = sum over layers of max GPU load / sum of mean GPU load (1 = perfect); before = "
                     "static layout (expert e on GPU e * GPUs / experts, no replicas); bound = no placement with these "
                     "slots can do better (mean, or the heaviest replica under replicate_experts' optimal counts)."));
  r.line(fmt::format("V3 prefill rebalance (58 x 256 -> 288, 4 nodes, 32 GPUs, s = 1.0): median {:.3f} ms over {} runs "
                     "with {} OpenMP threads; target < {:g} ms (the target we set): {}. Timings vary run to run on shared "
                     "machines.",
                     prefill_ms, reps, omp_get_max_threads(), target_ms, prefill_ms < target_ms ? "met" : "NOT met"));
}

}  // namespace

std::string reproduce_05_eplb(const ReproduceContext& ctx) {
  const auto paper = paper_entries("05-eplb");
  MarkdownReport r;
  r.md = "## 05-eplb\n\n";
  readme_section(r, paper);
  fmt::print("\n");
  seed_section(r, paper);
  fmt::print("\n");
  v3_section(r, paper, ctx.quick);
  return r.md;
}

}  // namespace ladder::cli
