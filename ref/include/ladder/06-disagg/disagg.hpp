// ladder/06-disagg/disagg.hpp -- stage 06: prefill/decode disaggregation.
//
//   01 softmax -> 02 attention -> 03 mla -> 04 moe -> 05 eplb -> [06 disagg]
//   06 disagg   step-time model -> event simulator -> KV-cache migration
//
// step_model.hpp  the interface; DistServe's fitted form; a user's measured table
// roofline.hpp    a roofline model from the stages' Cost on data/models x data/gpus
// workload.hpp    seeded Poisson / gamma(cv) arrivals; fixed, uniform or trace lengths
// simulator.hpp   prefill, decode (continuous batching) and colocated workers; xPyD; KV migration
// goodput.hpp     SLO attainment and goodput by bisection
// analytic.hpp    M/D/1 and the deployment identities
// config.hpp      `ladder simulate` configs (JSON) and data/ loaders
#pragma once
#include "ladder/06-disagg/analytic.hpp"
#include "ladder/06-disagg/config.hpp"
#include "ladder/06-disagg/goodput.hpp"
#include "ladder/06-disagg/roofline.hpp"
#include "ladder/06-disagg/simulator.hpp"
#include "ladder/06-disagg/step_model.hpp"
#include "ladder/06-disagg/workload.hpp"
