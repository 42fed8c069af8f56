// ref/src/contract_layouts.cpp -- the stages' layout contracts (Stage::layouts): a stage in another project's
// interface, named "<stage>/<layout>" (03-mla/flashmla), found by contract() (core/contract.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

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

void add_report_metrics(const Contract& c, const Tensors& expected, const std::string& output, const NpyData& candidate,
                        CheckReport& r) {
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
