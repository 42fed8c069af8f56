// ladder/06-disagg/deploy/serving_search.hpp -- stage 06, part 3: a serving deployment (serving.hpp) run in the
// event simulator at a concurrency per card, and the search for the largest concurrency that meets its TPOT limit.
//
//   06 disagg   ... -> deployment -> [SERVING: simulate_serving at c per card, search_serving over c]
//
// One run at c requests per decode card (simulate_serving):
//   memory   the decode layout's per-card memory (memory.hpp) at c requests of input + output tokens (KV reserved
//            for the whole request, as the simulator reserves it); a c that does not fit is not simulated.
//   workload waves x the decode batch cap (c x cards x y) requests of fixed lengths, all queued at t = 0, so each
//            instance runs as fast as the other lets it: the prefill instances batch FCFS up to batch_tokens, the
//            decode instances pull up to c x cards requests each; MTP steps drawn per request (serving.hpp).
//   window   from the first moment every decode slot is taken (pulled) to the last: the batch has filled and not yet drained
//            (a batch that never fills, prefill being too slow, gets the middle half of the run and shows it).
//   TPOT     (finish - pulled) / (output - 1) of the requests decoded wholly inside the window: mean, p90. A request
//            is pulled when a decode slot takes it, so its TPOT holds the KV migration, the wait for the next step
//            boundary and its steps; the wait for a free slot, which the burst creates and a fixed-concurrency
//            client (the report's benchmark) never sees, is left out (it is admission queueing, not decoding).
//   tokens/s decode, by Little's law: the mean batch per decode card in the window over the mean in-batch time per
//            token of the requests decoded wholly inside it (spreading each request's tokens evenly over its life
//            instead counts the fast early steps of the requests that joined during the fill: 1-4 % high);
//            prefill: input tokens per second of busy batch time, per prefill card.
// The search (search_serving): c from 1 to the memory's limit (and search.max_per_card); TPOT grows with the batch,
// so bisection keeps lo meeting the limit and hi not; the result is the largest c that meets it, or the memory (or
// max_per_card) limit when even that meets it. Nothing here is fitted: the step model is the layouts' rooflines.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ladder/06-disagg/deploy/memory.hpp"
#include "ladder/06-disagg/deploy/serving.hpp"
#include "ladder/06-disagg/simulator.hpp"

