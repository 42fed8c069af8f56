// ref/src/06-disagg/golden.cpp -- stage 06 golden cases (data/golden/06-disagg/<case>/).
//
// The simulator is deterministic, so every case is exact (tolerance 0): per-request times as float64,
// step times on a grid, goodput bisections, and the reproduce identities. Inputs are the case's
// setup (case.json "setup"), built here from presets.hpp; all outputs go through the registry.
// One case, requests_chunked, is a case-contract folder (ref/src/06-disagg/contract.cpp): the request list
// as inputs, the setup as params, the contract's outputs and a digest, so `ladder check 06-disagg`
// judges a candidate against it.
#include <map>

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "ladder/06-disagg/golden_cases.hpp"

namespace ladder::disagg {
namespace {

Registry& reg() {
  static Registry r = [] {
    Registry x;
    register_disagg(x);
    return x;
  }();
  return r;
}

Array<double> records_array(const std::vector<RequestRecord>& rs) {
  Array<double> a({static_cast<int64_t>(rs.size()), static_cast<int64_t>(kRecordColumns.size())});
  for (size_t i = 0; i < rs.size(); ++i) {
    const RequestRecord& r = rs[i];
    const double row[] = {static_cast<double>(r.id), static_cast<double>(r.input), static_cast<double>(r.output),
                          r.arrival, r.prefill_start, r.first_token, r.pulled, r.decode_start, r.finish,
                          static_cast<double>(r.prefill_worker), static_cast<double>(r.decode_worker), r.ttft(),
                          r.tpot()};
    for (size_t j = 0; j < kRecordColumns.size(); ++j) a.data[i * kRecordColumns.size() + j] = row[j];
  }
  return a;
}

}  // namespace

std::map<std::string, Array<double>> golden_outputs(const std::string& name) {
  std::map<std::string, Array<double>> out;
  if (name == "step_models") {
    const auto grid_p = prefill_grid();
    const auto grid_d = decode_grid();
    const auto models = golden_step_models(reg());
    Array<double> p({static_cast<int64_t>(models.size()), static_cast<int64_t>(grid_p.size())});
    Array<double> d({static_cast<int64_t>(models.size()), static_cast<int64_t>(grid_d.size())});
    for (size_t m = 0; m < models.size(); ++m) {
      for (size_t i = 0; i < grid_p.size(); ++i) p.data[m * grid_p.size() + i] = models[m].second->prefill_ms(grid_p[i]);
      for (size_t i = 0; i < grid_d.size(); ++i) d.data[m * grid_d.size() + i] = models[m].second->decode_ms(grid_d[i]);
    }
    out["prefill_ms"] = p, out["decode_ms"] = d;
  } else if (name == "identities") {
    const auto ids = identities();
    Array<double> v({static_cast<int64_t>(ids.size())});
    for (size_t i = 0; i < ids.size(); ++i) v.data[i] = ids[i].ours;
    out["values"] = v;
  } else if (name == "goodput_fig1") {
    const SimSetup s = golden_setup(name);
    Array<double> g({static_cast<int64_t>(s.placements.size()), 5});
    for (size_t i = 0; i < s.placements.size(); ++i) {
      const GoodputResult r = reg().find(kStage, "ref", "goodput").fn<GoodputFn>()(s, s.placements[i]);
      const double row[] = {r.rate, r.per_gpu, r.attainment, r.upper, static_cast<double>(r.probes)};
      for (int j = 0; j < 5; ++j) g.data[i * 5 + static_cast<size_t>(j)] = row[j];
    }
    out["goodput"] = g;
  } else {
    const SimSetup s = golden_setup(name);
    const Placement& p = s.placements.front();
    const char* rung = p.cluster.colocated > 0 ? "colocated" : "disaggregated";
    SimOptions o;
    o.keep_requests = true;
    const SimResult r = reg().find(kStage, "ref", rung).fn<SimulateFn>()(s, p, o);
    out["records"] = records_array(r.records);
    const Summary& S = r.summary;
    Array<double> sm({9});
    const double row[] = {static_cast<double>(S.requests), static_cast<double>(S.met_both), S.mean_ttft(),
                          S.mean_tpot(), S.end_ms, static_cast<double>(S.prefill_batches),
                          static_cast<double>(S.decode_steps), static_cast<double>(S.max_in_flight),
                          static_cast<double>(S.max_blocks_used)};
    for (size_t j = 0; j < 9; ++j) sm.data[j] = row[j];
    out["summary"] = sm;
  }
  return out;
}

std::vector<std::string> golden_case_names() {
  return {"goodput_fig1",       "identities",    "requests_chunked", "sim_1p2d_roofline",
          "sim_2p1d_migration", "sim_colocated", "step_models"};
}

namespace {

// 97 requests of the sim_colocated workload's kind (uniform 97..1023 in, 1..113 out, Poisson at 2.5 req/s,
// seed 605) on one colocated worker with Sarathi-style chunks of 512 tokens.
void write_contract_case(const std::filesystem::path& dir) {
  Workload w{2.5, 1.0, LengthDist::uniform(97, 1023), LengthDist::uniform(1, 113), {}, 97, 605, {}};
  Array<double> t({w.requests});
  Array<int64_t> in({w.requests}), out({w.requests});
  ArrivalStream stream(w);
  for (int64_t i = 0; !stream.done(); ++i) {
    const Arrival a = stream.next();
    t.data[i] = a.t_ms, in.data[i] = a.input, out.data[i] = a.output;
  }
  const Tensors inputs = {{"arrival_ms", to_npy(t)}, {"input_len", to_npy(in)}, {"output_len", to_npy(out)}};
  const nlohmann::json params = {
      {"placement", {{"colocated", 1}}},
      {"workers", {{"chunked_prefill_tokens", 512}, {"kv_capacity_tokens", 16384}, {"decode_max_batch", 64}}}};
  const Contract& c = contract(kStage);
  nlohmann::json extra = {{"case", "requests_chunked"}, {"seed", w.seed}, {"rungs", golden_case_rungs("requests_chunked")},
                          {"description", golden_case_description("requests_chunked")}};
  write_case(c, dir, inputs, params, run_oracle(c, inputs, params), extra);
}

}  // namespace

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool) {
  if (name == "requests_chunked") return write_contract_case(dir);
  const auto outs = golden_outputs(name);
  std::filesystem::create_directories(dir);
  nlohmann::json shapes = nlohmann::json::object(), dtypes = nlohmann::json::object();
  nlohmann::json files = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const auto& [n, a] : outs) {
    save_npy(dir / (n + ".npy"), a);
    shapes[n] = a.shape, dtypes[n] = "<f8";
    files.push_back(n + ".npy"), outputs.push_back(n);
  }
  std::vector<std::string> rungs;
  nlohmann::json j = case_manifest(kStage, golden_case_rungs(name), golden_case_seed(name), shapes, dtypes,
                                   rules_json(contract(kStage), shapes));
  j["case"] = name;
  j["description"] = golden_case_description(name);
  j["outputs"] = outputs;
  j["files"] = files;
  j["comparison"] = "exact: the simulator is deterministic (events ordered by time then creation; no clock)";
  j["setup"] = golden_case_setup_json(name);
  if (outs.count("records")) j["records_columns"] = kRecordColumns;
  if (outs.count("summary"))
    j["summary_columns"] = {"requests", "met_both", "mean_ttft_ms", "mean_tpot_ms", "end_ms", "prefill_batches",
                            "decode_steps", "max_in_flight", "max_blocks_used"};
  if (outs.count("goodput")) j["goodput_columns"] = {"rate_rps", "per_gpu_rps", "attainment", "upper_rps", "probes"};
  if (name == "identities") {
    nlohmann::json rows = nlohmann::json::array();
    for (const Identity& id : identities()) rows.push_back({{"name", id.name}, {"paper", id.paper}, {"unit", id.unit}});
    j["values_rows"] = rows;
  }
  write_json(dir / "case.json", j);
}

}  // namespace ladder::disagg
