// ref/src/06-disagg/contract.cpp -- stage 06's case contract (core/contract.hpp), beside its registry.
//
//   06 disagg   step-time model -> [event simulator] -> KV-cache migration
//
// The user's own request list (arrival time, prompt and output lengths) through the event simulator
// (ladder/06-disagg/simulator.hpp) on one placement: per-request TTFT, TPOT, finish time, the workers that
// served it and whether it met both SLOs. The setup is the case's params; everything the simulator
// needs is in them (no data/ file is read), so a case folder is self-contained.
// Every output is exact: the simulator is deterministic (events ordered by time then creation, no
// clock, no unordered container), so a right answer reproduces the oracle's float64 times bit for
// bit; a simulator that differs by one ulp has taken another path (another batch, another order).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "ladder/06-disagg/rungs.hpp"
#include "ladder/06-disagg/simulator.hpp"

namespace ladder::disagg {
namespace {

using nlohmann::json;
constexpr int64_t kMaxRequests = int64_t{1} << 24;  // 16M requests: beyond this a typo, not a workload
constexpr double kMaxMs = 1e9;                      // step-model coefficients and table entries

void check_param_keys(const json& j, const std::string& where, std::initializer_list<const char*> known) {
  require(j.is_object(), "06-disagg: param {} = {} violates a JSON object", where, j.dump());
  std::string list;
  for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
  for (const auto& [key, v] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    require(ok, "06-disagg: unknown param '{}{}' (known: {})", where.empty() ? "" : where + ".", key, list);
  }
}

double number(const json& j, const char* key, const std::string& where, double fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  require(v.is_number() && std::abs(v.get<double>()) <= kMaxMs, "06-disagg: param {}.{} = {} violates a number "
          "within +-1e9", where, key, v.dump());
  return v.get<double>();
}

int64_t integer(const json& j, const char* key, const std::string& where, int64_t fallback, int64_t lo) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  require(v.is_number_integer(), "06-disagg: param {}.{} = {} violates type integer", where, key, v.dump());
  const int64_t x = v.get<int64_t>();
  require(x >= lo, "06-disagg: param {}.{} = {} violates >= {}", where, key, x, lo);
  return x;
}

std::array<double, 3> triple(const json& j, const char* key, const std::array<double, 3>& fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  // Bounded so that no step time overflows to inf (inf - inf in a hybrid step would be NaN).
  const auto ok = [](const json& x) { return x.is_number() && x.get<double>() >= 0 && x.get<double>() <= kMaxMs; };
  require(v.is_array() && v.size() == 3 && std::all_of(v.begin(), v.end(), ok),
          "06-disagg: param step_model.{} = {} violates [a, b, c] (three numbers in [0, 1e9], ms)", key, v.dump());
  return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

std::vector<TableRow> table_rows(const json& sm, const char* phase) {
  require(sm.contains(phase) && sm.at(phase).is_array(), "06-disagg: param step_model.{} is required for kind "
          "\"table\": a list of [batch, tokens, ms]", phase);
  std::vector<TableRow> rows;
  for (const json& r : sm.at(phase)) {
    const auto in_range = [](const json& x) { return x.is_number() && std::abs(x.get<double>()) <= kMaxMs; };
    require(r.is_array() && r.size() == 3 && r[0].is_number_integer() && in_range(r[1]) && in_range(r[2]),
            "06-disagg: param step_model.{} row {} violates [batch (integer), tokens, ms] (|tokens|, |ms| <= 1e9)",
            phase, r.dump());
    rows.push_back({r[0].get<int64_t>(), r[1].get<double>(), r[2].get<double>()});
  }
  return rows;
}

struct Setup {
  std::shared_ptr<const StepModel> model;
  Cluster cluster;
  Slo slo;
};

Setup setup_of(const json& p) {
  check_param_keys(p, "", {"step_model", "placement", "workers", "kv_transfer", "slo"});
  Setup s;
  const json sm = p.value("step_model", json::object());
  check_param_keys(sm, "step_model", {"kind", "prefill", "decode"});
  const std::string kind = sm.value("kind", std::string("distserve"));
  if (kind == "distserve") {
    const DistServeCoefficients d0 = distserve_opt13b_a100();
    DistServeCoefficients c;
    const auto pre = triple(sm, "prefill", {d0.prefill[0], d0.prefill[1], d0.prefill[2]});
    const auto dec = triple(sm, "decode", {d0.decode[0], d0.decode[1], d0.decode[2]});
    for (int i = 0; i < 3; ++i) c.prefill[i] = pre[i], c.decode[i] = dec[i];
    s.model = std::make_shared<DistServeModel>(c);
  } else if (kind == "table") {
    s.model = std::make_shared<TableModel>(table_rows(sm, "prefill"), table_rows(sm, "decode"), "case params");
  } else {
    throw Error("06-disagg: param step_model.kind = '" + kind + "' violates distserve | table");
  }
  const json pl = p.value("placement", json{{"colocated", 1}});
  check_param_keys(pl, "placement", {"prefill", "decode", "colocated", "gpus_per_worker"});
  Cluster& c = s.cluster;
  c.prefill = integer(pl, "prefill", "placement", 0, 0), c.decode = integer(pl, "decode", "placement", 0, 0);
  c.colocated = integer(pl, "colocated", "placement", 0, 0);
  c.gpus_per_worker = integer(pl, "gpus_per_worker", "placement", 1, 1);
  require(c.prefill + c.decode + c.colocated <= 4096, "06-disagg: param placement has {} workers, violates <= 4096",
          c.prefill + c.decode + c.colocated);
  const json wk = p.value("workers", json::object());
  check_param_keys(wk, "workers", {"prefill_token_budget", "decode_max_batch", "kv_capacity_tokens", "block_tokens",
                             "chunked_prefill_tokens"});
  c.prefill_token_budget = integer(wk, "prefill_token_budget", "workers", c.prefill_token_budget, 1);
  c.decode_max_batch = integer(wk, "decode_max_batch", "workers", c.decode_max_batch, 1);
  c.kv_capacity_tokens = integer(wk, "kv_capacity_tokens", "workers", c.kv_capacity_tokens, 1);
  c.block_tokens = integer(wk, "block_tokens", "workers", c.block_tokens, 1);
  c.chunked_prefill_tokens = integer(wk, "chunked_prefill_tokens", "workers", 0, 1);
  const json kv = p.value("kv_transfer", json::object());
  check_param_keys(kv, "kv_transfer", {"bytes_per_token", "link_GBps", "latency_ms"});
  c.kv_bytes_per_token = number(kv, "bytes_per_token", "kv_transfer", opt_13b().kv_bytes_per_token());
  c.link_GBps = number(kv, "link_GBps", "kv_transfer", 0);
  c.link_latency_ms = number(kv, "latency_ms", "kv_transfer", 0);
  const json slo = p.value("slo", json::object());
  check_param_keys(slo, "slo", {"ttft_s", "tpot_s"});
  s.slo = Slo{1e3 * number(slo, "ttft_s", "slo", 0.4), 1e3 * number(slo, "tpot_s", "slo", 0.04)};
  require(s.slo.ttft_ms > 0 && s.slo.tpot_ms > 0, "06-disagg: param slo = {} violates ttft_s > 0 and tpot_s > 0",
          slo.dump());
  return s;
}

Workload requests_of(const Tensors& in) {
  const NpyData& t = tensor(in, "arrival_ms", kStage);
  require(t.shape.size() == 1 && t.shape[0] >= 1 && t.shape[0] <= kMaxRequests,
          "06-disagg: input arrival_ms has shape {}, violates [n] with 1 <= n <= {}", shape_str(t.shape), kMaxRequests);
  const Array<double> at = from_npy<double>(t, "06-disagg: input arrival_ms");
  Array<int64_t> len[2];
  const char* names[2] = {"input_len", "output_len"};
  for (int k = 0; k < 2; ++k) {
    len[k] = npy_as_int64(tensor(in, names[k], kStage), std::string("06-disagg: input ") + names[k]);
    require(len[k].shape == at.shape, "06-disagg: input {} has shape {}, violates the shape of arrival_ms, {}", names[k],
            shape_str(len[k].shape), shape_str(at.shape));
  }
  Workload w;
  w.requests = at.size();
  w.arrivals.reserve(static_cast<size_t>(at.size()));
  for (int64_t i = 0; i < at.size(); ++i) w.arrivals.push_back(Arrival{i, at.data[i], len[0].data[i], len[1].data[i]});
  return w;  // check_workload (in the simulator) names a bad arrival or length
}

// The per-request outputs of one simulation (records kept), in request order.
Tensors outputs_of(const SimResult& r, const Workload& w, const Slo& slo) {
  const Shape n{w.requests};
  Array<double> ttft(n), tpot(n), fin(n);
  Array<int64_t> pw(n), dw(n), met(n);
  for (const RequestRecord& q : r.records) {
    const auto i = static_cast<size_t>(q.id);
    ttft.data[i] = q.ttft(), tpot.data[i] = q.tpot(), fin.data[i] = q.finish;
    pw.data[i] = q.prefill_worker, dw.data[i] = q.decode_worker;
    met.data[i] = q.ttft() <= slo.ttft_ms && q.tpot() <= slo.tpot_ms;
  }
  return {{"ttft_ms", to_npy(ttft)},      {"tpot_ms", to_npy(tpot)},        {"finish_ms", to_npy(fin)},
          {"prefill_worker", to_npy(pw)}, {"decode_worker", to_npy(dw)},   {"slo_met", to_npy(met)}};
}

Tensors oracle(const Tensors& in, const json& params) {
  const Setup s = setup_of(params);
  const Workload w = requests_of(in);
  SimOptions o;
  o.keep_requests = true;
  return outputs_of(simulate(*s.model, s.cluster, w, s.slo, o), w, s.slo);
}

// Python's ladder.run("06-disagg", rung, ...): the simulator rungs (colocated, disaggregated) run on the
// case's request list and setup through the registered function, which refuses a placement of the
// other kind. The step-model and goodput rungs do not take a request list: they have their own calls.
Tensors run_rung(const Rung& r, const Tensors& in, const json& params, DType precision) {
  require(precision == DType::F8, "06-disagg: precision float32 violates float64 (the simulator's times are float64)");
  require(r.function.type() == typeid(SimulateFn), "06-disagg: rung '{}' does not take a request list (simulator "
          "rungs: colocated, disaggregated; step models: Python ladder.step_time; goodput: ladder.goodput)", r.id);
  const Setup s = setup_of(params);
  SimSetup setup;
  setup.model = s.model;
  setup.workload = requests_of(in);
  setup.slo = s.slo;
  SimOptions o;
  o.keep_requests = true;
  return outputs_of(r.fn<SimulateFn>()(setup, Placement{"case params", s.cluster}, o), setup.workload, s.slo);
}

}  // namespace
}  // namespace ladder::disagg