namespace ladder::deploy {

// Test-only planted bugs: the tests (tests/06-disagg/test_serving.cpp) must catch each.
struct ServingFaults {
  bool ignore_acceptance = false;         // MTP: every step emits one token whatever the acceptance rate
  bool search_returns_violating = false;  // the search returns its first c above the limit instead of the last below
};

struct ServingPoint {
  int64_t per_card = 0;
  bool fits = false;                       // the decode card's memory holds c requests of input + output tokens
  double memory_GB = 0;                    // the fullest decode card
  bool simulated = false;
  int64_t requests = 0, window_requests = 0, waves = 0;  // waves run (more than asked when the window was short)
  double tpot_mean_ms = 0, tpot_p90_ms = 0;
  double decode_tokens_per_card_s = 0;     // in the window, per decode card
  double prefill_tokens_per_card_s = 0;    // per second of busy batch time, per prefill card
  double batch_per_card = 0;               // mean decoding requests per decode card in the window
  double tokens_per_step = 0;              // realised: decoded tokens / request-steps
  double prefill_needed = 0;               // prefill instances that keep up with the full decode batch (xPyD)
  double step_ms = 0;                      // the step model at c per card, context input + output / 2
  bool meets(double limit_ms) const { return fits && simulated && tpot_mean_ms <= limit_ms; }
  bool prefill_bound() const { return simulated && batch_per_card < 0.9 * static_cast<double>(per_card); }
};

namespace serving_detail {
inline Layout decode_at(const Serving& s, int64_t c, int64_t context) {
  Layout L = s.decode.layout;
  L.work.requests_per_card = c, L.work.tokens_per_card = c * (1 + s.mtp_draft);
  L.work.mtp_draft = s.mtp_draft, L.work.acceptance = s.acceptance, L.work.context = context;
  return L;
}
inline double fullest_card_bytes(const Layout& L) {
  double most = 0;
  for (const CardMemory& m : card_memory(L)) most = std::max(most, m.total());
  return most;
}
inline double mean_of(const std::vector<double>& v) {
  double a = 0;
  for (double x : v) a += x;
  return v.empty() ? 0 : a / static_cast<double>(v.size());
}
// The measurement window: from the first moment every decode slot is taken to the last (the batch has filled and
// not yet drained). A slot is taken when the request is pulled (its KV migrates, it joins at the next boundary) and
// freed when it finishes; at one instant the leaving requests go before the pulled ones. A batch that never fills
// (prefill too slow) gets the middle half of [first decode start, last finish] instead, and shows as prefill-bound.
inline std::pair<double, double> full_batch_window(const std::vector<disagg::RequestRecord>& records, int64_t slots) {
  std::vector<std::pair<double, int>> ev;  // (time, -1 leave / +1 join): leaves sort first at equal times
  for (const disagg::RequestRecord& q : records) ev.push_back({q.pulled, 1}), ev.push_back({q.finish, -1});
  std::sort(ev.begin(), ev.end());
  int64_t n = 0;
  double lo = -1, hi = -1;
  for (size_t i = 0; i < ev.size();) {
    const double t = ev[i].first;
    for (; i < ev.size() && ev[i].first == t; ++i) n += ev[i].second;
    if (n == slots && i < ev.size()) {
      if (lo < 0) lo = t;
      hi = ev[i].first;  // full until the next change
    }
  }
  if (lo >= 0 && hi > lo) return {lo, hi};
  const double t0 = ev.front().first, t1 = ev.back().first;
  return {t0 + (t1 - t0) / 4, t0 + 3 * (t1 - t0) / 4};
}
}  // namespace serving_detail

inline bool decode_fits(const Serving& s, int64_t c) {
  const Layout L = serving_detail::decode_at(s, c, s.input + s.output);
  return serving_detail::fullest_card_bytes(L) <= L.gpu.hbm_GB * kGB;
}

inline disagg::Cluster serving_cluster(const Serving& s, int64_t c) {
  disagg::Cluster k;
  k.prefill = s.prefill.count, k.decode = s.decode.count;
  k.prefill_token_budget = s.prefill.batch_tokens;
  k.decode_max_batch = c * s.decode.layout.cards;
  k.block_tokens = 1;
  k.kv_capacity_tokens = k.decode_max_batch * (s.input + s.output);  // memory is checked by decode_fits
  const Layout& L = s.decode.layout;
  k.kv_bytes_per_token = mla_kv_row_bytes(L.model, L.bytes.kv) * static_cast<double>(L.mla_layers());
  k.link_GBps = s.kv_GBps, k.link_latency_ms = s.kv_latency_ms;
  return k;
}

// The MTP steps of request 0, 1, 2, ... from one random stream (seed), drawn once and shared by a search's probes.
class MtpDraws {
 public:
  MtpDraws(const Serving& s, const ServingFaults& f) : s_(s), rng_(s.seed), ignore_(f.ignore_acceptance) {}
  int64_t operator[](int64_t i) {
    while (static_cast<int64_t>(steps_.size()) <= i)
      steps_.push_back(mtp_steps(s_.output, s_.mtp_draft, s_.acceptance, rng_, ignore_));
    return steps_[static_cast<size_t>(i)];
  }

