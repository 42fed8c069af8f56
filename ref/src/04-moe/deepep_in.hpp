// ref/src/04-moe/deepep_in.hpp -- (private to deepep.cpp and deepep_match.cpp) a DeepEP layout's inputs as read and
// validated, the received tokens of each segment in the oracle's order, and the pieces the contracts share
// (ladder/04-moe/deepep.hpp says what the layouts are and which facts come from where).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::moe::detail {

struct EpIn {
  bool ll = false;  // low-latency layout
  int64_t R = 0, T = 0, H = 0, K = 0, E = 0, L = 0, M = 0;
  int64_t N = 0;              // rows of a receive segment: R T (normal), R M (low latency)
  Array<float> x, w;          // [R, T, H], [R, T, K]
  std::vector<int64_t> idx;   // [R T K], -1 = no expert
  std::vector<float> scale;   // [E]
  int64_t segments() const { return ll ? R * L : R; }  // normal: destination ranks; low latency: (rank, expert)
  // Whether token g (= source rank * T + token) goes to segment s.
  bool sends(int64_t g, int64_t s) const;
};
EpIn ep_read(const std::string& who, bool ll, const Tensors& t, const nlohmann::json& params);

// Segment s's received tokens (global ids), source rank ascending, token ascending: the oracle's order.
std::vector<std::vector<int64_t>> ep_received(const EpIn& in);
// Token g's FP8 row by stage 07's 1 x 128 quantiser (core/quant.hpp, scale amax / 448): H values, H / 128 scales.
void ep_fp8_row(const EpIn& in, int64_t g, float* values, float* scales);

// The receive buffers (recv_src, recv_x, recv_x_scales, recv_topk_idx, recv_topk_weights) and the rows of each.
bool ep_is_buffer(const std::string& output);
// Contract::canonical of both layouts (deepep_match.cpp).
std::optional<NpyData> ep_canonical(const std::string& who, bool ll, const Tensors& inputs,
                                    const nlohmann::json& params, const Tensors& expected, const std::string& output,
                                    const NpyData& candidate, const Tensors& companions);

}  // namespace ladder::moe::detail
