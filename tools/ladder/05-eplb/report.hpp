// tools/ladder/05-eplb/report.hpp -- stage 05 text the CLI prints (`ladder eplb`, `ladder reproduce 05-eplb`).
//
// Plain text, so the same table goes to the terminal and, inside a code block, into the Markdown report.
#pragma once
#include <fmt/format.h>

#include <string>

#include "ladder/05-eplb/eplb.hpp"

namespace ladder::cli::eplb_report {

using eplb::Index;

// "node k  GPU g: experts [...]  load x" for every GPU of layer l.
inline std::string layer_placement(const Mat<double>& w, const eplb::Placement& p, Index l) {
  const Mat<double> loads = eplb::gpu_loads(w, p);
  std::string s = fmt::format("layer {} (GPU: logical experts in its slots, load = sum of weight / logcnt)\n", l);
  for (Index g = 0; g < p.num_gpus; ++g) {
    std::string experts;
    for (Index q = 0; q < p.slots_per_gpu(); ++q)
      experts += fmt::format("{}{}", q ? " " : "", p.phy2log(l, g * p.slots_per_gpu() + q));
    s += fmt::format("  node {:>2}  GPU {:>3}: [{}]  load {:g}\n", p.node_of_gpu(g), g, experts, loads(l, g));
  }
  return s;
}

// Imbalance (max / mean GPU load) before EPLB (static layout: expert e on GPU e * num_gpus / num_log,
// no replicas) and after, per layer when there are few layers, then overall and worst layer.
inline std::string imbalance_table(const Mat<double>& w, const eplb::Placement& p) {
  const eplb::Imbalance before = eplb::imbalance(eplb::static_gpu_loads(w, p.num_gpus));
  const eplb::Imbalance after = eplb::imbalance(eplb::gpu_loads(w, p));
  const eplb::Imbalance nodes_after = eplb::imbalance(eplb::node_loads(eplb::gpu_loads(w, p), p.num_nodes));
  std::string s = "imbalance = max / mean GPU load (1.00 is perfect)\n";
  s += fmt::format("  {:<16} {:>8} {:>8}\n", "", "before", "after");
  if (p.num_layers() <= 8)
    for (Index l = 0; l < p.num_layers(); ++l)
      s += fmt::format("  {:<16} {:>8.3f} {:>8.3f}\n", fmt::format("layer {}", l), before.per_layer(l),
                       after.per_layer(l));
  s += fmt::format("  {:<16} {:>8.3f} {:>8.3f}   (sum over layers of max / sum of mean)\n", "overall", before.overall,
                   after.overall);
  s += fmt::format("  {:<16} {:>8.3f} {:>8.3f}\n", "worst layer", before.worst, after.worst);
  s += fmt::format("  node imbalance after: overall {:.3f}, worst layer {:.3f}\n", nodes_after.overall,
                   nodes_after.worst);
  return s;
}

inline std::string summary_line(const eplb::Placement& p) {
  return fmt::format(
      "policy {}: {} layers, {} logical experts -> {} replicas ({} redundant), {} GPUs on {} nodes, {} slots per "
      "GPU, max replicas of one expert {}",
      eplb::policy_name(p.policy), p.num_layers(), p.num_log(), p.num_replicas(), p.num_replicas() - p.num_log(),
      p.num_gpus, p.num_nodes, p.slots_per_gpu(), p.max_cnt());
}

}  // namespace ladder::cli::eplb_report
