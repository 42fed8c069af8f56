// ladder/04-moe/golden_cases.hpp -- stage 04-moe's golden cases: their names and the writer of one case
// folder (defined in ref/src/04-moe/golden.cpp; the stage record ref/src/04-moe/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::moe {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::moe
