// ladder/03-mla/golden_cases.hpp -- stage 03-mla's golden cases: their names and the writer of one case
// folder (defined in ref/src/03-mla/golden.cpp; the stage record ref/src/03-mla/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::mla {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::mla
