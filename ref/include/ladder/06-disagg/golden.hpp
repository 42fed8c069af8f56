// ladder/06-disagg/golden.hpp -- stage 06: the golden cases' setups, grids and identities
// (ref/src/06-disagg/cases.cpp), shared by the golden writer, the tests and `ladder reproduce`.
#pragma once
#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ladder/core/registry.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/06-disagg/rungs.hpp"

namespace ladder {
void register_disagg(Registry& r);  // ref/src/06-disagg/registry.cpp
}

namespace ladder::disagg {

inline const std::vector<std::string> kRecordColumns = {
    "id",         "input",        "output", "arrival_ms",     "prefill_start_ms", "first_token_ms", "pulled_ms",
    "decode_start_ms", "finish_ms", "prefill_worker", "decode_worker", "ttft_ms", "tpot_ms"};

// Step-model grids: prefill batches of awkward lengths, decode (B, sum ctx) pairs.
std::vector<BatchStats> prefill_grid();
std::vector<BatchStats> decode_grid();
// The step models of the step_models case, each built through its registry rung: name -> model.
std::vector<std::pair<std::string, std::shared_ptr<const StepModel>>> golden_step_models(const Registry& reg);
// The simulator cases' setups (model: DistServe's OPT-13B fit unless the case says roofline).
SimSetup golden_setup(const std::string& name);
std::vector<std::string> golden_case_rungs(const std::string& name);
uint64_t golden_case_seed(const std::string& name);
std::string golden_case_description(const std::string& name);
nlohmann::json golden_case_setup_json(const std::string& name);
// Every output of a case, computed through the registry.
std::map<std::string, Array<double>> golden_outputs(const std::string& name);

// One reproduce figure: our value, the paper's printed value, and what the agreement shows (label):
//   derived      computed from inputs a source states (not from the figure itself) -- a real check;
//   consistency  the source's own stated numbers checked against each other by its own identity;
//   restated     the figure enters our computation (a value back-solved from it, or the source's printed
//                formula redone): agreement by construction, no check; never called reproduced.
// A fitted constant is named in `how` as fitted, with what it was fitted to.
struct Identity {
  std::string name;
  double ours = 0;
  double paper = 0;  // as printed (rounded); tests compare within half its last digit
  double paper_ulp = 0;  // allowed |ours - paper|: the printed rounding (the Huawei report truncates: 765.5 -> 765)
  std::string unit, how;
  std::string label;   // derived | consistency | restated
  std::string source;  // the document and section the printed value (and the inputs) come from
};
inline const char* const kFigureLabels[] = {"derived", "consistency", "restated"};
std::vector<Identity> identities();

}  // namespace ladder::disagg
