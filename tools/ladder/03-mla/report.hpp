// tools/ladder/03-mla/report.hpp -- the pieces of `ladder reproduce 03-mla` (stage 03), in two files:
//   reproduce.cpp           the exact part: the notes' table from each rung's Cost, AM's per-query
//                                  FLOPs and weights, the largest L that fits a memory budget, the
//                                  true-shape correctness check;
//   reproduce_measured.cpp  the measured part: time per decode step vs L per rung (B = 1, 32),
//                                  ratios beside the notes' A100 figures, marginal rates vs this CPU's
//                                  GEMM rate and copy bandwidth (the roofline), CSV and PNG.
#pragma once
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>

#include "cli.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder::cli::mla_report {

// Text goes to stdout and into the Markdown report.
struct Out {
  std::string md;
  void line(const std::string& s) {
    fmt::print("{}\n", s);
    md += s + "\n\n";
  }
  void table(const std::string& s) {
    fmt::print("{}", s);
    md += s + "\n";
  }
};

// The notes' values by id (data/papers/03-mla.json, the one place they are written down).
std::map<std::string, nlohmann::json> paper_values();

// The six registered reference rungs in ladder order, and their ids.
inline const std::vector<const char*>& rung_ids() {
  static const std::vector<const char*> ids = {"CD", "CC", "A_CC", "A_CC_ME", "AM", "flash_mla"};
  return ids;
}

// Memory budget of the measured runs and of the "largest L" table on this machine: a quarter of a
// 23 GB machine shared by four engineers, for what one step keeps resident (Cost: weights, cache, scratch).
inline constexpr double kBudgetBytes = 4.0 * (1ull << 30);

// The model the measured part times (and, in a full run, the correctness check runs): its weights and
// AM's absorbed matrices, made once (at DeepSeek-V2 shapes the absorption alone is 112 GFLOP).
struct Model {
  mla::Weights<float> W;
  std::shared_ptr<const mla::Absorbed<float>> absorbed;
};
// DeepSeek-V2; --quick: 16 heads, hidden 1024, q_lora 512, the cache row and head dims of DeepSeek-V2
// (the report says so).
mla::Config timing_config(bool quick);

void exact_part(const ReproduceContext& ctx, const Model& model, Out& out);
void measured_part(const ReproduceContext& ctx, const Model& model, Out& out);

}  // namespace ladder::cli::mla_report
