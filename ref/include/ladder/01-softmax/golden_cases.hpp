// ladder/01-softmax/golden_cases.hpp -- stage 01-softmax's golden cases: their names and the writer of one case
// folder (defined in ref/src/01-softmax/golden.cpp; the stage record ref/src/01-softmax/stage.cpp points at both).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ladder/core/tensor.hpp"

namespace ladder::softmax {
std::vector<std::string> golden_case_names();
// The case's input as the kernels see it (float32), from the case's fixed seed.
Array<float> golden_case_input(const std::string& name);
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::softmax
