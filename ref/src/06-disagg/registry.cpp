// ref/src/06-disagg/registry.cpp -- registers the stage-06 rungs (ladder/06-disagg/rungs.hpp).
//
// Costs: the simulator's work is events, not tensors. Its cost shape is {requests, output_tokens,
// in_flight}: flops = requests x output_tokens (one context update per generated token), bytes = the
// per-request state it keeps, O(in-flight) and not O(requests) (sizeof RequestRecord + slot overhead).
// The step models cost a few dozen flops per call.
#include "ladder/core/registry.hpp"
#include "ladder/06-disagg/rungs.hpp"

namespace ladder {
namespace {

using namespace disagg;

Rung make(std::string id, std::string name, std::string doc, std::any fn, std::function<Cost(const Shape&)> cost,
          std::string cost_doc) {
  Rung r;
  r.stage = kStage, r.id = std::move(id), r.name = std::move(name), r.doc = std::move(doc), r.backend = "ref";
  r.function = std::move(fn), r.cost = std::move(cost), r.cost_doc = std::move(cost_doc);
  return r;
}

Cost step_cost(const Shape&) { return Cost{8, 0, 0, 0}; }

Cost sim_cost(const Shape& s) {
  require(s.size() == 3, "disagg: simulator cost shape {} must be {{requests, output_tokens, in_flight}}", shape_str(s));
  const double state = static_cast<double>(sizeof(RequestRecord) + 2 * sizeof(int64_t)) * static_cast<double>(s[2]);
  return Cost{static_cast<double>(s[0]) * static_cast<double>(s[1]), 0, 0, state};
}

SimResult run_kind(const SimSetup& s, const Placement& p, const SimOptions& o, bool colocated) {
  require((p.cluster.colocated > 0) == colocated, "disagg: rung {} given placement '{}' ({}P{}D, {} colocated)",
          colocated ? "colocated" : "disaggregated", p.name, p.cluster.prefill, p.cluster.decode, p.cluster.colocated);
  return simulate(*s.model, p.cluster, s.workload, s.slo, o);
}

}  // namespace

void register_disagg(Registry& r) {
  r.add(make("distserve", "DistServe fitted step time (OSDI'24 simulator)",
             "prefill a + b sum(l) + c sum(l^2), decode a + b sum(ctx) + c B, published OPT-13B A100 coefficients",
             StepModelFn([](const StepModelInputs& in) -> std::shared_ptr<const StepModel> {
               return std::make_shared<DistServeModel>(in.distserve);
             }),
             step_cost, "8 flops per step-time query"));
  r.add(make("roofline", "roofline step time from the stages' Cost",
             "per op max(flops/peak, bytes/HBM) summed: GEMMs, attention (02) or MLA (03), MoE (own formula)",
             StepModelFn([](const StepModelInputs& in) -> std::shared_ptr<const StepModel> {
               return std::make_shared<RooflineModel>(in.model, in.gpu, in.gpus);
             }),
             step_cost, "a few dozen flops per query (the Cost coefficients are fitted once)"));
  r.add(make("table", "measured step-time table (user CSV)",
             "phase,batch,tokens,ms rows; smallest batch >= n, linear in tokens",
             StepModelFn([](const StepModelInputs& in) -> std::shared_ptr<const StepModel> {
               return std::make_shared<TableModel>(load_table_model(in.table_csv));
             }),
             step_cost, "a lookup: O(log batches + rows)"));
  r.add(make("colocated", "colocated workers (prefill first, no chunking)",
             "one queue, each worker runs a prefill batch when it can, else a decode step of its batch",
             SimulateFn([](const SimSetup& s, const Placement& p, const SimOptions& o) { return run_kind(s, p, o, true); }),
             sim_cost, "shape {requests, output, in_flight}: requests x output updates; state O(in_flight)"));
  r.add(make("disaggregated", "xPyD: prefill workers, KV migration, decode workers",
             "FCFS prefill batches; decode pulls when its KV blocks fit, migrates bytes/link + latency, batches continuously",
             SimulateFn([](const SimSetup& s, const Placement& p, const SimOptions& o) { return run_kind(s, p, o, false); }),
             sim_cost, "shape {requests, output, in_flight}: requests x output updates; state O(in_flight)"));
  r.add(make("goodput", "goodput by bisection (DistServe Sec. 2)",
             "highest rate with >= 90% of requests meeting TTFT and TPOT, doubling then bisection to precision",
             GoodputFn([](const SimSetup& s, const Placement& p) { return goodput(s, p); }),
             [](const Shape& s) { return Cost{static_cast<double>(s.empty() ? 1 : s[0]), 0, 0, 0}; },
             "shape {probes}: probes simulations of the workload"));
}

}  // namespace ladder
