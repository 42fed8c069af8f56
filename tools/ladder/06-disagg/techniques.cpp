// tools/ladder/06-disagg/techniques.cpp -- stage 06, part 3: the Huawei report's Sec. 5-6 techniques as
// switches on the step model (ladder/06-disagg/deploy/techniques.hpp), each one's effect on the A2 decode step
// (72 per card, context 3K, one MTP draft) and the A2 prefill step (8 x 2K on 16 cards) beside the gain the
// report claims for it (read from data/papers/06-disagg-deploy.json, labelled restated there).
//
// Each row is a leave-one-out: every switch on (the report's deployment), then this one off; the gain is
// step(off) / step(on) - 1, the report's "+x % performance" form. FlashComm is the exception: the TP <-> DP
// conversion replaces the MLA collectives it acts on, so its row is measured with the conversion off.
#include <fmt/format.h>

#include <functional>

#include "plan.hpp"
#include "ladder/06-disagg/deploy/techniques.hpp"
#include "reproduce.hpp"

namespace ladder::cli::deploy06 {
using namespace ladder::deploy;

Layout a2_decode_72() {
  Layout L = load_layout(disagg06::data_root() / "deployments" / "huawei-a2-decode.json", disagg06::data_root());
  L.work.requests_per_card = 72, L.work.context = 3072;  // 2K + 2K: the mean context over the decode
  L.work.tokens_per_card = 72 * (1 + L.work.mtp_draft);
  return L;
}
Layout a2_prefill() {
  return load_layout(disagg06::data_root() / "deployments" / "huawei-a2-prefill.json", disagg06::data_root());
}

std::vector<TechniqueRow> technique_rows() {
  const Layout dec = a2_decode_72(), pre = a2_prefill();
  const auto paper = paper_figures();
  std::vector<TechniqueRow> out;
  const auto row = [&](const std::string& name, const std::string& section, const std::function<void(Switches&)>& off,
                       bool conversion_off, const std::string& claimed, const std::string& why) {
    TechniqueRow r;
    r.name = name, r.section = section, r.claimed = claimed, r.why = why;
    for (int i = 0; i < 2; ++i) {
      const Layout& L = i == 0 ? dec : pre;
      Switches on = Switches::all();
      if (conversion_off) on.tp_dp_conversion = false;
      Switches o = on;
      off(o);
      r.on[i] = technique_step(L, on), r.off[i] = technique_step(L, o);
    }
    out.push_back(r);
  };
  const auto pct = [&](const char* id) { return paper.at(id); };
  row("FlashComm", "5.1", [](Switches& s) { s.flashcomm = false; }, true,
      fmt::format("prefill: {:g} % communication, +{:g} % performance", pct("tech_flashcomm_traffic"),
                  pct("tech_flashcomm_perf")),
      "the counted factor is the report's -25 % exactly (bf16 AllReduce = bf16 RS + bf16 AG; the AG goes int8); "
      "the step gains more than 10 % because our TP MLA's comm crosses the 50 GB/s node link at peak-rate compute");
  row("TP <-> DP conversion", "5.1", [](Switches& s) { s.tp_dp_conversion = false; }, false,
      fmt::format("prefill: {:g} % intra-node traffic, more than +{:g} % performance", pct("tech_conversion_intra"),
                  pct("tech_conversion_perf")),
      "our counted intra-node cut is the q_a / kv_a rows (2112 wide, int8) and the TP2 ReduceScatter against "
      "FlashComm's full-width gather and scatter; the replicated down projections it also removes add to the gain");
  row("comm-comm concurrency (int8 + scales before the AllGather)", "5.2", [](Switches& s) { s.comm_comm = false; },
      false, fmt::format("no figure of its own (part of the +{:g} % of Fig. 10)", pct("tech_gate_overlap_decode")),
      "ladder prices bytes, not launches: the gain is the AllGather's bf16 -> int8 + 4-byte scale; the launch "
      "overhead the concurrency hides is not modelled (no cited size)");
  row("prefetch during the ReduceScatter", "5.2", [](Switches& s) { s.prefetch = false; }, false,
      fmt::format("MLA about +{:g} %", pct("tech_prefetch_mla")),
      "at peak compute our decode MLA is bound by the absorbed attention's FLOPs, not by the bytes a prefetch "
      "removes; in prefill every MLA byte fits under the ReduceScatter (no cache capacity modelled) but the MLA is "
      "compute-bound at peak, so nothing is gained");
  row("gate and shared expert under the AllGather", "5.2", [](Switches& s) { s.gate_overlap = false; }, false,
      fmt::format("decode +{:g} % at large concurrency", pct("tech_gate_overlap_decode")),
      "the saving is bounded by min(AllGather, gate + shared expert) per layer; our AllGather is inter-node "
      "bound and longer than the shared expert, so the whole shared expert hides, but it is a small part of the step");
  row("fused Dispatch / Combine", "6.2", [](Switches& s) { s.fused_dispatch = false; }, false,
      fmt::format("no figure for the fusion; SMTurbo-CPP {:g} to {:g} % of Dispatch / Combine latency",
                  pct("tech_smturbo_low"), pct("tech_smturbo_high")),
      "not applicable to the A2 (AllGather / ReduceScatter, Sec. 3.2.3): 0 by construction; on an All2All layout "
      "it removes the InitialRouting copies (test_06_techniques shows it on the CM384 step)");
  row("hierarchical pipelined AllGather / ReduceScatter", "6.2", [](Switches& s) { s.hierarchical = false; }, false,
      "inter-node time almost fully hidden behind intra-node time at 4 nodes",
      "in our counted bytes it is the other way round: a card's share of the 50 GB/s node link (6.25 GB/s) is so "
      "much slower than its 392 GB/s mesh that the intra-node phase hides behind the inter-node one");
  return out;
}

std::string techniques_table() {
  std::string md =
      "The report's Sec. 5-6 techniques as switches on the step model (issue 39, part 4): each row turns one "
      "switch off with every other on (FlashComm: with the TP <-> DP conversion also off, since the conversion "
      "replaces the collectives it acts on) and prints the step with it and without it on the A2 decode step (72 "
      "per card, context 3K, MTP one draft) and the A2 prefill step (8 x 2K on 16 cards); gain = step(off) / "
      "step(on) - 1. Bytes are counted from data/models and the layouts, times at data/gpus' quoted peaks and the "
      "report's link rates (no efficiency applied, nothing fitted). Labels: ours derived; the claimed gain "
      "restated (the report's measurement, data/papers/06-disagg-deploy.json). Communicated bytes are per card per "
      "step.\n\n"
      "| technique | report | claimed gain (restated) | A2 decode: step off -> on (ms), gain | A2 decode comm bytes "
      "off -> on (MB) | A2 prefill: step off -> on (ms), gain | A2 prefill comm bytes off -> on (MB) | label | why "
      "ours differs |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const TechniqueRow& r : technique_rows()) {
    std::string cells;
    for (int i = 0; i < 2; ++i)
      cells += fmt::format("| {:.1f} -> {:.1f}, {:+.1f} % | {:.1f} -> {:.1f} (intra {:+.1f} %, inter {:+.1f} %) ",
                           r.off[i].step_ms, r.on[i].step_ms, 100 * r.gain(i), r.off[i].comm.total() / 1e6,
                           r.on[i].comm.total() / 1e6, 100 * r.bytes_change(i, true), 100 * r.bytes_change(i, false));
    md += fmt::format("| {} | Sec. {} | {} {}| derived | {} |\n", r.name, r.section, r.claimed, cells, r.why);
  }
  const TechniqueStep d = technique_step(a2_decode_72(), Switches::all()),
                      p = technique_step(a2_prefill(), Switches::all());
  md += fmt::format(
      "\nEvery switch on: A2 decode step {:.1f} ms (critical path {:.1f}, sum of ops {:.1f}); A2 prefill {:.1f} ms "
      "(critical path {:.1f}, sum {:.1f}). The step is the makespan of the per-layer graph on a compute and a "
      "communication stream, never below the critical path nor above the sum. The report's decode at 72 per card "
      "takes 169.3 ms per step (99.6 ms TPOT x 1.7) and its prefill 631 ms: where ours is shorter, the utilisation "
      "below peak that the report states (MLA at 55-60 %, Sec. 6.1) and the fixed per-collective costs are the gap.\n",
      d.step_ms, d.critical_ms, d.sum_ms, p.step_ms, p.critical_ms, p.sum_ms);
  return md;
}

}  // namespace ladder::cli::deploy06
