// tools/ladder/99-rowsum/reproduce.cpp -- `ladder reproduce 99-rowsum`: the worst error of each rung
// against the oracle on one wide row (a stage's reproduce section prints a table and returns it as Markdown).
#include <fmt/format.h>

#include <cmath>

#include "cli.hpp"
#include "ladder/99-rowsum/rowsum.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::cli {

std::string reproduce_99_rowsum(const ReproduceContext& ctx) {
  const int64_t cols = ctx.quick ? 1 << 16 : 1 << 22;
  std::vector<float> x(static_cast<size_t>(cols));
  Rng rng(7);
  for (auto& v : x) v = static_cast<float>(rng.normal()) + 1.f;
  std::vector<double> x64(x.begin(), x.end());
  double exact = 0;
  rowsum::pairwise_rows(x64.data(), &exact, 1, cols);
  std::string md = fmt::format("## 99-rowsum\n\n| rung | error of the float32 sum of {} values |\n|---|---|\n", cols);
  for (const Rung* r : registry().stage("99-rowsum", "ref")) {
    float s = 0;
    r->fn<rowsum::RowsFns>().f32(x.data(), &s, 1, cols);
    fmt::print("{:<10} {:.3e}\n", r->id, std::abs(s - exact));
    md += fmt::format("| {} | {:.3e} |\n", r->id, std::abs(s - exact));
  }
  return md;
}

}  // namespace ladder::cli