 private:
  const Serving& s_;
  Rng rng_;
  bool ignore_;
  std::vector<int64_t> steps_;
};

inline ServingPoint simulate_serving(const Serving& s, int64_t c, const ServingFaults& f = {},
                                     MtpDraws* draws = nullptr) {
  require(c >= 1, "deploy: per_card = {} violates >= 1", c);
  MtpDraws own(s, f);
  MtpDraws& mtp = draws ? *draws : own;
  ServingPoint pt;
  pt.per_card = c;
  const Layout mem = serving_detail::decode_at(s, c, s.input + s.output);
  pt.memory_GB = serving_detail::fullest_card_bytes(mem) / kGB;
  pt.fits = pt.memory_GB <= mem.gpu.hbm_GB;
  const LayoutStepModel model(s);
  pt.step_ms = layout_step_ms(serving_detail::decode_at(s, c, s.input + s.output / 2), s.decode.step);
  if (!pt.fits) return pt;
  const disagg::Cluster k = serving_cluster(s, c);
  const int64_t slots = k.decode_max_batch * k.decode;
  // Too short a full-batch window holds too few whole requests: double the waves until it holds min(100, slots).
  disagg::SimResult r;
  double lo = 0, hi = 0;
  for (pt.waves = s.waves;; pt.waves *= 2) {
    disagg::Workload w;
    w.requests = pt.waves * slots;
    int64_t steps = 0;
    for (int64_t i = 0; i < w.requests; ++i) {
      const int64_t S = mtp[i];
      steps += S;
      w.arrivals.push_back({i, 0.0, s.input, 1 + S});
    }
    disagg::SimOptions opt;
    opt.keep_requests = true;
    r = disagg::simulate(model, k, w, disagg::Slo{}, opt);
    pt.requests = w.requests;
    pt.tokens_per_step = static_cast<double>(w.requests * (s.output - 1)) / static_cast<double>(steps);
    std::tie(lo, hi) = serving_detail::full_batch_window(r.records, slots);
    int64_t whole = 0;
    for (const disagg::RequestRecord& q : r.records) whole += q.decode_start >= lo && q.finish <= hi;
    if (whole >= std::min<int64_t>(100, slots) || pt.waves >= 64 * s.waves) break;
  }
  pt.simulated = true;
  const double width = hi - lo;
  const double out = static_cast<double>(s.output - 1);
  double busy_req = 0;
  std::vector<double> tpot, in_batch;  // per token: from the pull, and from joining the batch
  for (const disagg::RequestRecord& q : r.records) {
    const double a = std::max(lo, q.decode_start), b = std::min(hi, q.finish);
    if (b > a) busy_req += b - a;
    if (q.decode_start >= lo && q.finish <= hi)
      tpot.push_back((q.finish - q.pulled) / out), in_batch.push_back((q.finish - q.decode_start) / out);
  }
  if (tpot.empty())  // no request decoded wholly inside the window (too few waves): every request counts
    for (const disagg::RequestRecord& q : r.records)
      tpot.push_back((q.finish - q.pulled) / out), in_batch.push_back((q.finish - q.decode_start) / out);
  pt.window_requests = static_cast<int64_t>(tpot.size());
  pt.tpot_mean_ms = serving_detail::mean_of(tpot);
  std::sort(tpot.begin(), tpot.end());
  pt.tpot_p90_ms = tpot[std::min(tpot.size() - 1, static_cast<size_t>(0.9 * static_cast<double>(tpot.size())))];
  const double dcards = static_cast<double>(s.decode.layout.cards * s.decode.count);
  pt.batch_per_card = width > 0 ? busy_req / width / dcards : 0;
  // Little's law: each of the batch's requests emits one token per in-batch time per token.
  pt.decode_tokens_per_card_s = pt.batch_per_card / (serving_detail::mean_of(in_batch) / 1e3);
  // Prefill: each batch once (its requests share worker, start and end).
  std::map<std::pair<int64_t, double>, double> batches;  // (worker, start) -> end
  double in_tokens = 0;
  for (const disagg::RequestRecord& q : r.records) {
    batches[{q.prefill_worker, q.prefill_start}] = q.first_token;
    in_tokens += static_cast<double>(q.input);
  }
  double busy = 0;
  for (const auto& [key, end] : batches) busy += end - key.second;
  pt.prefill_tokens_per_card_s = in_tokens / (busy / 1e3) / static_cast<double>(s.prefill.layout.cards);
  // The decode's request rate at its full batch, from the step model (not the measured rate, which prefill may hold
  // down), over what one prefill instance serves.
  const double decode_rps = static_cast<double>(k.decode_max_batch * k.decode) * s.tokens_per_step() / out /
                            (pt.step_ms / 1e3);
  const double instance_rps = pt.prefill_tokens_per_card_s * static_cast<double>(s.prefill.layout.cards) /
                              static_cast<double>(s.input);
  pt.prefill_needed = decode_rps / instance_rps;
  return pt;
}

struct ServingSearch {
  bool found = false;
  ServingPoint best;
  int64_t memory_max = 0;            // the largest c whose memory fits (up to max_per_card)
  std::string binds;                 // what stops c growing
  std::vector<ServingPoint> probes;  // in the order run
};

inline ServingSearch search_serving(const Serving& s, const ServingFaults& f = {},
                                    const std::function<void(const ServingPoint&)>& progress = {}) {
  ServingSearch out;
  for (int64_t c = 1; c <= s.max_per_card && decode_fits(s, c); ++c) out.memory_max = c;
  if (out.memory_max == 0) {
    out.binds = "memory: one request per card does not fit";
    return out;
  }
  std::map<int64_t, ServingPoint> seen;
  MtpDraws draws(s, f);
  const auto at = [&](int64_t c) -> const ServingPoint& {
    auto it = seen.find(c);
    if (it == seen.end()) {
      it = seen.emplace(c, simulate_serving(s, c, f, &draws)).first;
      out.probes.push_back(it->second);
      if (progress) progress(it->second);
    }
    return it->second;
  };
  if (!at(1).meets(s.tpot_limit_ms)) {
    out.binds = "TPOT limit: even 1 per card exceeds it";
    out.best = at(1);
    return out;
  }
  out.found = true;
  if (at(out.memory_max).meets(s.tpot_limit_ms)) {
    out.best = at(out.memory_max);
    out.binds = out.memory_max == s.max_per_card ? "search.max_per_card" : "memory (one more request does not fit)";
    return out;
  }
  // Bracket around the step model's own answer (step / E <= limit at the mean context), then bisect: the simulated
  // TPOT is close to that estimate, so the bracket is narrow; the result does not depend on the guess.
  int64_t lo = 1, hi = out.memory_max;  // lo meets the limit, hi does not
  int64_t glo = 1, ghi = out.memory_max;
  while (ghi - glo > 1) {
    const int64_t mid = glo + (ghi - glo) / 2;
    const double tpot = layout_step_ms(serving_detail::decode_at(s, mid, s.input + s.output / 2), s.decode.step) /
                        s.tokens_per_step();
    (tpot <= s.tpot_limit_ms ? glo : ghi) = mid;
  }
  for (int64_t d = 1;; d *= 2) {  // widen from the guess until the bracket holds the boundary
    const int64_t up = std::min(glo + d, hi), down = std::max(glo - d, lo);
    if (at(glo).meets(s.tpot_limit_ms)) {
      lo = std::max(lo, glo);
      if (!at(up).meets(s.tpot_limit_ms)) { hi = up; break; }
      lo = up, glo = up;
    } else {
      hi = std::min(hi, glo);
      if (at(down).meets(s.tpot_limit_ms)) { lo = down; break; }
      hi = down, glo = down;
    }
    if (hi - lo <= 1) break;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (at(mid).meets(s.tpot_limit_ms) ? lo : hi) = mid;
  }
  out.best = at(f.search_returns_violating ? hi : lo);
  out.binds = fmt::format("TPOT limit ({} per card: {:.1f} ms)", hi, at(hi).tpot_mean_ms);
  return out;
}

}  // namespace ladder::deploy
