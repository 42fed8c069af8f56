// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// ladder/06-disagg/decode_step.hpp -- stage 06: a decode worker's continuous batching (the lab's part).
//
//   06 disagg   step-time model -> [event simulator] -> KV-cache migration
//
// Continuous batching (Orca; vLLM): the batch is re-formed at every step boundary. A step feeds the
// last generated token of every running request, attending to ctx = input + generated tokens, and
// produces one more token per request; a request leaves the batch the moment its last token exists,
// and waiting requests join at the next boundary. KV blocks are reserved for input + output at
// admission, so a running request can never run out of cache mid-generation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>
#include "ladder/core/lab.hpp"  // LADDER_LAB_ENTRY: the functions a lab student writes

namespace ladder::disagg {

struct RunningRequest {
  int64_t slot = 0;                          // the simulator's request slot
  int64_t input = 0, output = 0;             // prompt and output lengths
  int64_t generated = 0;                     // tokens generated so far (the prefill made the first)
  int64_t blocks = 0;                        // KV blocks reserved
};

struct DecodeState {
  std::vector<RunningRequest> running;  // in join order
  int64_t sum_ctx = 0;                  // sum over running of input + generated (the step model's sum_tokens)
  int64_t blocks_used = 0;              // reserved by running and migrating requests
};

// May the worker pull one more request needing `blocks` KV blocks? `migrating` requests are pulled
// but not yet in the batch (in transfer, or arrived and waiting for the next step boundary); they
// count toward the batch cap and already hold their blocks.
LADDER_LAB_ENTRY inline bool can_admit(const DecodeState& s, int64_t migrating, int64_t blocks, int64_t capacity_blocks,
                      int64_t max_batch) {
  bool admit = false;
  static_cast<void>(s), static_cast<void>(migrating), static_cast<void>(blocks), static_cast<void>(capacity_blocks);
  static_cast<void>(max_batch);
  // TODO(lab: decode_admit): admit only while the reserved blocks fit the capacity and the batch cap allows
  return admit;
}

// A request joins the running batch (its KV cache is on this worker now).
inline void join_batch(DecodeState& s, const RunningRequest& r) {
  s.running.push_back(r);
  s.sum_ctx += r.input + r.generated;
}

// The step just ended: every running request has one more token. Requests with all `output` tokens
// leave the batch (in batch order, appended to `finished` by slot), return their blocks and their
// context; the rest keep their order.
LADDER_LAB_ENTRY inline void finish_decode_step(DecodeState& s, std::vector<int64_t>& finished) {
  static_cast<void>(s), static_cast<void>(finished);
  // TODO(lab: decode_step): one token per running request; finished ones leave, returning blocks and context
}

}  // namespace ladder::disagg
