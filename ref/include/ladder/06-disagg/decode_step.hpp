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
  // lab:todo(decode_admit) admit only while the reserved blocks fit the capacity and the batch cap allows
  admit = s.blocks_used + blocks <= capacity_blocks && static_cast<int64_t>(s.running.size()) + migrating < max_batch;
  // lab:end
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
  // lab:todo(decode_step) one token per running request; finished ones leave, returning blocks and context
  s.sum_ctx += static_cast<int64_t>(s.running.size());
  size_t keep = 0;
  for (size_t i = 0; i < s.running.size(); ++i) {
    RunningRequest& r = s.running[i];
    ++r.generated;
    if (r.generated >= r.output) {
      s.sum_ctx -= r.input + r.generated;
      s.blocks_used -= r.blocks;
      finished.push_back(r.slot);
    } else {
      if (keep != i) s.running[keep] = r;  // most steps finish no one: nothing moves
      ++keep;
    }
  }
  s.running.resize(keep);
  // lab:end
}

}  // namespace ladder::disagg
