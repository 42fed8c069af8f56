// ladder/06-disagg/invariants.hpp -- stage 06: what every simulation must satisfy, checked from its records.
//
// Used by the tests (and by the planted-bug tests, which must see these fire) and by `ladder simulate
// --check`. Each violation is one line naming the request and the broken inequality.
#pragma once
#include <string>
#include <vector>

#include "ladder/06-disagg/simulator.hpp"

namespace ladder::disagg {

inline std::vector<std::string> check_invariants(const StepModel& model, const Cluster& c, const Workload& w,
                                                 const SimResult& r) {
  std::vector<std::string> bad;
  auto fail = [&](std::string s) {
    if (bad.size() < 20) bad.push_back(std::move(s));
  };
  const Summary& S = r.summary;
  if (S.requests != w.requests) fail(fmt::format("conservation: {} requests finished of {} arrived", S.requests, w.requests));
  if (S.max_blocks_used > S.capacity_blocks)
    fail(fmt::format("KV capacity: {} blocks in use on one worker > capacity {}", S.max_blocks_used, S.capacity_blocks));
  if (!r.records.empty() && static_cast<int64_t>(r.records.size()) != w.requests)
    fail(fmt::format("conservation: {} records for {} requests", r.records.size(), w.requests));
  const bool disagg = c.colocated == 0;
  for (size_t i = 0; i < r.records.size(); ++i) {
    const RequestRecord& q = r.records[i];
    if (q.id != static_cast<int64_t>(i)) fail(fmt::format("conservation: record {} has id {}", i, q.id));
    if (!(q.arrival <= q.prefill_start && q.prefill_start < q.first_token && q.first_token <= q.pulled &&
          q.pulled <= q.decode_start && q.decode_start <= q.finish))
      fail(fmt::format("request {}: times out of order (arrival {} prefill {} first token {} pulled {} decode {} finish {})",
                       q.id, q.arrival, q.prefill_start, q.first_token, q.pulled, q.decode_start, q.finish));
    const double alone = model.prefill_ms(BatchStats{1, static_cast<double>(q.input),
                                                     static_cast<double>(q.input) * static_cast<double>(q.input)});
    if (q.ttft() < alone * (1 - 1e-12))
      fail(fmt::format("request {}: TTFT {} ms < its own prefill time {} ms", q.id, q.ttft(), alone));
    // decode_start >= pulled + transfer (the next step boundary after it), rounded once: allow a few ulps.
    const double ulps = 8 * 2.220446049250313e-16 * q.decode_start;
    if (disagg && q.output > 1 && q.decode_start - q.pulled < c.kv_transfer_ms(q.input) - ulps)
      fail(fmt::format("request {}: decode began {} ms after the pull, before its KV migration of {} ms", q.id,
                       q.decode_start - q.pulled, c.kv_transfer_ms(q.input)));
    // Chunked prefill: the first token needs the whole prompt processed, however many steps it took.
    if (q.prefilled != q.input)
      fail(fmt::format("request {}: first token after {} of its {} prompt tokens were prefilled ({} chunks)", q.id,
                       q.prefilled, q.input, q.chunks));
    if (q.output > 1 && q.finish - q.decode_start <= 0)
      fail(fmt::format("request {}: {} output tokens in no decode time", q.id, q.output));
  }
  return bad;
}

}  // namespace ladder::disagg
