// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/06-disagg/goodput.hpp -- stage 06: SLO attainment vs rate, and goodput by bisection.
//
//   06 disagg   step-time model -> [event simulator] -> KV-cache migration
//
// DistServe (OSDI'24) Sec. 2: goodput = the highest request rate at which at least `target` (90 %) of
// requests meet both the TTFT and the TPOT SLO; per-GPU goodput divides by the placement's GPUs.
// Attainment is measured by the simulator on the workload at `rate` (same seed at every rate, so the
// same requests at scaled times). The search doubles `hi` from `start` until attainment < target, then
// bisects [lo, hi] until hi - lo <= precision; the answer is lo, a rate that was measured to meet the
// target. Attainment at a fixed seed need not be monotone in the rate; the bisection finds one
// crossing, and the report prints the curve beside it.
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::disagg {

struct GoodputSearch {
  double target = 0.9;        // attainment
  double precision = 0.01;    // requests per second (absolute, on the total rate)
  double start = 1.0;         // first upper probe
  double max_rate = 1e6;      // give up (an error) above this
};

struct GoodputResult {
  double rate = 0;           // highest rate measured to meet the target (requests / s)
  double per_gpu = 0;        // rate / gpus
  double attainment = 0;     // at `rate`
  double upper = 0;          // lowest rate measured to miss it
  int64_t probes = 0;        // simulations run
};

// attainment(rate) -> fraction of requests meeting both SLOs.
LADDER_LAB_ENTRY inline GoodputResult find_goodput(const std::function<double(double)>& attainment, int64_t gpus,
                                  const GoodputSearch& s = {}) {
  require(s.target > 0 && s.target <= 1, "goodput: target = {} violates 0 < target <= 1", s.target);
  require(s.precision > 0, "goodput: precision = {} violates > 0", s.precision);
  require(s.start > 0 && s.max_rate > s.start, "goodput: start = {} and max_rate = {} violate 0 < start < max_rate",
          s.start, s.max_rate);
  require(gpus >= 1, "goodput: gpus = {} violates >= 1", gpus);
  GoodputResult r;
  static_cast<void>(attainment);
  // TODO(lab: goodput_bisection): double hi until attainment(hi) < target, bisect to precision; fill r
  r.per_gpu = r.rate / static_cast<double>(gpus);
  return r;
}

}  // namespace ladder::disagg
