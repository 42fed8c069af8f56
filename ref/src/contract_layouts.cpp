// ref/src/contract_layouts.cpp -- the stages' layout contracts (Stage::layouts): a stage in another project's
// interface, named "<stage>/<layout>" (03-mla/flashmla), found by contract() (core/contract.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "ladder/core/contract.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/stage.hpp"

namespace ladder {
namespace {

// Every layout contract, baselines in a FixedOrder scope as contracts() pins the stages' (contract.cpp).
const std::vector<Contract>& layout_contracts() {
  static const std::vector<Contract> table = [] {
    std::vector<Contract> t;
    for (const Stage& s : stages())
      for (const auto& make : s.layouts) {
        t.push_back(make());
        if (auto& f = t.back().baseline)
          f = [inner = std::move(f)](const Tensors& in, const nlohmann::json& params, DType prec) {
            const FixedOrder pinned;
            return inner(in, params, prec);
          };
      }
    return t;
  }();
  return table;
}

}  // namespace

const Contract& layout_contract(const std::string& id) {
  const size_t slash = id.find('/');
  require(slash != std::string::npos, "'{}' is not a layout name (STAGE/LAYOUT)", id);
  const Stage& s = stage(id.substr(0, slash));  // Error "no stage 'x' (did you mean 'y'? ...)"
  std::vector<std::string> names;
  for (const Contract& c : layout_contracts())
    if (c.stage == id) return c;
    else if (c.stage.rfind(s.id + "/", 0) == 0) names.push_back(c.stage);
  throw Error(fmt::format("no layout '{}' of stage {} (layouts: {})", id, s.id,
                          names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
}

double layout_cos_diff(const Array<double>& x, const Array<double>& y) {
  require(x.data.size() == y.data.size(), "cos_diff: sizes {} and {} differ", x.data.size(), y.data.size());
  double xy = 0, xx_yy = 0;
  for (size_t i = 0; i < x.data.size(); ++i) xy += x.data[i] * y.data[i], xx_yy += x.data[i] * x.data[i] + y.data[i] * y.data[i];
  return 1.0 - 2.0 * xy / std::max(xx_yy, 1e-12);  // FlashMLA's cal_diff guards the denominator so
}

std::pair<NpyData, int64_t> judged_candidate(const Contract& c, const Tensors& inputs, const nlohmann::json& params,
                                             const Tensors& expected, const std::string& output,
                                             const NpyData& candidate) {
  if (!c.unjudged || !expected.count(output)) return {candidate, 0};
  const NpyData& e = expected.at(output);
  if (e.shape != candidate.shape || (candidate.dtype != DType::F4 && candidate.dtype != DType::F8)) return {candidate, 0};
  const std::vector<bool> skip = c.unjudged(inputs, params, output);
  if (skip.empty()) return {candidate, 0};
  const Array<double> o = npy_as_double(e);
  require(skip.size() == o.data.size(), "{}: unjudged mask of output {} has {} elements where the oracle has {}", c.stage,
          output, skip.size(), o.data.size());
  NpyData judged = candidate;
  int64_t n = 0;
  for (size_t i = 0; i < skip.size(); ++i) {
    if (!skip[i]) continue;
    ++n;
    if (candidate.dtype == DType::F4) {
      const float v = static_cast<float>(o.data[i]);
      std::memcpy(&judged.bytes[i * sizeof v], &v, sizeof v);
    } else {
      std::memcpy(&judged.bytes[i * sizeof(double)], &o.data[i], sizeof(double));
    }
  }
  return {std::move(judged), n};
}

void add_report_metrics(const Contract& c, const Tensors& expected, const std::string& output, const NpyData& candidate,
                        CheckReport& r, int64_t not_judged) {
  if (not_judged > 0) {
    r.metrics["not_judged"] = static_cast<double>(not_judged);
    r.text += fmt::format("\n  {} elements not judged (unspecified in this layout; given the oracle's value)", not_judged);
  }
  if (!c.report_metrics) return;
  const Array<double> e = npy_as_double(tensor(expected, output, c.stage + " expected outputs"));
  const Array<double> x = npy_as_double(candidate);
  if (e.shape != x.shape) return;  // check() has refused such a candidate already
  for (const auto& [name, v] : c.report_metrics(output, e, x)) {
    r.metrics[name] = v;
    r.text += fmt::format("\n  {} = {:.3e} (reported beside the verdict, not part of it)", name, v);
  }
}

}  // namespace ladder
