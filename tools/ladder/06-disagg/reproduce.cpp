// tools/ladder/06-disagg/reproduce.cpp -- `ladder reproduce 06-disagg`.
//
// Everything is computed here from the sources' inputs (the papers' printed values, for comparison
// only, are in data/papers/06-disagg.json and ladder/06-disagg/golden.hpp's identities):
//   1. DistServe Fig. 1: colocated vs 2P1D per-GPU goodput on data/disagg/distserve-fig1.json, and what
//      chunked prefill (Sarathi-Serve) does to the colocated worker's TTFT / TPOT attainment;
//   2. M/D/1: the formula vs the simulator for one prefill worker at several utilisations;
//   3. the deployment identities (Huawei A2, DeepSeek day 6, JAX v5e-64);
//   4. the roofline model beside DistServe's fit for OPT-13B on the A100 (predicted vs fitted);
//   5. the deployment half (plan.cpp): the Huawei report's memory figures beside ours, KV under MLA
//      TP vs DP, MTP (acceptance sweep, the verify rung's chi-square), two-batch overlap, DP-rank balance, and the
//      report's operating points beside the step model's prediction (operating.cpp), and its Sec. 5-6 techniques as
//      switches on the A2 decode and prefill steps (techniques.cpp), and the serving deployments end to end in the
//      event simulator with the concurrency search under a TPOT limit (serving.cpp).
#include <fmt/format.h>

#include "cli.hpp"
#include "plan.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "reproduce.hpp"

