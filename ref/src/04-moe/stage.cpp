// ref/src/04-moe/stage.cpp -- stage 04's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/04-moe/golden_cases.hpp"

namespace ladder {
void register_moe(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_04_moe();  // contract.cpp
Contract contract_04_moe_deepgemm_contiguous();  // deepgemm.cpp: DeepGEMM's layouts (ladder/04-moe/deepgemm.hpp)
Contract contract_04_moe_deepgemm_masked();
Contract contract_04_moe_deepgemm_contiguous_fp8();
Contract contract_04_moe_deepgemm_masked_fp8();
Contract contract_04_moe_deepgemm_k_grouped();  // deepgemm_k_grouped.cpp
Contract contract_04_moe_deepgemm_k_grouped_fp8();  // deepgemm_k_grouped_fp8.cpp
Contract contract_04_moe_deepep_normal();  // deepep.cpp: DeepEP's dispatch / combine (ladder/04-moe/deepep.hpp)
Contract contract_04_moe_deepep_low_latency();

Stage stage_04_moe() {
  Stage s;
  s.id = "04-moe";
  s.title = "gate -> sort -> ragged dot -> unsort + combine (dropless | dropping)";
  s.contract = &contract_04_moe;
  s.layouts = {&contract_04_moe_deepgemm_contiguous, &contract_04_moe_deepgemm_masked,
               &contract_04_moe_deepgemm_contiguous_fp8, &contract_04_moe_deepgemm_masked_fp8,
               &contract_04_moe_deepgemm_k_grouped, &contract_04_moe_deepgemm_k_grouped_fp8,
               &contract_04_moe_deepep_normal, &contract_04_moe_deepep_low_latency};
  s.ref_rungs = &register_moe;
  s.golden_cases = &moe::golden_case_names;
  s.write_golden_case = &moe::write_golden_case;
  s.cuda_rungs = true;
  s.bench = true;
  return s;
}

}  // namespace ladder::stage_records
