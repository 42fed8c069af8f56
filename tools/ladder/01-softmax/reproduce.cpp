// tools/ladder/01-softmax/reproduce.cpp -- `ladder reproduce 01-softmax`.
//
// Milakov & Gimelshein (2018), Table 1 / lecture notes §3.5: memory accesses per element are 3 for
// naive, 4 for safe and 3 for online softmax, so online saves one of safe's four passes over memory.
// We print the accesses from each rung's Cost (not typed in) beside the paper's numbers, and measure
// the rungs side by side on this CPU at 1M and 64M floats with a copy-bandwidth memory bound.
#include <fmt/format.h>

#include <map>
#include <vector>

#include "cli.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/timing.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder::cli {

std::string reproduce_01_softmax(const ReproduceContext& ctx) {
  const Registry& reg = registry();
  const std::vector<std::pair<std::string, double>> paper = {{"naive", 3}, {"safe", 4}, {"online", 3}};
  std::string md = "## 01-softmax\n\n### Memory accesses per element (from Cost) vs Milakov & Gimelshein Table 1\n\n"
                   "| rung | paper | ours (Cost) | bytes/elem fp32 | flops/elem |\n|---|---|---|---|---|\n";
  fmt::print("memory accesses per element: paper (Milakov & Gimelshein 2018, Table 1) vs ours (Cost)\n");
  fmt::print("{:<8} {:>6} {:>6} {:>11} {:>10}\n", "rung", "paper", "ours", "bytes/elem", "flops/elem");
  const Shape unit{1, 1};
  for (const auto& [id, p] : paper) {
    const Rung& r = reg.find("01-softmax", "ref", id);
    const Cost c = r.cost(unit);
    const double acc = softmax::accesses_per_element(c, unit);
    fmt::print("{:<8} {:>6} {:>6} {:>11} {:>10}{}\n", id, p, acc, c.bytes(), c.flops, acc == p ? "" : "  MISMATCH");
    md += fmt::format("| {} | {} | {} | {} | {} |\n", id, p, acc, c.bytes(), c.flops);
  }

  const int64_t cols = 4096;
  const std::vector<int64_t> sizes = ctx.quick ? std::vector<int64_t>{1 << 20, 1 << 22}
                                               : std::vector<int64_t>{1 << 20, 1 << 26};
  md += "\n### Measured on this CPU (fp32, rows of 4096, OpenMP over rows, median wall time)\n\n"
        "| elements | naive ms | safe ms | online ms | safe/online | naive/online | online GB/s | copy GB/s | "
        "online vs memory bound |\n|---|---|---|---|---|---|---|---|---|\n";
  fmt::print("\nmeasured (fp32, rows of {}, median): the notes' claim is that online saves one pass (4 -> 3)\n", cols);
  fmt::print("{:>10} {:>9} {:>9} {:>9} {:>11} {:>12} {:>10} {:>9} {:>8}\n", "elements", "naive ms", "safe ms",
             "online ms", "safe/online", "naive/online", "online GB/s", "copy GB/s", "x bound");
  for (int64_t n : sizes) {
    const int64_t rows = n / cols;
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    Rng rng(1);
    for (auto& v : x) v = static_cast<float>(3.0 * rng.uniform(-1, 1));
    const int reps = n > (1 << 24) ? 5 : 21;
    std::map<std::string, double> t;
    for (const auto& [id, p] : paper) {
      const auto& fn = reg.find("01-softmax", "ref", id).fn<softmax::RowsFns>().f32;
      t[id] = median_seconds([&] { fn(x.data(), y.data(), rows, cols); }, reps);
    }
    const double bw = copy_bandwidth(static_cast<size_t>(n), reps);
    const Shape s{rows, cols};
    const double online_bytes = reg.find("01-softmax", "ref", "online").cost(s).bytes();
    const double bound = online_bytes / bw;  // seconds if online ran at copy bandwidth
    fmt::print("{:>10} {:>9.3f} {:>9.3f} {:>9.3f} {:>11.2f} {:>12.2f} {:>10.1f} {:>9.1f} {:>8.2f}\n", n,
               t["naive"] * 1e3, t["safe"] * 1e3, t["online"] * 1e3, t["safe"] / t["online"],
               t["naive"] / t["online"], online_bytes / t["online"] / 1e9, bw / 1e9, t["online"] / bound);
    md += fmt::format("| {} | {:.3f} | {:.3f} | {:.3f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.2f}x |\n", n,
                      t["naive"] * 1e3, t["safe"] * 1e3, t["online"] * 1e3, t["safe"] / t["online"],
                      t["naive"] / t["online"], online_bytes / t["online"] / 1e9, bw / 1e9, t["online"] / bound);
  }
  // The SIMT layer is a correctness tool: how much slower is a CUDA rung run as fibers on this CPU
  // than the reference loop it mirrors (256 rows x 4096 cols, the benchmark's shape; no target).
  {
    const int64_t rows = 256;
    std::vector<float> x(static_cast<size_t>(rows * cols)), y(x.size());
    Rng rng(2);
    for (auto& v : x) v = static_cast<float>(3.0 * rng.uniform(-1, 1));
    const auto& ref = reg.find("01-softmax", "ref", "online").fn<softmax::RowsFns>().f32;
    const double t_ref = median_seconds([&] { ref(x.data(), y.data(), rows, cols); }, 11);
    fmt::print("\nSIMT overhead (256 x 4096 fp32; CUDA rungs run as fibers on this CPU, vs the reference online loop)\n");
    fmt::print("{:<16} {:>9} {:>14}\n", "rung", "ms", "x reference");
    md += "\n### SIMT overhead: CUDA rungs as CPU fibers vs the reference online loop (256 x 4096 fp32)\n\n"
          "| rung | ms | x reference online |\n|---|---|---|\n";
    md += fmt::format("| ref online | {:.2f} | 1.00 |\n", t_ref * 1e3);
    fmt::print("{:<16} {:>9.2f} {:>14.2f}\n", "ref online", t_ref * 1e3, 1.0);
    for (const Rung* r : reg.stage("01-softmax", "cuda")) {
      const auto& fn = r->fn<softmax::RowsFns>().f32;
      const double t = median_seconds([&] { fn(x.data(), y.data(), rows, cols); }, 5);
      fmt::print("{:<16} {:>9.2f} {:>14.2f}\n", r->id, t * 1e3, t / t_ref);
      md += fmt::format("| cuda {} | {:.2f} | {:.2f} |\n", r->id, t * 1e3, t / t_ref);
    }
  }
  md += "\n`x bound` = measured online time / (online's bytes from Cost / measured copy bandwidth); 1.00 would be "
        "memory-bound. Timings vary run to run on these shared machines; compare the ratios, not the absolute ms.\n";
  return md;
}

}  // namespace ladder::cli
