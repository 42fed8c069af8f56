// tools/ladder/06-disagg/simulate.cpp -- `ladder simulate`: stage 06's event simulator on a config.
//
//   ladder simulate --config FILE.json [--rate R] [--requests N] [--no-goodput] [--records] [--plot DIR]
//
// Prints, per placement of the config: the metrics at the workload's rate (attainment, TTFT / TPOT /
// end-to-end mean and maximum, the invariants checked) and the goodput search (a progress line per
// probe on stderr). Memory is flat in the request count: the simulator keeps no per-request record
// unless asked. --records keeps them (about 100 B a request): percentiles and the per-request
// invariants; --plot DIR (which implies --records) writes attainment-vs-rate and TTFT/TPOT CDF data
// (CSV) and PNGs.
// Bad configs throw ladder::Error naming the key (main.cpp: one line, exit 2).
#include <fmt/format.h>

#include <cmath>

#include <cstdio>
#include <memory>

#include "cli.hpp"
#include "ladder/06-disagg/invariants.hpp"
#include "reproduce.hpp"

namespace ladder::cli {

void add_simulate_command(CLI::App& app) {
  struct Opts {
    std::string config, plot;
    double rate = 0;
    int64_t requests = 0;
    bool no_goodput = false, records = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("simulate", "stage 06: simulate a prefill/decode placement; metrics and goodput");
  cmd->add_option("--config", o->config, "config JSON (examples: data/disagg/*.json)")->required();
  CLI::Option* rate_opt = cmd->add_option("--rate", o->rate, "override workload.rate (requests/s, > 0)");
  CLI::Option* requests_opt = cmd->add_option("--requests", o->requests, "override workload.requests (>= 1)");
  cmd->add_flag("--no-goodput", o->no_goodput, "metrics at the rate only, no goodput search");
  cmd->add_flag("--records", o->records, "keep every request's record: percentiles and the per-request invariants "
                "(memory grows with the request count, about 100 B a request)");
  cmd->add_option("--plot", o->plot, "folder for attainment / CDF plots (PNG via /usr/bin/python3) and their CSVs");
  cmd->callback([o, rate_opt, requests_opt] {
    // Given means checked: 0 is refused like any other bad value (not taken as "use the config's").
    if (rate_opt->count() > 0)
      require(std::isfinite(o->rate) && o->rate > 0, "simulate: --rate = {} violates rate > 0 (requests/s)", o->rate);
    if (requests_opt->count() > 0)
      require(o->requests >= 1, "simulate: --requests = {} violates requests >= 1", o->requests);
    require(std::filesystem::exists(o->config), "simulate: --config {}: no such file", o->config);
    disagg::SimSetup s = disagg::load_sim_config(o->config, disagg06::data_root());
    if (rate_opt->count() > 0) s.workload.rate = o->rate;
    if (requests_opt->count() > 0) s.workload.requests = o->requests;
    fmt::print("config {}: model {} on {}; step model: {}\n", s.name, s.model_name, s.gpu_name, s.model->describe());
    fmt::print("workload: {} requests at {} req/s (cv {}), seed {}; SLO TTFT {} ms, TPOT {} ms, attainment >= {}\n",
               s.workload.requests, s.workload.rate, s.workload.cv, s.workload.seed, s.slo.ttft_ms, s.slo.tpot_ms,
               s.search.target);
    std::vector<disagg06::Curve> curves;
    std::vector<std::pair<std::string, std::vector<disagg::RequestRecord>>> cdfs;
    double max_good = 0;
    for (const disagg::Placement& p : s.placements) {
      disagg::SimOptions opt;
      opt.keep_requests = o->records || !o->plot.empty();
      disagg::SimResult r = disagg::simulate(*s.model, p.cluster, s.workload, s.slo, opt);
      const auto bad = disagg::check_invariants(*s.model, p.cluster, s.workload, r);
      const disagg::Summary& S = r.summary;
      fmt::print("\n[{}] {} GPUs ({}P {}D {} colocated, {} GPU/worker)\n", p.name, p.cluster.gpus(), p.cluster.prefill,
                 p.cluster.decode, p.cluster.colocated, p.cluster.gpus_per_worker);
      fmt::print("  attainment {:.4f} (TTFT {:.4f}, TPOT {:.4f}); {} prefill batches, {} decode steps; max in flight {}\n",
                 S.attainment(), static_cast<double>(S.met_ttft) / static_cast<double>(S.requests),
                 static_cast<double>(S.met_tpot) / static_cast<double>(S.requests), S.prefill_batches, S.decode_steps,
                 S.max_in_flight);
      if (opt.keep_requests) {
        std::vector<double> ttft, tpot, e2e;
        for (const auto& q : r.records) ttft.push_back(q.ttft()), tpot.push_back(q.tpot()), e2e.push_back(q.finish - q.arrival);
        for (const auto& [name, v] : {std::pair{"TTFT", ttft}, std::pair{"TPOT", tpot}, std::pair{"e2e", e2e}})
          fmt::print("  {:<4} ms: mean {:.2f}  p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  max {:.2f}\n", name,
                     [&] { double a = 0; for (double x : v) a += x; return v.empty() ? 0 : a / static_cast<double>(v.size()); }(),
                     disagg06::quantile(v, 0.5), disagg06::quantile(v, 0.9), disagg06::quantile(v, 0.99), disagg06::quantile(v, 1));
      } else {
        fmt::print("  TTFT ms: mean {:.2f}  max {:.2f}; TPOT ms: mean {:.2f}  max {:.2f}; e2e ms: mean {:.2f} "
                   "(percentiles: --records)\n", S.mean_ttft(), S.max_ttft, S.mean_tpot(), S.max_tpot,
                   S.requests ? S.sum_e2e / static_cast<double>(S.requests) : 0.0);
      }
      fmt::print("  KV blocks: max {} of {} per worker; invariants: {}{}\n", S.max_blocks_used, S.capacity_blocks,
                 bad.empty() ? "all hold" : bad.front(),
                 opt.keep_requests ? "" : " (conservation and KV capacity; the per-request ones with --records)");
      if (!o->plot.empty()) cdfs.emplace_back(p.name, std::move(r.records));
      if (o->no_goodput) continue;
      int probe = 0;
      const disagg::GoodputResult g = disagg::find_goodput(
          [&](double rate) {
            const double a = disagg::attainment_at(s, p, rate);
            std::fprintf(stderr, "  [%s] probe %d: rate %.4g req/s -> attainment %.4f\n", p.name.c_str(), ++probe, rate, a);
            return a;
          },
          p.cluster.gpus(), s.search);
      fmt::print("  goodput {:.4g} req/s = {:.4g} req/s per GPU (attainment {:.4f}; {:.4g} misses; {} probes, precision {})\n",
                 g.rate, g.per_gpu, g.attainment, g.upper, g.probes, s.search.precision);
      max_good = std::max(max_good, g.upper / static_cast<double>(p.cluster.gpus()));  // per GPU
    }
    if (!o->plot.empty()) {
      const double hi = max_good > 0 ? 1.5 * max_good : 2 * s.workload.rate;  // per GPU
      for (const auto& p : s.placements) {
        const double g = static_cast<double>(p.cluster.gpus());
        curves.push_back(disagg06::attainment_curve(s, p, g * hi / 40, g * hi, 40));
      }
      fmt::print("\nplots: {}\n", disagg06::plot(o->plot, curves, cdfs, s.name));
    }
  });
}

}  // namespace ladder::cli
