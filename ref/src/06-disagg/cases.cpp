// ref/src/06-disagg/cases.cpp -- stage 06: golden setups, grids and the reproduce identities.
#include <cmath>

#include "ladder/06-disagg/analytic.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/presets.hpp"

namespace ladder::disagg {
namespace {

BatchStats prefill_of(std::initializer_list<int64_t> lens) {
  BatchStats b;
  for (int64_t l : lens) {
    const double x = static_cast<double>(l);
    ++b.n, b.sum_tokens += x, b.sum_sq += x * x;
  }
  return b;
}

SimSetup base_setup(const std::string& name) {
  SimSetup s;
  s.name = name;
  s.model = std::make_shared<DistServeModel>(distserve_opt13b_a100());
  s.model_name = "opt-13b", s.gpu_name = "a100-80gb";
  s.kv_bytes_per_token = opt_13b().kv_bytes_per_token();
  s.slo = Slo{400, 40};
  return s;
}

Placement placement(const std::string& name, int64_t p, int64_t d, int64_t colo, double kv_bytes) {
  Placement pl;
  pl.name = name;
  pl.cluster.prefill = p, pl.cluster.decode = d, pl.cluster.colocated = colo;
  pl.cluster.kv_bytes_per_token = kv_bytes;
  return pl;
}

}  // namespace

std::vector<BatchStats> prefill_grid() {
  return {prefill_of({1}), prefill_of({97}), prefill_of({512}), prefill_of({1023}), prefill_of({1025}),
          prefill_of({512, 512, 1025, 97}), prefill_of({2048, 2048, 2048, 2048}), prefill_of({16384})};
}

std::vector<BatchStats> decode_grid() {
  return {BatchStats{1, 1, 0},          BatchStats{1, 513, 0},          BatchStats{7, 7 * 1025, 0},
          BatchStats{64, 64 * 576, 0},  BatchStats{97, 97 * 1023, 0},   BatchStats{255, 255 * 2048.0, 0}};
}

std::vector<std::pair<std::string, std::shared_ptr<const StepModel>>> golden_step_models(const Registry& reg) {
  StepModelInputs opt{opt_13b(), a100_80gb(), 1, distserve_opt13b_a100(), ""};
  StepModelInputs v3{deepseek_v3(), h800_sxm(), 8, distserve_opt13b_a100(), ""};
  const auto& distserve = reg.find(kStage, "ref", "distserve").fn<StepModelFn>();
  const auto& roofline = reg.find(kStage, "ref", "roofline").fn<StepModelFn>();
  // The table rung needs a file; its golden is the interpolation of this in-memory table (the CSV
  // loader is tested against data/disagg/example-step-table.csv).
  std::vector<TableRow> pre = {{1, 1, 18.2}, {1, 512, 72.1}, {1, 2048, 257.7}, {4, 2048, 262.0}, {4, 8192, 1325.0}};
  std::vector<TableRow> dec = {{1, 1, 19.97}, {1, 2048, 21.25}, {64, 4096, 24.9}, {64, 131072, 104.5}, {256, 524288, 358.6}};
  return {{"distserve OPT-13B A100", distserve(opt)},
          {"roofline OPT-13B A100", roofline(opt)},
          {"roofline DeepSeek-V3 8xH800", roofline(v3)},
          {"table (in-memory example)", std::make_shared<TableModel>(pre, dec, "in-memory example")}};
}

SimSetup golden_setup(const std::string& name) {
  SimSetup s = base_setup(name);
  const double opt_kv = s.kv_bytes_per_token;
  if (name == "sim_colocated") {
    s.placements = {placement("colocated", 0, 0, 1, opt_kv)};
    s.placements[0].cluster.kv_capacity_tokens = 16384, s.placements[0].cluster.decode_max_batch = 64;
    s.workload = Workload{2.5, 1.0, LengthDist::uniform(97, 1023), LengthDist::uniform(1, 113), {}, 300, 601, {}};
  } else if (name == "sim_2p1d_migration") {
    s.placements = {placement("2P1D", 2, 1, 0, opt_kv)};
    Cluster& c = s.placements[0].cluster;
    c.kv_capacity_tokens = 32768, c.decode_max_batch = 48, c.link_GBps = 25, c.link_latency_ms = 0.5;
    s.workload = Workload{5.0, 2.0, LengthDist::uniform(1, 1025), LengthDist::uniform(1, 97), {}, 300, 602, {}};
  } else if (name == "sim_1p2d_roofline") {
    s.model = std::make_shared<RooflineModel>(deepseek_v3(), h800_sxm(), 8);
    s.model_name = "deepseek-v3", s.gpu_name = "h800-sxm";
    s.kv_bytes_per_token = deepseek_v3().kv_bytes_per_token();
    s.placements = {placement("1P2D", 1, 2, 0, s.kv_bytes_per_token)};
    Cluster& c = s.placements[0].cluster;
    c.gpus_per_worker = 8, c.kv_capacity_tokens = 1 << 18, c.link_GBps = 50, c.link_latency_ms = 1;
    s.workload = Workload{8.0, 0.5, LengthDist{LengthDist::Kind::trace, 1, 1}, LengthDist{LengthDist::Kind::trace, 1, 1},
                          {{97, 13}, {1023, 1}, {512, 64}, {1, 200}, {2048, 7}, {333, 111}}, 200, 603, {}};
  } else if (name == "goodput_fig1") {
    s.placements = {placement("colocated", 0, 0, 1, opt_kv), placement("2P1D", 2, 1, 0, opt_kv)};
    for (Placement& p : s.placements) p.cluster.prefill_token_budget = 4096, p.cluster.kv_capacity_tokens = 65536;
    s.workload = Workload{1.0, 1.0, LengthDist::fixed(512), LengthDist::fixed(64), {}, 400, 604, {}};
    s.search.precision = 0.05;
  } else {
    throw Error("06-disagg: no simulator case '" + name + "'");
  }
  return s;
}

std::vector<std::string> golden_case_rungs(const std::string& name) {
  if (name == "step_models") return {"distserve", "roofline", "table"};
  if (name == "identities") return {};
  if (name == "goodput_fig1") return {"goodput", "colocated", "disaggregated"};
  if (name == "requests_chunked") return {"colocated"};
  return {golden_setup(name).placements.front().cluster.colocated > 0 ? "colocated" : "disaggregated"};
}

uint64_t golden_case_seed(const std::string& name) {
  if (name == "step_models" || name == "identities") return 0;
  if (name == "requests_chunked") return 605;
  return golden_setup(name).workload.seed;
}

std::string golden_case_description(const std::string& name) {
  if (name == "step_models") return "prefill_ms [models, prefill_grid] and decode_ms [models, decode_grid]";
  if (name == "identities") return "the reproduce identities (values_rows names them), computed from their inputs";
  if (name == "requests_chunked")
    return "the case contract's form: a request list (inputs) on one colocated worker with chunked prefill (params) "
           "-> per-request ttft_ms, tpot_ms, finish_ms, workers, slo_met; `ladder check 06-disagg` reads it";
  if (name == "goodput_fig1") return "DistServe Fig. 1 setup (512/64, 0.4 s / 0.04 s) on 400 requests: goodput per placement";
  return "per-request records (records_columns) and the summary of one simulation";
}

nlohmann::json golden_case_setup_json(const std::string& name) {
  if (name == "step_models") {
    nlohmann::json j;
    for (const BatchStats& b : prefill_grid()) j["prefill_grid"].push_back({b.n, b.sum_tokens, b.sum_sq});
    for (const BatchStats& b : decode_grid()) j["decode_grid"].push_back({b.n, b.sum_tokens});
    j["models"] = {"distserve OPT-13B A100", "roofline OPT-13B A100 bf16", "roofline DeepSeek-V3 8xH800 bf16",
                   "table (in-memory example)"};
    return j;
  }
  if (name == "identities") return nlohmann::json::object();
  const SimSetup s = golden_setup(name);
  nlohmann::json j;
  j["model"] = s.model->describe();
  for (const Placement& p : s.placements) {
    const Cluster& c = p.cluster;
    j["placements"].push_back({{"name", p.name}, {"prefill", c.prefill}, {"decode", c.decode}, {"colocated", c.colocated},
                               {"gpus_per_worker", c.gpus_per_worker}, {"prefill_token_budget", c.prefill_token_budget},
                               {"decode_max_batch", c.decode_max_batch}, {"kv_capacity_tokens", c.kv_capacity_tokens},
                               {"block_tokens", c.block_tokens}, {"kv_bytes_per_token", c.kv_bytes_per_token},
                               {"link_GBps", c.link_GBps}, {"latency_ms", c.link_latency_ms}});
  }
  const Workload& w = s.workload;
  j["workload"] = {{"rate", w.rate}, {"cv", w.cv}, {"requests", w.requests}, {"seed", w.seed},
                   {"input", {w.input.lo, w.input.hi}}, {"output", {w.output.lo, w.output.hi}}, {"trace", w.trace}};
  j["slo_ms"] = {s.slo.ttft_ms, s.slo.tpot_ms};
  j["goodput"] = {{"target", s.search.target}, {"precision_rps", s.search.precision}, {"start_rps", s.search.start}};
  return j;
}

std::vector<Identity> identities() {
  // Sources by name and section: the Huawei report (華為昇騰服務器DeepSeek V3/R1推理部署最佳實踐), the
  // README of the JAX DeepSeek-R1 inference code, the DeepSeek-V2 MLA optimisation notes; DeepSeek's
  // day-6 post is not one of the documents this project implements.
  const std::string huawei = "Huawei report", table2 = huawei + " Sec. 7.1.1, Table 2";
  std::vector<Identity> v;
  const double accept[3] = {0.7, 0.8, 0.9};
  const double paper_2k[3] = {723, 765, 808}, paper_1k[3] = {784, 830, 876};
  for (int i = 0; i < 3; ++i)
    v.push_back({fmt::format("Huawei A2 decode 2K/2K tokens/s/card, MTP accept {:.0f}%, T_step 169.3 ms", 100 * accept[i]),
                 mtp_tokens_per_s(72, accept[i], 0.1693), paper_2k[i], 1, "tokens/s",
                 i == 0 ? "72 (1 + p) / T_step; T_step = 72 x 1.7 / 723 is back-solved from this figure"
                        : "72 (1 + p) / T_step with the T_step back-solved from the 70% column (723)",
                 i == 0 ? "restated" : "consistency", table2});
  for (int i = 0; i < 3; ++i)
    v.push_back({fmt::format("Huawei A2 decode 1K/2K tokens/s/card, MTP accept {:.0f}%, T_step 156.1 ms", 100 * accept[i]),
                 mtp_tokens_per_s(72, accept[i], 0.1561), paper_1k[i], 1, "tokens/s",
                 i == 0 ? "72 (1 + p) / T_step; T_step = 72 x 1.7 / 784 is back-solved from this figure"
                        : "72 (1 + p) / T_step with the T_step back-solved from the 70% column (784)",
                 i == 0 ? "restated" : "consistency", table2});
  v.push_back({"Huawei A2 decode TPOT at 70% acceptance, T_step 169.3 ms", 1e3 * mtp_tpot_s(0.7, 0.1693), 99.6, 0.05, "ms",
               "T_step / (1 + p) = 72 / 723 tok/s: the stated TPOT against the stated throughput and concurrency",
               "consistency", huawei + " Sec. 7.1.1"});
  v.push_back({"Huawei A2 prefill tokens/s/card (16384 tokens, 0.631 s, 16 cards)",
               prefill_tokens_per_s_per_card(16384, 0.631, 16), 1622, 1, "tokens/s",
               "16384 / 0.631 / 16: the stated throughput against the stated 631 ms (the report's arithmetic; our "
               "prefill model is not in this row)", "consistency", huawei + " Sec. 7.1.2"});
  const double kv = mla_kv_bytes_per_token(512, 64, 61, 2);
  v.push_back({"DeepSeek-V3 MLA KV cache per token (61 layers, bf16)", kv, 70272, 0, "B",
               "(512 + 64) x 61 x 2; printed by no source (the compared value is this arithmetic)", "derived",
               "DeepSeek-V2 MLA notes (c_kv 512, k_pe 64); Huawei report Sec. 3.1.1 (KV cache BF16), Sec. 3.2 (61 layers)"});
  v.push_back({"Huawei A2 KV cache per card, 72 requests x 4096 tokens", kv * 72 * 4096 / 1e9, 20, 1, "GB (1e9 B)",
               "70,272 x 72 x 4096; the report says 'close to 20 GB' (19.3 GiB)", "derived", huawei + " Sec. 3.2.1"});
  v.push_back({"Huawei A2 tokens per expert per step (72 concurrency, MTP, top-8, 32 cards, 256 experts)",
               72.0 * 2 * 8 * 32 / 256, 144, 0, "tokens", "72 x 2 x 8 x 32 / 256: the report prints this formula",
               "restated", huawei + " Sec. 7.1.1 and Sec. 8"});
  const double pre = nodes_needed(608e9, 73.7e3), dec = nodes_needed(168e9, 14.8e3);
  const std::string day6 = "DeepSeek day-6 'Inference System Overview' (not one of the documents implemented)";
  v.push_back({"DeepSeek day-6 prefill H800 nodes (608B input tokens/day at 73.7k tokens/s/node)", pre, 95.5, 0.05,
               "nodes", "608e9 / 86400 / 73.7e3; day 6 prints no per-phase node count (the compared value is this "
               "arithmetic)", "derived", day6});
  v.push_back({"DeepSeek day-6 decode H800 nodes (168B output tokens/day at 14.8k tokens/s/node)", dec, 131.4, 0.05,
               "nodes", "168e9 / 86400 / 14.8e3; day 6 prints no per-phase node count (the compared value is this "
               "arithmetic)", "derived", day6});
  v.push_back({"DeepSeek day-6 nodes in all (their reported average occupancy: 226.75)", pre + dec, 226.75, 0.5, "nodes",
               "prefill + decode: the stated tokens/day and tokens/s/node against the stated node occupancy",
               "consistency", day6});
  // The JAX DeepSeek-R1 README's table: (batch, context, tok/s, printed HBM utilisation %).
  const double jax[10][4] = {{1, 32, 75.8, 113},   {1, 512, 75.9, 113},  {1, 4096, 73.8, 110}, {1, 8192, 71.0, 106},
                             {8, 32, 50.5, 75.2},  {8, 512, 48.0, 71.4}, {8, 4096, 42.1, 62.6}, {8, 8192, 35.6, 52.9},
                             {128, 32, 19.6, 29.1}, {128, 512, 17.4, 25.8}};
  for (const auto& r : jax)
    v.push_back({fmt::format("JAX v5e-64 HBM utilisation, batch {:.0f}, context {:.0f}, {} tok/s", r[0], r[1], r[2]),
                 100 * hbm_utilisation(780, r[2], 64, 819), r[3], r[3] >= 100 ? 0.5 : 0.1, "%",
                 "780 GB x tok/s / (64 x 819 GB/s); 780 GB is FITTED to this utilisation column (no source states "
                 "it): one constant for all ten rows shows only that the column is proportional to tok/s",
                 "consistency", "README of the JAX DeepSeek-R1 inference code, performance table"});
  return v;
}

}  // namespace ladder::disagg
