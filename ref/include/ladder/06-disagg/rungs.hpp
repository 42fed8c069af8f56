// ladder/06-disagg/rungs.hpp -- stage 06: what the registry stores for each rung (ref/src/06-disagg/registry.cpp).
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration
//
//   step models (ids distserve, roofline, table):  StepModelFn  inputs -> a StepModel
//   simulators  (ids colocated, disaggregated):    SimulateFn   setup, placement, options -> SimResult
//   goodput     (id goodput):                      GoodputFn    setup, placement -> GoodputResult
// The colocated and disaggregated rungs run the same event loop; each checks that the placement is
// of its kind, so a test that runs "disaggregated" cannot silently run a colocated worker.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "ladder/06-disagg/config.hpp"

namespace ladder::disagg {

struct StepModelInputs {
  ModelSpec model;
  GpuSpec gpu;
  int64_t gpus = 1;
  DistServeCoefficients distserve;
  std::string table_csv;
};

using StepModelFn = std::function<std::shared_ptr<const StepModel>(const StepModelInputs&)>;
using SimulateFn = std::function<SimResult(const SimSetup&, const Placement&, const SimOptions&)>;
using GoodputFn = std::function<GoodputResult(const SimSetup&, const Placement&)>;

// Attainment of the setup's workload at `rate` on one placement (the goodput rung's probe).
inline double attainment_at(const SimSetup& s, const Placement& p, double rate) {
  Workload w = s.workload;
  w.rate = rate;
  return simulate(*s.model, p.cluster, w, s.slo).summary.attainment();
}

inline GoodputResult goodput(const SimSetup& s, const Placement& p) {
  return find_goodput([&](double r) { return attainment_at(s, p, r); }, p.cluster.gpus(), s.search);
}

}  // namespace ladder::disagg
