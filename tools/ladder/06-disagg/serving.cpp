// tools/ladder/06-disagg/serving.cpp -- `ladder deploy FILE`: a serving deployment (data/serving/*.json) run end to
// end in the event simulator, and the search for the largest concurrency per card that meets its TPOT limit
// (ladder/06-disagg/deploy/serving_search.hpp); and its table in `ladder reproduce 06-disagg`.
//
//   ladder deploy data/serving/huawei-a2.json [--tpot-limit MS] [--acceptance P] [--per-card N] [--waves N]
//                 [--input N] [--output N] [--prefill-instances X] [--decode-instances Y] [--max-per-card N]
//
// Prints a line per probe (concurrency per card, memory, TPOT mean / p90, tokens/s per decode card, the decode batch
// reached, prefill busy time), then the result beside the report's figures (data/papers). Bad files, fields and
// options throw ladder::Error naming them (main.cpp: one line, exit 2) before anything runs.
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "cli.hpp"
#include "ladder/core/json.hpp"
#include "ladder/06-disagg/deploy/serving_search.hpp"
#include "plan.hpp"
#include "reproduce.hpp"

namespace ladder::cli {
namespace deploy06 {
using namespace ladder::deploy;

namespace {
// Every printed figure of both papers files, by id.
std::map<std::string, double> all_paper_figures() {
  std::map<std::string, double> out = paper_figures();
  const nlohmann::json j = read_json(disagg06::data_root() / "papers" / "06-disagg.json");
  for (const auto& e : j.at("entries")) out[e.at("id").get<std::string>()] = e.at("value").get<double>();
  return out;
}
}  // namespace

std::string probe_header() {
  return "| per card | memory GB (fits) | TPOT mean ms | TPOT p90 ms | decode tokens/s per card | decode batch per card "
         "| prefill instances needed | tokens per step | step ms (model) | waves (requests) |\n|---|---|---|---|---|---|---|---|---|---|\n";
}
std::string probe_row(const ServingPoint& p) {
  if (!p.simulated)
    return fmt::format("| {} | {:.1f} (no) | - | - | - | - | - | - | {:.1f} | - |\n", p.per_card, p.memory_GB, p.step_ms);
  return fmt::format("| {} | {:.1f} (yes) | {:.1f} | {:.1f} | {:.0f} | {:.1f} | {:.2f} | {:.3f} | {:.1f} | {} ({}) |\n",
                     p.per_card, p.memory_GB, p.tpot_mean_ms, p.tpot_p90_ms, p.decode_tokens_per_card_s,
                     p.batch_per_card, p.prefill_needed, p.tokens_per_step, p.step_ms, p.waves, p.requests);
}

Serving named_serving(const std::string& name) {
  return load_serving(disagg06::data_root() / "serving" / (name + ".json"), disagg06::data_root());
}

std::string serving_summary(const Serving& s, const ServingSearch& r) {
  const auto paper = all_paper_figures();
  const auto reported = [&](const std::string& id) { return id.empty() || !paper.count(id) ? 0.0 : paper.at(id); };
  std::string md = fmt::format("Result: {}", r.found ? "" : "no concurrency meets the limit; ");
  md += fmt::format("{} per card (memory allows {}; stopped by {}){}.\n\n", r.best.per_card, r.memory_max, r.binds,
                    r.best.prefill_bound() ? "; the decode batch stayed below its cap: prefill binds, add prefill "
                                             "instances" : "");
  md += "| instance | ours | report | ratio | label |\n|---|---|---|---|---|\n";
  const double rd = reported(s.report_decode_id), rp = reported(s.report_prefill_id);
  md += fmt::format("| decode ({}, {} cards x {}), tokens/s per card at TPOT <= {:g} ms | {:.0f} at {} per card | {} | {} "
                    "| derived (simulated on the layouts' rooflines) |\n",
                    s.decode.layout_name, s.decode.layout.cards, s.decode.count, s.tpot_limit_ms,
                    r.best.decode_tokens_per_card_s, r.best.per_card,
                    rd > 0 ? fmt::format("{:g}{}", rd, s.report_per_card ? fmt::format(" at {} per card", s.report_per_card) : "") : "-",
                    rd > 0 ? fmt::format("{:.2f}", r.best.decode_tokens_per_card_s / rd) : "-");
  md += fmt::format("| prefill ({}, {} cards x {}), input tokens/s per card while busy | {:.0f} | {} | {} | derived "
                    "(simulated on the layouts' rooflines) |\n",
                    s.prefill.layout_name, s.prefill.layout.cards, s.prefill.count, r.best.prefill_tokens_per_card_s,
                    rp > 0 ? fmt::format("{:g}", rp) : "-",
                    rp > 0 ? fmt::format("{:.2f}", r.best.prefill_tokens_per_card_s / rp) : "-");
  return md;
}

std::string run_serving(const Serving& s, bool progress) {
  std::string md = fmt::format("### {}\n\n{}: {}P{}D ({} prefill x {} cards, {} decode x {} cards), {} + {} tokens, "
                               "MTP {} draft(s) at p = {:g} (E = {:.3f} tokens per step), TPOT limit {:g} ms, {} waves, "
                               "seed {}.\nStep model: {}.\n\n",
                               s.name, s.file, s.prefill.count, s.decode.count, s.prefill.count,
                               s.prefill.layout.cards, s.decode.count, s.decode.layout.cards, s.input, s.output,
                               s.mtp_draft, s.acceptance, s.tokens_per_step(), s.tpot_limit_ms, s.waves, s.seed,
                               LayoutStepModel(s).describe());
  const ServingSearch r = search_serving(s, {}, [&](const ServingPoint& p) {
    if (progress) fmt::print(stderr, "  probe {} per card: {}\n", p.per_card,
                             p.simulated ? fmt::format("TPOT {:.1f} ms", p.tpot_mean_ms) : "does not fit");
  });
  md += "Probes (a bracket around the step model's estimate, then bisection on the concurrency per decode card):\n\n" +
        probe_header();
  for (const ServingPoint& p : r.probes) md += probe_row(p);
  if (s.report_per_card > 0) {
    const ServingPoint p = simulate_serving(s, s.report_per_card);
    md += fmt::format("\nAt the report's concurrency, {} per card: TPOT {:.1f} ms (limit {:g}), {:.0f} tokens/s per decode "
                      "card.\n\n{}{}", s.report_per_card, p.tpot_mean_ms, s.tpot_limit_ms, p.decode_tokens_per_card_s,
                      probe_header(), probe_row(p));
  }
  return md + "\n" + serving_summary(s, r);
}

std::string serving_table(bool quick) {
  std::string md =
      "End to end (issue 39, part 5): each serving deployment (data/serving/*.json: the decode and prefill layouts, "
      "xPyD, MTP, lengths, TPOT limit) runs in the event simulator with the layouts' step model (per-module rooflines "
      "and collectives at the quoted peaks; MTP steps drawn per request); a search (a bracket around the step model's estimate, then bisection) finds the largest concurrency "
      "per decode card whose mean TPOT meets the limit (chapter 06, 'The deployments end to end'). Label: derived (simulated from "
      "specs; nothing fitted to the report); the report column is its measurement as printed (data/papers).\n\n"
      "| deployment | TPOT limit (ms) | per card found | stopped by | TPOT mean / p90 (ms) | decode tokens/s per card | "
      "report | ratio | prefill tokens/s per card | report | ratio | label |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  const auto paper = all_paper_figures();
  for (const char* name : {"huawei-a2", "huawei-cm384"}) {
    Serving s = named_serving(name);
    if (quick) s.waves = 3;
    const ServingSearch r = search_serving(s);
    const double rd = s.report_decode_id.empty() ? 0 : paper.at(s.report_decode_id);
    const double rp = s.report_prefill_id.empty() ? 0 : paper.at(s.report_prefill_id);
    const ServingPoint& b = r.best;
    md += fmt::format("| {} ({}P{}D) | {:g} | {}{} | {} | {:.1f} / {:.1f} | {:.0f} | {} | {} | {:.0f} | {} | {} | derived |\n",
                      name, s.prefill.count, s.decode.count, s.tpot_limit_ms, b.per_card,
                      s.report_per_card ? fmt::format(" (report {})", s.report_per_card) : "", r.binds, b.tpot_mean_ms,
                      b.tpot_p90_ms, b.decode_tokens_per_card_s, rd > 0 ? fmt::format("{:g}", rd) : "-",
                      rd > 0 ? fmt::format("{:.2f}", b.decode_tokens_per_card_s / rd) : "-",
                      b.prefill_tokens_per_card_s, rp > 0 ? fmt::format("{:g}", rp) : "-",
                      rp > 0 ? fmt::format("{:.2f}", b.prefill_tokens_per_card_s / rp) : "-");
  }
  md += "\nOurs is optimistic for the reason the operating-points table gives (every op at the quoted peak, no fixed "
        "per-kernel or per-collective latency, no framework time); the search adds what that table could not: the "
        "concurrency itself is found, not assumed, and the TPOT is measured on simulated requests that join and leave "
        "the batch, with MTP acceptance drawn per step.\n";
  return md;
}

}  // namespace deploy06

void add_deploy_command(CLI::App& app) {
  struct Opts {
    std::string file;
    double tpot = 0, acceptance = -1;
    int64_t per_card = 0, waves = 0, input = 0, output = 0, prefill = 0, decode = 0, max_per_card = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("deploy", "stage 06: a serving deployment end to end in the event simulator; the "
                                           "largest concurrency per card meeting its TPOT limit, tokens/s per card");
  cmd->add_option("file", o->file, "serving JSON (data/serving/*.json)")->required();
  auto* tpot = cmd->add_option("--tpot-limit", o->tpot, "override tpot_limit_ms (> 0)");
  auto* acc = cmd->add_option("--acceptance", o->acceptance, "override mtp.acceptance (0 <= p <= 1)");
  auto* per = cmd->add_option("--per-card", o->per_card, "simulate this concurrency per decode card only (no search)");
  auto* waves = cmd->add_option("--waves", o->waves, "override search.waves (>= 3): requests = waves x the decode batch cap");
  auto* in = cmd->add_option("--input", o->input, "override requests.input (tokens, >= 1)");
  auto* out = cmd->add_option("--output", o->output, "override requests.output (tokens, >= 2)");
  auto* px = cmd->add_option("--prefill-instances", o->prefill, "override prefill.instances (x of xPyD, >= 1)");
  auto* dy = cmd->add_option("--decode-instances", o->decode, "override decode.instances (y of xPyD, >= 1)");
  auto* mx = cmd->add_option("--max-per-card", o->max_per_card, "override search.max_per_card (>= 1)");
  cmd->callback([=] {
    using namespace ladder::deploy;
    Serving s = load_serving(o->file, cli::disagg06::data_root());
    if (tpot->count()) {
      require(std::isfinite(o->tpot) && o->tpot > 0, "deploy: --tpot-limit = {} violates > 0 (ms)", o->tpot);
      s.tpot_limit_ms = o->tpot;
    }
    if (acc->count()) {
      require(o->acceptance >= 0 && o->acceptance <= 1, "deploy: --acceptance = {} violates 0 <= p <= 1", o->acceptance);
      s.acceptance = o->acceptance;
    }
    if (per->count()) require(o->per_card >= 1, "deploy: --per-card = {} violates >= 1", o->per_card);
    if (waves->count()) {
      require(o->waves >= 3, "deploy: --waves = {} violates >= 3 (the batch fills, runs full, drains)", o->waves);
      s.waves = o->waves;
    }
    const auto at_least = [](CLI::Option* opt, int64_t v, int64_t lo, int64_t& into) {
      if (!opt->count()) return;
      require(v >= lo, "deploy: {} = {} violates >= {}", opt->get_name(), v, lo);
      into = v;
    };
    at_least(in, o->input, 1, s.input);
    at_least(out, o->output, 2, s.output);
    at_least(px, o->prefill, 1, s.prefill.count);
    at_least(dy, o->decode, 1, s.decode.count);
    at_least(mx, o->max_per_card, 1, s.max_per_card);
    if (!per->count()) {
      fmt::print("{}", deploy06::run_serving(s, true));
      return;
    }
    const ServingPoint p = simulate_serving(s, o->per_card);
    fmt::print("{}: {} per card, TPOT limit {:g} ms: {}\n\n{}{}", s.file, o->per_card, s.tpot_limit_ms,
               !p.fits ? "does not fit the decode card's memory" : p.meets(s.tpot_limit_ms) ? "meets it" : "exceeds it",
               deploy06::probe_header(), deploy06::probe_row(p));
  });
}

}  // namespace ladder::cli
