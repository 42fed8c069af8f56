// ref/src/06-disagg/stage.cpp -- stage 06's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/06-disagg/golden_cases.hpp"

namespace ladder {
void register_disagg(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_06_disagg();  // contract.cpp

Stage stage_06_disagg() {
  Stage s;
  s.id = "06-disagg";
  s.title = "step-time model -> event simulator -> KV-cache migration -> deployment (layouts, memory, overlap, MTP)";
  s.contract = &contract_06_disagg;
  s.ref_rungs = &register_disagg;
  s.golden_cases = &disagg::golden_case_names;
  s.write_golden_case = &disagg::write_golden_case;
  s.cuda_rungs = false;
  s.bench = true;
  return s;
}

}  // namespace ladder::stage_records
