// ref/src/04-moe/deepgemm_in.hpp -- (private to deepgemm.cpp and deepgemm_fp8.cpp) a DeepGEMM layout's tensors as
// read and validated, and the contract builder the layouts share (ladder/04-moe/deepgemm.hpp).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::moe::detail {

// Rows [R, k] of A (R = m_sum, or num_groups max_m for masked), the expert of each row (-1: none, a padding row
// or a row past masked_m), b [G, n, k].
struct GroupedIn {
  bool masked = false;
  int64_t R = 0, G = 0, n = 0, k = 0, max_m = 0;
  Array<float> a, b;
  std::vector<int64_t> expert;  // [R]
  bool padding_unjudged = false;
};
GroupedIn read(const std::string& who, bool masked, const Tensors& t, const nlohmann::json& params);

// The layout's contract (deepgemm.cpp); fp8: the FP8 layouts, their scales and bound added by add_fp8
// (deepgemm_fp8.cpp).
Contract grouped_contract(bool masked, bool fp8);
void add_fp8(Contract& c, bool masked);

}  // namespace ladder::moe::detail
