// ladder/07-precision/golden_cases.hpp -- stage 07-precision's golden cases: their names and the writer
// of one case folder (ref/src/07-precision/golden.cpp; the stage record ref/src/07-precision/stage.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::precision {
std::vector<std::string> golden_case_names();
// The case's inputs (x, w) and params, from its fixed seed.
void golden_case(const std::string& name, Tensors& inputs, nlohmann::json& params);
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::precision
