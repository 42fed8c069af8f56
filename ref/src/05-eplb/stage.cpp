// ref/src/05-eplb/stage.cpp -- stage 05's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"
#include "ladder/05-eplb/golden_cases.hpp"

namespace ladder {
void register_eplb(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::stage_records {

Contract contract_05_eplb();  // contract.cpp

Stage stage_05_eplb() {
  Stage s;
  s.id = "05-eplb";
  s.title = "balanced packing -> replicate -> hierarchical | global";
  s.contract = &contract_05_eplb;
  s.ref_rungs = &register_eplb;
  s.golden_cases = &eplb::golden_case_names;
  // every case is written whole (no sampled arrays)
  s.write_golden_case = [](const std::string& n, const std::filesystem::path& d, bool) { eplb::write_golden_case(n, d); };
  s.cuda_rungs = false;  // its CUDA kernels are the data plane (cuda/src/05-eplb), not rungs
  s.bench = false;
  return s;
}

}  // namespace ladder::stage_records
