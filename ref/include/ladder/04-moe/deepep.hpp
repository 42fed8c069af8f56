// ladder/04-moe/deepep.hpp -- stage 04's expert parallelism in DeepEP's dispatch / combine interface: the layouts
// "04-moe/deepep_normal" and "04-moe/deepep_low_latency", case contracts (core/contract.hpp) that `ladder check`
// and Python's ladder.deepep_check read. Defined in ref/src/04-moe/deepep.cpp (contracts, oracle) and
// deepep_match.cpp (the order-insensitive matching, the candidate computed another way).
//
// The facts, from DeepEP's deep_ep/buffer.py docstrings and tests/test_intranode.py, test_low_latency.py:
//   * get_dispatch_layout(topk_idx [num_tokens, num_topk], -1 = no selection, num_experts) returns
//     num_tokens_per_rank [num_ranks], num_tokens_per_rdma_rank (None intranode), num_tokens_per_expert
//     [num_experts] and is_token_in_rank [num_tokens, num_ranks] bool (whether a token is sent to a rank).
//   * dispatch returns recv_x (one row per received token), recv_topk_idx, recv_topk_weights,
//     num_recv_tokens_per_expert_list [num_local_experts] and a handle (rank_prefix_matrix, ..., recv_src_idx, ...).
//     The tests require every recv_topk_idx to be -1 or in [0, num_local_experts) (local indices) and count(i) of
//     them to equal num_recv_tokens_per_expert_list[i] (expert_alignment 1); the received rows from source rank i
//     lie in rank_prefix_matrix's segment i (check_data). Order of tokens within a segment: not stated.
//   * combine "reduce[s] tokens (addition **without** weights) from different ranks" back to the source token.
//   * low_latency_dispatch returns recv_x [num_local_experts, num_max_dispatch_tokens_per_rank * num_ranks, hidden]
//     E4M3 with use_fp8 plus scales [..., hidden // 128] float ("column-major for TMA"), "not all tokens are
//     valid"; recv_count [num_local_experts] int; a handle (src_info, layout_range, ...). Slot order: not stated.
//   * low_latency_combine reduces "**with weights**": out[t] = sum_j topk_weights[t, j] y[expert j](t).
//
// ladder's form of the layouts (one process holds every rank; index 0 of each array is the rank):
//   inputs   x <f4 [num_ranks, num_tokens, hidden], topk_idx <i4|<i8 [num_ranks, num_tokens, num_topk] (-1 allowed,
//            no expert twice in a row), topk_weights <f4 (same shape), expert_scale <f4 [num_experts]: the stand-in
//            expert y_e(x) = expert_scale[e] x that the combine's input is made of; rank r holds experts
//            [r L, (r + 1) L), L = num_experts / num_ranks (DeepEP's and stage 04's ep_sharded split).
//   normal   num_tokens_per_rank [R, R], is_token_in_rank [R, T, R] (0/1 as integers), num_tokens_per_expert
//            [R, E] (row = the sending rank), num_recv_tokens [R], num_recv_tokens_per_expert [R, L]; the receive
//            buffers padded to R T rows: recv_src [R, R T] (source rank * T + token, -1 past num_recv_tokens: the
//            handle's rank_prefix_matrix and recv_src_idx in one number), recv_x [R, R T, H], recv_topk_idx
//            [R, R T, K] (local, -1 elsewhere), recv_topk_weights; combined_x <f8 [R, T, H]: the unweighted sum
//            over ranks of y_r = sum_{j local to r} w_j y_e(x) (the expert computation applies the weights).
//   low lat. recv_count [R, L]; recv_src [R, L, R M] (M = num_max_dispatch_tokens_per_rank), recv_x
//            [R, L, R M, H] (E4M3 values as float32), recv_x_scales [R, L, R M, H / 128] (row-major here),
//            combined_x [R, T, H] = sum_j w_j expert_scale[e_j] dequant(x) (the FP8 values the experts got).
// What is judged: integer outputs exactly; received rows order-insensitively within a destination rank (normal)
// or a (rank, local expert) (low latency): each candidate row is matched to the oracle's row with the same
// recv_src (the candidate's recv_src.npy beside it), then exactly; rows past the count and weights of entries
// whose recv_topk_idx is -1 not judged; recv_src past the count must be -1. The FP8 values and scales are stage
// 07's 1 x 128 quantiser (scale amax / 448, core/quant.hpp), exactly. combined_x by the tolerance rule per token.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::moe {

inline constexpr const char* kDeepEpNormal = "04-moe/deepep_normal";
inline constexpr const char* kDeepEpLowLatency = "04-moe/deepep_low_latency";

// A synthetic case: each rank's tokens routed by a random top-k (a few -1 entries, a token with none).
struct DeepEpSpec {
  int64_t num_ranks = 4, num_tokens = 12, hidden = 256, num_experts = 16, num_topk = 4;
  int64_t num_max_dispatch_tokens_per_rank = 0;  // low latency: 0 = num_tokens + 3
  uint64_t seed = 4141;
};
Tensors deepep_inputs(const DeepEpSpec& spec);
nlohmann::json deepep_params(const DeepEpSpec& spec, bool low_latency);

// The candidate computed another way (deepep_match.cpp): every rank's sends simulated rank by rank as an
// all-to-all does (the sender's loop, as ladder-ep-moe's), the received rows in ANOTHER order (source rank
// descending, token descending: any order is right where DeepEP leaves it unspecified), the combine at float32
// summed rank by rank. layout: kDeepEpNormal | kDeepEpLowLatency; every output of the contract.
Tensors deepep_run(const std::string& layout, const Tensors& inputs, const nlohmann::json& params);

}  // namespace ladder::moe

namespace ladder::stage_records {
Contract contract_04_moe_deepep_normal();
Contract contract_04_moe_deepep_low_latency();
}  // namespace ladder::stage_records

namespace ladder::moe {

// Every output of the layout judged (check(), the candidate's other outputs as companions, so the receive buffers
// are matched by its recv_src): the reports in the contract's order. A candidate missing an output: Error naming it.
std::vector<CheckReport> deepep_check(const std::string& layout, const Tensors& inputs, const nlohmann::json& params,
                                      const Tensors& expected, const Tensors& candidate);

// The DeepEP part of the mutation catalogue (deepep_mutants.cpp): candidates a port with a real bug class writes
// (mutant = true: some output must fail), beside correct variants (receive orders DeepEP leaves open, NaN in the
// unspecified padding rows), each a whole set of outputs built from deepep_run's.
struct DeepEpVariant {
  std::string name, source;
  bool mutant = true;
  Tensors candidate;
};
std::vector<DeepEpVariant> deepep_variants(const std::string& layout, const Tensors& inputs,
                                           const nlohmann::json& params);

}  // namespace ladder::moe
