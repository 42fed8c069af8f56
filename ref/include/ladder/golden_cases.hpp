// ladder/golden_cases.hpp -- each stage's golden-case generator (defined in ref/src/<stage>_golden.cpp).
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

namespace ladder::attention {  // ref/src/02-attention/golden.cpp; inputs and oracle: ladder/attention/golden.hpp
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::attention

namespace ladder::mla {  // ref/src/03-mla/golden.cpp; model, inputs, oracle and loaders: ladder/mla/golden.hpp
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::mla

namespace ladder::moe {  // ref/src/04-moe/golden.cpp; cases in memory and loaders: ladder/moe/golden.hpp
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::moe

namespace ladder::eplb {
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir);
}  // namespace ladder::eplb

namespace ladder::disagg {  // ref/src/06-disagg/golden.cpp; setups, grids, identities: ladder/disagg/golden.hpp
std::vector<std::string> golden_case_names();
void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full);
}  // namespace ladder::disagg
