// ref/src/99-rowsum/stage.cpp -- the template stage's one declaration (ladder/core/stage.hpp).
#include "ladder/core/stage.hpp"

namespace ladder {
void register_rowsum(Registry& r);  // registry.cpp
}  // namespace ladder

namespace ladder::rowsum {  // golden.cpp
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::rowsum

namespace ladder::stage_records {

Contract contract_99_rowsum();  // contract.cpp

Stage stage_99_rowsum() {
  Stage s;
  s.id = "99-rowsum";
  s.title = "sequential -> pairwise (the template stage)";
  s.contract = &contract_99_rowsum;
  s.ref_rungs = &register_rowsum;
  s.golden_cases = &rowsum::golden_case_names;
  s.write_golden_case = &rowsum::write_golden_case;
  s.cuda_rungs = false;
  s.lab = false;
  s.bench = false;
  return s;
}

}  // namespace ladder::stage_records
