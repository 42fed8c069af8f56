// ladder/06-disagg/golden_cases.hpp -- stage 06-disagg's golden cases: their names and the writer of one case
// folder (defined in ref/src/06-disagg/golden.cpp; the stage record ref/src/06-disagg/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::disagg {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::disagg
