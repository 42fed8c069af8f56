// ref/src/04-moe/deepgemm_k_in.hpp -- (private to deepgemm_k_grouped.cpp and deepgemm_k_grouped_fp8.cpp) the k-grouped
// layout's tensors as read and validated (ladder/04-moe/deepgemm.hpp): a [sum(ks), m], b [sum(ks), n], ks, optional c.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::moe::detail {

struct KIn {
  int64_t G = 0, K = 0, m = 0, n = 0;
  std::vector<int64_t> ks, start;  // group g's rows: start[g] .. start[g] + ks[g] - 1
  Array<float> a, b, c;            // c empty: no accumulator
};
// Errors name `who` (the layout) and the input; each ks a multiple of param k_alignment (default 128).
KIn read_k(const std::string& who, const Tensors& t, const nlohmann::json& params);

}  // namespace ladder::moe::detail
