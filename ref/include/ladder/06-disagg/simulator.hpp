// ladder/06-disagg/simulator.hpp -- stage 06, rung 2: the deterministic event simulator.
//
//   06 disagg   step-time model -> [event simulator] -> KV-cache migration
//
// Workers (the lecture notes Sec. 1-2; DistServe Sec. 2-4, simdistserve):
//   prefill    FCFS; a batch takes queued requests while their new tokens fit the token budget (a
//              longer request runs alone); all of a batch's first tokens appear when it ends (TTFT).
//   decode     continuous batching: each step feeds one token of every running request. Decode
//              workers PULL waiting requests (FCFS, also mid-step) while their KV blocks hold the whole
//              input + output (reserved at admission, so capacity is never exceeded) and the batch cap
//              allows; the head of the queue goes to the least-loaded worker that can admit it (fewest
//              requests held, running + pulled; ties to fewer KV blocks reserved, then the lowest
//              index). A pulled request's KV cache migrates (kv_transfer_ms); it joins the batch at
//              the worker's next step boundary (decode_start), never the step in progress.
//   colocated  both phases on one worker, prefill first, no chunking (DistServe's baseline, vLLM's
//              default then): a prefill batch stalls every running decode.
//   chunked    a colocated worker with chunked_prefill_tokens = T > 0 (Sarathi-Serve: Agrawal et al.,
//              "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI'24):
//              every step has a budget of T tokens; the decode token of every running request goes first,
//              the rest of the budget takes prefill chunks FCFS (the request in progress first). A
//              request's first token appears when the step holding its last chunk ends. Pricing
//              (simulator_impl.hpp, hybrid_ms): a chunk of c tokens after p done counts c new tokens
//              and (p + c)^2 - p^2 attention "squares", so the chunks of one prompt sum to its whole
//              prefill; a hybrid step reads the weights once: the decode step plus the chunks' cost
//              above an empty prefill batch (the fixed per-step part is paid once).
// Placements: xPyD = x prefill + y decode workers, or n colocated workers; idle prefill and colocated
// workers take queued requests in index order. Time is simulated milliseconds in double; every event is ordered by (time, sequence
// number), nothing reads a clock or iterates an unordered container, so a seed gives the same bytes
// on every machine. Memory is O(in-flight requests): slots are recycled; records are kept only on
// request (options.keep_requests).
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "ladder/06-disagg/decode_step.hpp"
#include "ladder/06-disagg/step_model.hpp"
#include "ladder/06-disagg/workload.hpp"

