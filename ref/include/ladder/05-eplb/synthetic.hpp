// ladder/05-eplb/synthetic.hpp -- stage 05: seeded synthetic expert loads for goldens and reproduce.
//
//   01 softmax     naive -> safe -> online
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM            (DeepSeek-V2 shapes; decode step)
//   04 moe         gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)
// > 05 eplb        balanced packing -> replicate -> hierarchical | global     <- this file: test loads
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Real expert loads are skewed: a few experts receive many tokens, most receive few (the reason EPLB
// exists). A Zipf law is the usual stand-in: the expert of popularity rank r (0-based) receives a
// share proportional to 1 / (r + 1)^s. Every draw uses ladder::Rng only, so the loads are the same on
// every platform (std:: distributions are implementation-defined).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "ladder/core/rng.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/05-eplb/algorithm.hpp"

namespace ladder::eplb {

// Zipf-skewed token counts [L, n]. Per layer: a random popularity order of the experts (Fisher-Yates
// with Rng::uniform_int), then num_draws routed (token, expert) slots, each drawing a rank r with
// P(r) = (r + 1)^-s / H by inverting the cumulative distribution with one Rng::uniform() (binary
// search). Draws are independent, so one token may pick the same expert twice: a load model, not a
// router. With s = 1 the CDF uses only +, / (pow(x, 1) == x), so the counts are bit-reproducible.
inline Mat<double> zipf_loads(Rng& rng, Index num_layers, Index n, Index num_draws, double s) {
  require(num_layers >= 1, "eplb: zipf_loads: num_layers = {} violates num_layers >= 1", num_layers);
  require(n >= 1, "eplb: zipf_loads: n = {} violates n >= 1", n);
  require(num_draws >= 0, "eplb: zipf_loads: num_draws = {} violates num_draws >= 0", num_draws);
  require(std::isfinite(s) && s >= 0, "eplb: zipf_loads: s = {} violates s finite and >= 0", s);
  std::vector<double> cdf(static_cast<size_t>(n));
  double total = 0;
  for (Index r = 0; r < n; ++r) {
    total += 1.0 / math::pow(static_cast<double>(r + 1), s);
    cdf[static_cast<size_t>(r)] = total;
  }
  Mat<double> loads = Mat<double>::Zero(num_layers, n);
  std::vector<Index> expert_of_rank(static_cast<size_t>(n));
  for (Index l = 0; l < num_layers; ++l) {
    for (Index r = 0; r < n; ++r) expert_of_rank[static_cast<size_t>(r)] = r;
    for (Index i = n - 1; i > 0; --i)
      std::swap(expert_of_rank[static_cast<size_t>(i)],
                expert_of_rank[static_cast<size_t>(rng.uniform_int(static_cast<uint64_t>(i + 1)))]);
    for (Index d = 0; d < num_draws; ++d) {
      const double u = rng.uniform() * total;  // in [0, total)
      const auto it = std::upper_bound(cdf.begin(), cdf.end(), u);
      const Index r = std::min<Index>(it - cdf.begin(), n - 1);
      loads(l, expert_of_rank[static_cast<size_t>(r)]) += 1;
    }
  }
  return loads;
}

}  // namespace ladder::eplb
