// tools/ladder/03-mla/reproduce_chunk.cpp -- `ladder reproduce 03-mla`, prefill vs decode (report.hpp): a chunk
// of q_len tokens on a prefix of P, decompressed (the prefill rung) against absorbed (the decode rungs' form),
// from chunk_cost (cost.hpp, checked against the counted FLOPs by tests/03-mla/test_mla_prefill.cpp): where
// the two cost the same, at DeepSeek-V2 and V3 shapes and other head counts; and the arithmetic intensity of
// the absorbed decode with s_q query tokens (MTP) against the H800's ridge point. Computed, never typed in.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "ladder/core/json.hpp"
#include "ladder/core/timing.hpp"
#include "report.hpp"
#include "source_dir.hpp"

namespace ladder::cli::mla_report {
namespace {

using namespace ladder::mla;

double flops(ChunkPath p, const Config& c, int64_t P, int64_t n) {
  return chunk_cost(p, chunk_cost_shape(c, 1, P, n, 2)).flops;
}

// The smallest q_len at which the decompressed path is cheaper than the absorbed one (from Cost, a scan).
int64_t first_decompressed_cheaper(const Config& c, int64_t P) {
  for (int64_t n = 1; n <= (int64_t{1} << 20); ++n)
    if (flops(ChunkPath::Decompressed, c, P, n) < flops(ChunkPath::Absorbed, c, P, n)) return n;
  return -1;
}

Config v3_config() {
  const auto j = read_json(ladder::source_dir() / "data" / "models" / "deepseek-v3.json");
  Config c = deepseek_v2();
  c.hidden = j.at("model").at("hidden_size").at("value").get<int64_t>();
  c.n_heads = j.at("model").at("num_attention_heads").at("value").get<int64_t>();
  const auto& a = j.at("attention");
  c.q_lora_rank = a.at("q_lora_rank").at("value").get<int64_t>();
  c.kv_lora_rank = a.at("kv_lora_rank").at("value").get<int64_t>();
  c.qk_nope = a.at("qk_nope_head_dim").at("value").get<int64_t>();
  c.qk_rope = a.at("qk_rope_head_dim").at("value").get<int64_t>();
  c.v_head = a.at("v_head_dim").at("value").get<int64_t>();
  return c;
}

}  // namespace

void chunk_part(Out& out) {
  const Config v2 = deepseek_v2(), v3 = v3_config();
  out.line("### Prefill vs decode: a chunk of q_len tokens on a prefix of P, decompressed vs absorbed (from chunk_cost)");
  out.line(
      "Decompressed (the prefill rung, FlashMLA's MHA mode: d_qk = nope + rope, d_v = v per head) rebuilds K and V "
      "of all P + q_len tokens, 2 H kv_lora (nope + v) FLOPs each, then 2 H (nope + rope + v) per causal query-key "
      "pair; absorbed (the decode rungs, MQA mode: d_qk = kv_lora + rope, d_v = kv_lora) pays 2 H kv_lora (nope + v) "
      "per query token instead and 2 H (2 kv_lora + rope) per pair. With pairs = q_len P + q_len (q_len + 1) / 2, "
      "F_abs - F_dec = 2 H [pairs (2 kv_lora - nope - v) - P kv_lora (nope + v)], zero at q_len* = sqrt((P + 1/2)^2 + "
      "2 P c) - (P + 1/2), c = kv_lora (nope + v) / (2 kv_lora - nope - v). Below q_len* absorbing is cheaper, above "
      "it decompressing; H, B and hidden cancel.");
  std::string t =
      "| shapes | P | q_len* (formula) | first q_len where decompressed is cheaper (Cost) | FLOPs at q_len = 1: "
      "absorbed / decompressed | at q_len = 1024 |\n|---|---|---|---|---|---|\n";
  for (const auto& [name, c] : {std::pair{"DeepSeek-V2", v2}, std::pair{"DeepSeek-V3", v3}})
    for (int64_t P : {0, 1024, 4096, 32768}) {
      t += fmt::format("| {} (H {}, hidden {}) | {} | {:.2f} | {} | {:.3f} | {:.3f} |\n", name, c.n_heads, c.hidden, P,
                       chunk_crossover(c, static_cast<double>(P)), first_decompressed_cheaper(c, P),
                       flops(ChunkPath::Absorbed, c, P, 1) / flops(ChunkPath::Decompressed, c, P, 1),
                       flops(ChunkPath::Absorbed, c, P, 1024) / flops(ChunkPath::Decompressed, c, P, 1024));
    }
  out.table(t);
  std::string heads = "| H | first q_len where decompressed is cheaper, P = 4096 (Cost) |\n|---|---|\n";
  for (int64_t H : {16, 32, 128}) {
    Config c = v2;
    c.n_heads = H;
    heads += fmt::format("| {} | {} |\n", H, first_decompressed_cheaper(c, 4096));
  }
  out.table(heads);
  const double R = static_cast<double>(v2.kv_lora_rank), nv = static_cast<double>(v2.qk_nope + v2.v_head);
  const double c_v2 = R * nv / (2 * R - nv);  // the limit of q_len* as P grows
  out.line(fmt::format(
      "V2 and V3 share kv_lora {}, nope {}, v {}, so c = {:.2f} for both: a decode step (q_len 1, or an MTP "
      "verify of a few tokens) is cheaper absorbed at any P > 0, a prefill chunk of more than ~{:.0f} tokens is "
      "cheaper decompressed, and a fresh prompt (P = 0) always is. That is the split of Huawei's DeepSeek-V3/R1 "
      "Ascend deployment report (§3.1.2: weight absorption makes MLA compute differently in prefill and decode; "
      "§3.2.1: prefill compute-bound, decode with weight absorption). Bytes: both read the same weights, prefix rows and h; "
      "the decompressed K, V are extra scratch of H (P + q_len) (nope + rope + v) elements.",
      v2.kv_lora_rank, v2.qk_nope, v2.v_head, c_v2, c_v2));

  // MTP: the absorbed decode with s_q tokens per sequence reads each cached row once for all s_q x H queries.
  const auto g = read_json(ladder::source_dir() / "data" / "gpus" / "h800-sxm.json");
  const double peak = g.at("tflops").at("bf16").at("value").get<double>() * 1e12;
  const double bw = g.at("hbm_GBps").at("value").get<double>() * 1e9, ridge = peak / bw;
  std::string m = "| s_q (query tokens per sequence) | FLOPs per cached byte (bf16, H = 128) | vs H800 ridge " +
                  fmt::format("{:.0f}", ridge) + " FLOP/B |\n|---|---|---|\n";
  double per_hs = 0;
  for (int64_t sq : {1, 2, 3, 4}) {
    const int64_t P = 4096;
    const Cost a = chunk_cost(ChunkPath::Absorbed, chunk_cost_shape(v3, 1, P + 1, sq, 2));
    const Cost b = chunk_cost(ChunkPath::Absorbed, chunk_cost_shape(v3, 1, P, sq, 2));
    const double intensity = (a.flops - b.flops) / (a.bytes_read - b.bytes_read);  // per cached token: d/dP
    per_hs = intensity / static_cast<double>(sq * v3.n_heads);
    m += fmt::format("| {} | {:.1f} | {} |\n", sq, intensity, intensity >= ridge ? "compute-bound" : "bandwidth-bound");
  }
  out.table(m);
  out.line(fmt::format(
      "Each cached row [c^KV | k^R] (2 (kv_lora + rope) bytes in bf16) meets every head of every query token: "
      "2 (2 kv_lora + rope) FLOPs per head per token, {:.3f} FLOP/B per h_q x s_q. The absorbed decode turns "
      "compute-bound on the H800 ({:.0f} TFLOP/s bf16, {:.0f} GB/s) once h_q x s_q >= {:.0f} (data/papers/03-mla.json "
      "flashmla_h800: ~{}, derived there from 865 TFLOP/s / 3.35 TB/s / 2; AUDIT.md says where it comes from): with DeepSeek's 128 heads on one GPU (DP attention), one MTP token (s_q = 2) is past it -- "
      "the Huawei report's \"compute density far above GQA and MHA ... no longer purely bandwidth-bound\" with MTP "
      "(§7.1.1).",
      per_hs, peak / 1e12, bw / 1e9, std::ceil(ridge / per_hs),
      paper_values().at("flashmla_h800").at("compute_bound_hq_sq").get<int>()));
}

// The measured crossover: q_len where the time ratio absorbed / decompressed passes 1, interpolated in log q_len
// between the two measured points around it; 0 if the decompressed path was faster at the first point, -1 if at none.
double measured_crossover(const std::vector<int64_t>& n, const std::vector<double>& ratio) {
  if (ratio.front() >= 1) return 0;
  for (size_t i = 1; i < n.size(); ++i)
    if (ratio[i] >= 1) {
      const double x0 = std::log(static_cast<double>(n[i - 1])), x1 = std::log(static_cast<double>(n[i]));
      const double f = (1 - ratio[i - 1]) / (ratio[i] - ratio[i - 1]);
      return std::exp(x0 + f * (x1 - x0));
    }
  return -1;
}

void chunk_measured(const ReproduceContext& ctx, const Model& model, Out& out) {
  if (ctx.quick) return;  // seconds of timing: the full run only
  const Config& c = model.W.cfg;
  const int64_t P = 1024;
  const std::vector<int64_t> q_lens{1, 4, 16, 64, 128, 256, 512, 1024};
  out.line(fmt::format(
      "### Prefill vs decode measured on this CPU: a chunk on a prefix of {} tokens, both paths (fp32; per q_len the "
      "two paths timed one after the other, median of 3 after a warm-up; H {}, hidden {}, kv_lora "
      "{}, nope {}, rope {}, v {})",
      P, c.n_heads, c.hidden, c.kv_lora_rank, c.qk_nope, c.qk_rope, c.v_head));
  // One prefix for every q_len: pages for P + the largest q_len, the first n new tokens taken per point.
  const ChunkInputs in = make_chunk_inputs(model.W, ChunkSpec{{P}, {q_lens.back()}, 11, false, 0});
  std::string t = "| q_len | absorbed: ms per new token | decompressed: ms per new token | time abs / dec | "
                  "FLOPs abs / dec (Cost) | GFLOP/s abs, dec |\n|---|---|---|---|---|---|\n";
  const std::filesystem::path csv_path = ctx.out_dir / "03-mla-chunk-timing.csv";
  std::ofstream csv(csv_path);
  csv << "P,q_len,path,seconds,flops,counted_crossover\n";
  const double counted = chunk_crossover(c, static_cast<double>(P));
  std::vector<double> time_ratio;
  double rate[2] = {0, 0};
  for (int64_t n : q_lens) {
    const Chunk<float> chunk{Mat<float>(in.chunk.h.topRows(n)), {n}};
    double sec[2] = {0, 0}, fl[2] = {0, 0};
    for (ChunkPath path : {ChunkPath::Absorbed, ChunkPath::Decompressed}) {
      const int k = path == ChunkPath::Decompressed;
      PagedCache<float> cache = in.cache;
      auto step = [&] {
        cache.seqlens = in.cache.seqlens;  // the prefix again: the chunk rewrites the same rows
        prefill_chunk(model.W, cache, chunk, path);
      };
      sec[k] = median_seconds(step, 3);
      fl[k] = flops(path, c, P, n);
      rate[k] = fl[k] / sec[k];
      csv << fmt::format("{},{},{},{},{},{}\n", P, n, k ? "decompressed" : "absorbed", sec[k], fl[k], counted);
    }
    time_ratio.push_back(sec[0] / sec[1]);
    t += fmt::format("| {} | {:.3f} | {:.3f} | {:.2f} | {:.2f} | {:.1f}, {:.1f} |\n", n,
                     1e3 * sec[0] / static_cast<double>(n), 1e3 * sec[1] / static_cast<double>(n), sec[0] / sec[1],
                     fl[0] / fl[1], 1e-9 * rate[0], 1e-9 * rate[1]);
  }
  out.table(t);
  csv.close();
  const double measured = measured_crossover(q_lens, time_ratio);
  const std::string m =
      measured < 0 ? fmt::format("not reached up to q_len {} (time abs / dec there {:.2f})", q_lens.back(),
                                 time_ratio.back())
      : measured == 0 ? std::string("below q_len 1 (the decompressed path faster at every q_len measured)")
                      : fmt::format("q_len ~ {:.0f} (the time ratio crossing 1, log-interpolated)", measured);
  out.table(fmt::format("| crossover at P = {} | counted (Cost's FLOPs, formula) | measured here (time) |\n|---|---|---|\n"
                        "| q_len where decompressed becomes the cheaper path | {:.1f} | {} |\n",
                        P, counted, m));
  out.line(fmt::format(
      "The two crossovers differ by the ratio of the two codes' rates: at q_len {} the absorbed path ran at {:.1f} "
      "GFLOP/s and the decompressed one at {:.1f}, so time equals where the FLOP ratio abs / dec reaches {:.2f}, "
      "not 1. The reference paths are not tuned kernels (the decompressed one runs a matrix-vector product per "
      "query row and head, the absorbed one an [H, keys] product per query token, which reuses each cache row "
      "across the H heads), so the measured crossover says where these two codes cross on this machine, not where "
      "FlashMLA's would; at small q_len the step's fixed costs (weight checks, the query path, a copy of the cache, "
      "OpenMP regions, which a shared machine makes slow) dwarf the attention FLOPs. Timings are one run's, "
      "never a test.",
      q_lens.back(), 1e-9 * rate[0], 1e-9 * rate[1], rate[0] / rate[1]));
  // The figure from the numbers just written (scripts/figures/ch03_prefill.py draws the chapter's copy the same way).
  const std::filesystem::path script = ladder::source_dir() / "scripts" / "figures" / "ch03_prefill.py";
  const std::filesystem::path png = ctx.out_dir / "03-mla-prefill.png";
  const std::string cmd = fmt::format("/usr/bin/python3 '{}' --csv '{}' --png '{}' > /dev/null 2>&1", script.string(),
                                      csv_path.string(), png.string());
  if (std::system(cmd.c_str()) == 0)
    out.line("![time per new token vs q_len, absorbed and decompressed, and the two ratios (this CPU)](03-mla-prefill.png)");
  out.line(fmt::format("CSV: {} (plot: scripts/figures/ch03_prefill.py; drawn when /usr/bin/python3 has matplotlib)",
                       csv_path.filename().string()));
}

}  // namespace ladder::cli::mla_report
