// tools/ladder/03-mla/report.hpp -- the pieces of `ladder reproduce 03-mla` (stage 03), in three files:
//   reproduce.cpp           the exact part: the notes' table from each rung's Cost, AM's per-query
//                                  FLOPs and weights, the largest L that fits a memory budget, the
//                                  true-shape correctness check;
//   reproduce_chunk.cpp     prefill vs decode: where a chunk's decompressed and absorbed paths cost
//                                  the same, MTP's arithmetic intensity (chunk_cost);
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
// What one timed step of the measured sweep may keep resident (Cost: weights, cache, scratch): without
// --large the whole `ladder reproduce` (`make reproduce`) stays under 1 GB, so it runs on a student's laptop;
// with --large, the 4 GiB above at DeepSeek-V2 shapes (5-7 GB in all).
inline double measure_budget_bytes(const ReproduceContext& ctx) { return ctx.large ? kBudgetBytes : 0.5 * (1ull << 30); }

// The model the measured part times (and, in a full run, the correctness check runs): its weights and
// AM's absorbed matrices, made once (at DeepSeek-V2 shapes the absorption alone is 112 GFLOP).
struct Model {
  mla::Weights<float> W;
  std::shared_ptr<const mla::Absorbed<float>> absorbed;
};
// The timed shapes: DeepSeek-V2 with --large; else its cache row (512 + 64) and head dims with 16 heads,
// hidden 1024, q_lora 512 (at DeepSeek-V2's 128 heads and hidden 5120 the weights and AM's absorbed
// matrices alone are 2.3 GB in fp32, and the sweep peaked at 5.0 GB; the report says which shapes it timed).
mla::Config timing_config(const ReproduceContext& ctx);

void exact_part(const ReproduceContext& ctx, const Model& model, Out& out);
// Prefill vs decode (reproduce_chunk.cpp): the crossover q_len and MTP's arithmetic intensity, from chunk_cost.
void chunk_part(Out& out);
void chunk_measured(const ReproduceContext& ctx, const Model& model, Out& out);
void measured_part(const ReproduceContext& ctx, const Model& model, Out& out);

}  // namespace ladder::cli::mla_report
