// ref/src/golden.cpp -- the stages with golden cases (case.json I/O: ref/src/golden_io.cpp).
#include "ladder/core/golden.hpp"

#include "ladder/core/error.hpp"
#include "ladder/core/stage.hpp"

namespace ladder {

// Every stage's golden cases, as its Stage record declares them (ladder/core/stage.hpp).
const std::vector<GoldenStage>& golden_stages() {
  static const std::vector<GoldenStage> list = [] {
    std::vector<GoldenStage> l;
    for (const Stage& s : stages())
      if (s.golden_cases) l.push_back({s.id, s.golden_cases, s.write_golden_case});
    return l;
  }();
  return list;
}

const GoldenStage& golden_stage(const std::string& stage) {
  std::string known;
  for (const auto& s : golden_stages()) {
    if (s.stage == stage) return s;
    known += (known.empty() ? "" : ", ") + s.stage;
  }
  throw Error("stage '" + stage + "' has no golden cases (stages with goldens: " + known + ")");
}

}  // namespace ladder