namespace ladder {

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_06_disagg() {
  using disagg::kStage;
  Contract c;
  c.stage = kStage;
  c.doc = "the event simulator on your request list: per-request TTFT, TPOT and finish time on one placement";
  c.inputs = {{"arrival_ms", "<f8", "[n]", "arrival time of each request, ms, non-decreasing from 0"},
              {"input_len", "<i8|<i4", "[n]", "prompt tokens of each request (>= 1)"},
              {"output_len", "<i8|<i4", "[n]", "output tokens of each request, the first included (>= 1)"}};
  c.params = {
      {"step_model", "object", "{\"kind\": \"distserve\", \"prefill\": [a, b, c], \"decode\": [a, b, c]} (ms; default "
                               "DistServe's OPT-13B A100 fit) | {\"kind\": \"table\", \"prefill\": [[batch, tokens, "
                               "ms], ...], \"decode\": [...]}"},
      {"placement", "object", "{\"prefill\": x, \"decode\": y} (xPyD) | {\"colocated\": n} (default); gpus_per_worker"},
      {"workers", "object", "prefill_token_budget (8192), decode_max_batch (256), kv_capacity_tokens (2^20), "
                            "block_tokens (16), chunked_prefill_tokens (colocated only; absent: no chunking)"},
      {"kv_transfer", "object", "bytes_per_token (OPT-13B's), link_GBps (0: free), latency_ms (0)"},
      {"slo", "object", "ttft_s (0.4), tpot_s (0.04): DistServe Fig. 1's; they set slo_met only"}};
  const std::string why =
      "exact: the simulator is deterministic (events ordered by time then creation, no clock), so the same "
      "requests and setup give the same float64 times bit for bit; one ulp off is another schedule";
  c.outputs = {{"ttft_ms", "<f8", "[n]", "time to first token (first token - arrival), ms", Rule::exact, 0, why, false, ""},
               {"tpot_ms", "<f8", "[n]", "time per output token after the first ((finish - first) / (output - 1); "
                "0 for output 1), ms", Rule::exact, 0, why, false, ""},
               {"finish_ms", "<f8", "[n]", "time the last token exists, ms", Rule::exact, 0, why, false, ""},
               {"prefill_worker", "<i8", "[n]", "worker that ran its prefill (workers numbered P, then D or colocated)",
                Rule::exact, 0, "integer: exact; idle workers are served in index order", false, ""},
               {"decode_worker", "<i8", "[n]", "worker that decoded it (-1: output 1 on a colocated worker)",
                Rule::exact, 0, "integer: exact; decode workers pull in index order", false, ""},
               {"slo_met", "<i8", "[n]", "1 if TTFT <= slo.ttft_s and TPOT <= slo.tpot_s", Rule::exact, 0,
                "integer: exact", false, ""}};
  c.oracle_doc = "disagg::simulate (the 06-disagg colocated / disaggregated rungs' event loop) on the listed requests";
  c.oracle = disagg::oracle;
  c.run_rung = disagg::run_rung;
  return c;
}

}  // namespace stage_records

}  // namespace ladder
