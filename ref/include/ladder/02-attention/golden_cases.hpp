// ladder/02-attention/golden_cases.hpp -- stage 02-attention's golden cases: their names and the writer of one case
// folder (defined in ref/src/02-attention/golden.cpp; the stage record ref/src/02-attention/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::attention {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::attention
