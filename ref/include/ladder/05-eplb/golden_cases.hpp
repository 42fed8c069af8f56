// ladder/05-eplb/golden_cases.hpp -- stage 05-eplb's golden cases: their names and the writer of one case
// folder (defined in ref/src/05-eplb/golden.cpp; the stage record ref/src/05-eplb/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::eplb {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir);
}  // namespace ladder::eplb
