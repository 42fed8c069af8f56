// ref/src/02-attention/stage.cpp -- stage 02's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/02-attention/golden_cases.hpp"

namespace ladder {
void register_attention(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_02_attention();  // contract.cpp

Stage stage_02_attention() {
  Stage s;
  s.id = "02-attention";
  s.title = "naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward (recompute)";
  s.contract = &contract_02_attention;
  s.ref_rungs = &register_attention;
  s.golden_cases = &attention::golden_case_names;
  s.write_golden_case = &attention::write_golden_case;
  s.cuda_rungs = true;
  s.bench = true;
  return s;
}

}  // namespace ladder::stage_records
