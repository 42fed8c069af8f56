// ref/src/07-precision/stage.cpp -- stage 07's one declaration (ladder/core/stage.hpp).
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/core/stage.hpp"

namespace ladder {
void register_precision(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_07_precision();  // contract.cpp

Stage stage_07_precision() {
  Stage s;
  s.id = "07-precision";
  s.title = "A8W8 int8 GEMM -> FP8 block-scaled GEMM (limited accumulator, promotion every N_C) -> MoE experts A8W8 / "
            "A8W4 -> MLA decode over an int8 / FP8 KV cache -> bf16 tiled attention -> bf16 GEMM";
  s.contract = &contract_07_precision;
  s.ref_rungs = &register_precision;
  s.golden_cases = &precision::golden_case_names;
  s.write_golden_case = &precision::write_golden_case;
  s.cuda_rungs = true;  // cuda/src/07-precision: the A8W8 GEMM through __dp4a
  s.lab = true;  // chapters/07-precision/lab: E4M3 rounding and the block-scaled dot
  s.bench = true;  // bench/07-precision: the int8 / bf16 CPU GEMMs beside oneDNN
  return s;
}

}  // namespace ladder::stage_records