namespace ladder::disagg {

struct Cluster {
  int64_t prefill = 0, decode = 0, colocated = 0;  // workers of each kind (xPyD, or colocated only)
  int64_t gpus_per_worker = 1;                      // for per-GPU goodput
  int64_t prefill_token_budget = 8192;              // new tokens per prefill batch
  int64_t decode_max_batch = 256;                   // running + migrating requests per decode worker
  int64_t kv_capacity_tokens = 1 << 20;             // KV cache per decode (or colocated) worker
  int64_t block_tokens = 16;                        // paged KV: a request holds ceil((in + out) / block) blocks
  double kv_bytes_per_token = 0;                    // from the model (MHA/GQA/MLA)
  double link_GBps = 0;                             // 0 = instantaneous migration (DistServe's simulator)
  double link_latency_ms = 0;
  int64_t chunked_prefill_tokens = 0;               // colocated only: token budget per step; 0 = no chunking
  int64_t gpus() const { return (prefill + decode + colocated) * gpus_per_worker; }
  int64_t capacity_blocks() const { return kv_capacity_tokens / block_tokens; }
  int64_t blocks_for(int64_t tokens) const { return (tokens + block_tokens - 1) / block_tokens; }
  double kv_transfer_ms(int64_t input_tokens) const {
    const double bytes = kv_bytes_per_token * static_cast<double>(input_tokens);
    return (link_GBps > 0 ? bytes / (link_GBps * 1e6) : 0.0) + link_latency_ms;
  }
};

inline void check_cluster(const Cluster& c, const Workload& w) {
  require(c.prefill >= 0 && c.decode >= 0 && c.colocated >= 0, "placement: worker counts ({}P, {}D, {} colocated) violate >= 0",
          c.prefill, c.decode, c.colocated);
  if (c.colocated > 0)
    require(c.prefill == 0 && c.decode == 0, "placement: colocated = {} cannot be mixed with prefill/decode workers", c.colocated);
  else {
    require(c.prefill >= 1, "placement: prefill = {} violates prefill >= 1 (or use colocated)", c.prefill);
    require(c.decode >= 1, "placement: decode = {} violates decode >= 1 (no worker would ever decode)", c.decode);
  }
  require(c.gpus_per_worker >= 1, "placement: gpus_per_worker = {} violates >= 1", c.gpus_per_worker);
  require(c.prefill_token_budget >= 1, "workers: prefill_token_budget = {} violates >= 1", c.prefill_token_budget);
  require(c.decode_max_batch >= 1, "workers: decode_max_batch = {} violates >= 1", c.decode_max_batch);
  require(c.block_tokens >= 1, "workers: block_tokens = {} violates >= 1", c.block_tokens);
  require(c.kv_bytes_per_token >= 0, "kv_transfer: kv_bytes_per_token = {} violates >= 0", c.kv_bytes_per_token);
  require(c.link_GBps >= 0, "kv_transfer: link_GBps = {} violates >= 0", c.link_GBps);
  require(c.link_latency_ms >= 0, "kv_transfer: latency_ms = {} violates >= 0", c.link_latency_ms);
  require(c.chunked_prefill_tokens >= 0, "workers: chunked_prefill_tokens = {} violates >= 1 (0 or absent: no chunking)",
          c.chunked_prefill_tokens);
  require(c.chunked_prefill_tokens == 0 || c.colocated > 0,
          "placement: chunked_prefill_tokens = {} applies to colocated workers only ({}P{}D has none)",
          c.chunked_prefill_tokens, c.prefill, c.decode);
  const int64_t longest = max_request_tokens(w);
  require(c.blocks_for(longest) <= c.capacity_blocks(),
          "workers: kv_capacity_tokens = {} ({} blocks of {}) cannot hold the longest request, {} tokens",
          c.kv_capacity_tokens, c.capacity_blocks(), c.block_tokens, longest);
}

struct Slo {
  double ttft_ms = 1e300, tpot_ms = 1e300;
};

// Test-only planted bugs: the invariant checks (tests/06-disagg/test_disagg*.cpp) must catch each.
struct Faults {
  bool drop_kv_transfer = false;     // decode starts as soon as the request is pulled
  bool admit_past_capacity = false;  // decode admission ignores the KV block limit
  bool first_token_early = false;    // chunked prefill: the first token appears after the FIRST chunk
};

struct SimOptions {
  bool keep_requests = false;
  Faults faults;
  bool queue_every_step = false;  // test-only: no fast path, every decode step through the event queue
};

struct RequestRecord {
  int64_t id = 0, input = 0, output = 0;
  int64_t prefill_worker = -1, decode_worker = -1;
  double arrival = 0, prefill_start = 0, first_token = 0, pulled = 0, decode_start = 0, finish = 0;  // ms
  // decode_start: the step boundary at which the request joined a decode batch (>= pulled + migration)
  int64_t prefilled = 0, chunks = 0;  // prompt tokens processed when the first token appeared; in how many steps
  double ttft() const { return first_token - arrival; }
  double tpot() const { return output > 1 ? (finish - first_token) / static_cast<double>(output - 1) : 0.0; }
};

struct Summary {
  int64_t requests = 0, met_ttft = 0, met_tpot = 0, met_both = 0;
  double sum_ttft = 0, sum_tpot = 0, sum_e2e = 0, max_ttft = 0, max_tpot = 0;  // ms
  double end_ms = 0;                         // last finish
  int64_t prefill_batches = 0, decode_steps = 0;
  int64_t max_in_flight = 0;                 // requests arrived and not finished, at once
  int64_t max_blocks_used = 0, capacity_blocks = 0;  // over decode (colocated) workers
  double attainment() const { return requests ? static_cast<double>(met_both) / static_cast<double>(requests) : 0; }
  double mean_ttft() const { return requests ? sum_ttft / static_cast<double>(requests) : 0; }
  double mean_tpot() const { return requests ? sum_tpot / static_cast<double>(requests) : 0; }
};

struct SimResult {
  Summary summary;
  std::vector<RequestRecord> records;  // by id, when keep_requests
  int64_t queued_events = 0;           // events popped from the queue (steps run on the fast path are not)
};

inline SimResult simulate(const StepModel& model, const Cluster& cluster, const Workload& workload, const Slo& slo,
                   const SimOptions& options = {});

}  // namespace ladder::disagg

#include "ladder/06-disagg/simulator_impl.hpp"