namespace ladder::cli {
namespace {

struct Out {
  std::string md;
  void line(const std::string& s) {
    fmt::print("{}\n", s);
    md += s + "\n";
  }
};

}  // namespace

std::string reproduce_06_disagg(const ReproduceContext& ctx) {
  using namespace disagg;
  Out o;
  o.md = "## 06-disagg\n\n";
  // 1. DistServe Fig. 1.
  SimSetup s = load_sim_config(disagg06::data_root() / "disagg" / "distserve-fig1.json", disagg06::data_root());
  if (ctx.quick) s.workload.requests = 1000, s.search.precision = 0.05;
  o.line(fmt::format("DistServe Fig. 1 (OPT-13B, A100, in 512 / out 64, TTFT 0.4 s, TPOT 0.04 s, 90%; {} requests, "
                     "seed {}, free KV migration). Label: derived (simulated); the step times are FITTED constants, "
                     "DistServe's own coefficients fitted to their OPT-13B / A100 profiling (in none of the "
                     "documents implemented; the CSE 234 lecture notes, Sec. 1, state only '2x more goodput on each "
                     "GPU'). The paper column is read off the figure:",
                     s.workload.requests, s.workload.seed));
  o.line("");
  o.line("| placement | goodput (req/s) | per GPU (req/s/GPU) | paper (req/s/GPU) |");
  o.line("|---|---|---|---|");
  std::vector<GoodputResult> g;
  const char* paper[] = {"1.6", "3.3 (10 req/s on 3 GPUs)"};
  std::vector<Placement> shapes = s.placements;  // and 2P1D's workers re-shaped: 1P1D, 2P2D (not in the figure)
  for (const auto& [p, d] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}}) {
    shapes.push_back(s.placements[1]);
    shapes.back().name = fmt::format("{}P{}D", p, d);
    shapes.back().cluster.prefill = p, shapes.back().cluster.decode = d;
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    g.push_back(goodput(s, shapes[i]));
    o.line(fmt::format("| {} | {:.2f} | {:.2f} | {} |", shapes[i].name, g.back().rate, g.back().per_gpu,
                       i < 2 ? paper[i] : "-"));
  }
  o.line("");
  o.line(fmt::format("ratio 2P1D / colocated per GPU: ours {:.2f}x, paper 3.3 / 1.6 = {:.2f}x (a small re-implementation of "
                     "DistServe's simulator with the same fitted coefficients gets 3.44 vs 6.62 for 1P1D, 1.9x).",
                     g[1].per_gpu / g[0].per_gpu, 3.3 / 1.6));
  o.line("Our absolute rates are higher than the figure's, we believe because the fitted step form alone is faster "
         "than the system measured in the figure (simdistserve adds per-step overheads we leave out; the figure ran a "
         "real serving system); our ratio is smaller than theirs and close to that re-implementation's. Policies "
         "(chapter 06 section 4): a migrated request joins a decode batch at the next step boundary; the least-loaded "
         "decode worker takes it (fewest requests held, then fewest KV blocks, then the lowest index).");
  // Chunked prefill on the colocated worker (Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM
  // Inference with Sarathi-Serve", OSDI'24): decodes first in every step, prompts in chunks after them.
  Placement chunked = s.placements[0];
  chunked.cluster.chunked_prefill_tokens = 512;
  chunked.name = "colocated chunked 512";  // no comma: the name is a CSV field
  const GoodputResult gc = goodput(s, chunked);
  Workload at = s.workload;
  at.rate = gc.rate;  // the highest rate the chunked worker serves within the SLOs
  const Summary plain = simulate(*s.model, s.placements[0].cluster, at, s.slo).summary;
  const Summary chunk = simulate(*s.model, chunked.cluster, at, s.slo).summary;
  const auto frac = [](int64_t k, const Summary& S) { return static_cast<double>(k) / static_cast<double>(S.requests); };
  o.line(fmt::format("Chunked prefill (Sarathi-Serve; colocated, 512-token steps, decodes first) at {:.2f} req/s: TTFT "
                     "attainment {:.3f} -> {:.3f}, TPOT {:.3f} -> {:.3f}, both {:.3f} -> {:.3f}; goodput {:.2f} -> "
                     "{:.2f} req/s/GPU (2P1D {:.2f}).",
                     at.rate, frac(plain.met_ttft, plain), frac(chunk.met_ttft, chunk), frac(plain.met_tpot, plain),
                     frac(chunk.met_tpot, chunk), plain.attainment(), chunk.attainment(), g[0].per_gpu, gc.per_gpu,
                     g[1].per_gpu));
  std::vector<disagg06::Curve> curves;
  const double hi = 1.5 * g[1].upper / static_cast<double>(s.placements[1].cluster.gpus());  // per GPU
  std::vector<Placement> plotted = s.placements;
  plotted.push_back(chunked);
  for (const Placement& p : plotted) {
    const double n = static_cast<double>(p.cluster.gpus());
    curves.push_back(disagg06::attainment_curve(s, p, n * hi / 30, n * hi, ctx.quick ? 12 : 30));
  }
  o.line("");

  // 2. M/D/1.
  SimSetup m = s;
  Placement one = s.placements[1];
  one.name = "1P1D, one request per prefill batch";
  one.cluster.prefill = 1, one.cluster.prefill_token_budget = 512;
  m.workload.output = LengthDist::fixed(1);
  m.workload.requests = ctx.quick ? 20000 : 100000;
  const double D = m.model->prefill_ms(BatchStats{1, 512, 512.0 * 512}) / 1e3;
  o.line(fmt::format("M/D/1 (one prefill worker, D = prefill(512) = {:.2f} ms, Poisson, {} requests): mean TTFT = "
                     "D + R D^2 / (2 (1 - R D))",
                     1e3 * D, m.workload.requests));
  o.line("");
  o.line("| utilisation R D | formula (ms) | simulated (ms) | difference |");
  o.line("|---|---|---|---|");
  for (double u : {0.3, 0.5, 0.7, 0.9}) {
    m.workload.rate = u / D;
    const double f = md1_mean_ttft(m.workload.rate, D) * 1e3;
    const double sim = simulate(*m.model, one.cluster, m.workload, m.slo).summary.mean_ttft();
    o.line(fmt::format("| {:.1f} | {:.2f} | {:.2f} | {:+.2f}% |", u, f, sim, 100 * (sim - f) / f));
  }
  o.line("");

  // 3. Identities.
  o.line("Deployment figures (paper = as printed), each labelled by what the agreement shows: derived = computed "
         "from inputs the source states (a check); consistency = the source's own numbers checked against each "
         "other; restated = the figure enters our computation (back-solved, or its printed formula redone): "
         "agreement by construction, no check, not a reproduction. Fitted constants are named in 'how'.");
  o.line("");
  o.line("| quantity | ours | paper | unit | label | how | source |");
  o.line("|---|---|---|---|---|---|---|");
  for (const Identity& id : identities())
    o.line(fmt::format("| {} | {:.6g} | {} | {} | {} | {} | {} |", id.name, id.ours, id.paper, id.unit, id.label,
                       id.how, id.source));
  o.line("");

  // 4. Roofline vs fitted.
  const RooflineModel roof(opt_13b(), a100_80gb(), 1);
  const DistServeModel fit(distserve_opt13b_a100());
  o.line("Roofline (OPT-13B, A100 bf16 peaks, per-op max(flops/peak, bytes/bw), no overlap; derived from the specs) "
         "vs DistServe's fit (FITTED to their A100 profiling):");
  o.line("");
  o.line("| step | roofline (ms) | fitted (ms) | roofline / fitted |");
  o.line("|---|---|---|---|");
  const std::vector<std::pair<std::string, std::pair<bool, BatchStats>>> rows = {
      {"prefill 1 x 512", {true, BatchStats{1, 512, 512.0 * 512}}},
      {"prefill 4 x 1024", {true, BatchStats{4, 4096, 4 * 1024.0 * 1024}}},
      {"decode B 1, ctx 544", {false, BatchStats{1, 544, 0}}},
      {"decode B 32, ctx 544", {false, BatchStats{32, 32 * 544.0, 0}}},
      {"decode B 128, ctx 544", {false, BatchStats{128, 128 * 544.0, 0}}}};
  for (const auto& [name, r] : rows) {
    const double a = r.first ? roof.prefill_ms(r.second) : roof.decode_ms(r.second);
    const double b = r.first ? fit.prefill_ms(r.second) : fit.decode_ms(r.second);
    o.line(fmt::format("| {} | {:.2f} | {:.2f} | {:.2f} |", name, a, b, a / b));
  }
  o.line("");
  o.line("The roofline is a lower bound (peak rates, no overheads): the fit, measured on a real A100, sits 1.4-1.7x "
         "above it at every size in the table.");
  const std::string png = disagg06::plot(ctx.out_dir / "06-disagg", curves, {}, "DistServe Fig. 1 (ours)");
  o.line("");
  o.line("plots: " + png);
  o.line("");

  // 5. The deployment (chapter 06 sections 9-14): memory, KV argument, MTP, overlap; each table prints as computed.
  for (const std::string& t : {deploy06::memory_figures_table(), deploy06::kv_tp_vs_dp_table(),
                               deploy06::mtp_table(ctx.quick), deploy06::overlap_table(),
                               deploy06::balance_table(ctx.quick), deploy06::operating_points_table(),
                               deploy06::techniques_table(), deploy06::serving_table(ctx.quick)}) {
    fmt::print("{}\n", t);
    o.md += t + "\n";
  }
  return o.md;
}

}  // namespace ladder::cli
