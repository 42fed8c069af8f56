// tools/ladder/06-disagg/plan.hpp -- stage 06, part 2: the tables of `ladder plan FILE` and the deployment half
// of `ladder reproduce 06-disagg` (tools/ladder/06-disagg/plan.cpp). Each returns Markdown; the callers print it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ladder/06-disagg/deploy/layout.hpp"
#include "ladder/06-disagg/deploy/serving_search.hpp"
#include "ladder/06-disagg/deploy/techniques.hpp"

namespace ladder::cli::deploy06 {

// data/deployments/NAME.json, its model and GPU files resolved under data/.
ladder::deploy::Layout named_layout(const std::string& name);
// The report's printed figures (data/papers/06-disagg-deploy.json): id -> value.
std::map<std::string, double> paper_figures();
// Per-card memory by module, collectives per step, FLOPs and bytes per module, step time.
std::string plan_tables(const ladder::deploy::Layout& L);
// The report's memory figures beside ours (GB and GiB, which fits) and the KV argument (MLA TP vs DP,
// and the same for MHA and GQA models of DeepSeek-V3's size).
std::string memory_figures_table();
std::string kv_tp_vs_dp_table();
// MTP: the acceptance sweep from the A2 decode step model beside Table 2; the verify rung's chi-square.
std::string mtp_table(bool quick);
// Overlap: no overlap vs two-batch overlap for every decode layout.
std::string overlap_table();
// DP-rank balance: round-robin vs least-KV vs predicted output length on a mixed-length workload.
std::string balance_table(bool quick);

// Operating points (operating.cpp): each figure the Huawei report (and DeepSeek's day 6) states beside the
// step model's prediction; reported is read from data/papers/06-disagg-deploy.json (id), ratio = predicted / reported.
struct OperatingPoint {
  std::string id, point, unit;
  double predicted = 0, reported = 0, ratio = 0;
  std::string how, term;  // how the prediction is computed; the largest term of the difference
};
std::vector<OperatingPoint> operating_points();
std::string operating_points_table();

// The report's Sec. 5-6 techniques as switches (techniques.cpp): one switch off against all on, on the A2 decode
// step (index 0) and the A2 prefill step (index 1), beside the claimed gain (data/papers, restated).
struct TechniqueRow {
  std::string name, section, claimed, why;
  deploy::TechniqueStep on[2], off[2];
  double gain(int i) const { return off[i].step_ms / on[i].step_ms - 1; }  // the report's "+x % performance"
  double bytes_change(int i, bool intra) const {  // on vs off, -0.25 = a quarter fewer bytes
    const double a = intra ? off[i].comm.intra : off[i].comm.inter, b = intra ? on[i].comm.intra : on[i].comm.inter;
    return a > 0 ? b / a - 1 : 0;
  }
};
deploy::Layout a2_decode_72();  // the A2 decode layout at 72 per card, context 3K (2K + 2K)
deploy::Layout a2_prefill();
std::vector<TechniqueRow> technique_rows();
std::string techniques_table();

// End to end (serving.cpp): a serving deployment (data/serving/NAME.json) in the event simulator, the concurrency
// search under its TPOT limit; the probe table, the result beside the report, and the table of `ladder reproduce`.
deploy::Serving named_serving(const std::string& name);
std::string probe_header();
std::string probe_row(const deploy::ServingPoint& p);
std::string serving_summary(const deploy::Serving& s, const deploy::ServingSearch& r);
std::string run_serving(const deploy::Serving& s, bool progress);
std::string serving_table(bool quick);

}  // namespace ladder::cli::deploy06
