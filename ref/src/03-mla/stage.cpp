// ref/src/03-mla/stage.cpp -- stage 03's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/03-mla/golden_cases.hpp"

namespace ladder {
void register_mla(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_03_mla();  // contract.cpp
Contract contract_03_mla_flashmla();  // flashmla.cpp: FlashMLA's interface (ladder/03-mla/flashmla.hpp)
Contract contract_03_mla_flashmla_sparse_prefill();  // flashmla_sparse.cpp: its sparse prefill

Stage stage_03_mla() {
  Stage s;
  s.id = "03-mla";
  s.title = "CD -> CC -> A_CC -> A_CC_ME -> AM (DeepSeek-V2 shapes; decode step)";
  s.contract = &contract_03_mla;
  s.layouts = {&contract_03_mla_flashmla, &contract_03_mla_flashmla_sparse_prefill};
  s.ref_rungs = &register_mla;
  s.golden_cases = &mla::golden_case_names;
  s.write_golden_case = &mla::write_golden_case;
  s.cuda_rungs = true;
  s.bench = true;
  return s;
}

}  // namespace ladder::stage_records
