// ref/src/01-softmax/stage.cpp -- stage 01's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/01-softmax/golden_cases.hpp"

namespace ladder {
void register_softmax(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_01_softmax();  // contract.cpp

Stage stage_01_softmax() {
  Stage s;
  s.id = "01-softmax";
  s.title = "naive -> safe -> online";
  s.contract = &contract_01_softmax;
  s.ref_rungs = &register_softmax;
  s.golden_cases = &softmax::golden_case_names;
  s.write_golden_case = &softmax::write_golden_case;
  s.cuda_rungs = true;
  s.bench = true;
  return s;
}

}  // namespace ladder::stage_records
