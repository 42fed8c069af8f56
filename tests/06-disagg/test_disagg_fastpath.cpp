// tests/06-disagg/test_disagg_fastpath.cpp -- stage 06 event simulator: the fast path (decode steps run back to
// back without the event queue, simulator_impl.hpp run_decode_steps) gives exactly what the queue gives.
// Every simulation runs twice, fast path on and off (SimOptions::queue_every_step); all records and the
// summary must be equal to the bit. Half the setups put every time on a grid of exactly representable
// values (explicit arrivals every 4 ms, step coefficients 4, 1/8, 8, 1/2, ...), so events tie and the
// tie rule (an earlier-created event goes first) is exercised, not only the ordinary case.
#include <doctest/doctest.h>

#include <cstring>

#include "ladder/core/rng.hpp"
#include "ladder/06-disagg/simulator.hpp"

using namespace ladder;
using namespace ladder::disagg;

namespace {

struct Setup {
  DistServeCoefficients coef;
  Cluster cluster;
  Workload workload;
};

Setup random_setup(Rng& rng, int i) {
  Setup s;
  DistServeCoefficients& co = s.coef;
  const bool grid = i % 2 == 0;
  if (grid) {
    co.prefill[0] = 4, co.prefill[1] = 0.125, co.prefill[2] = i % 4 == 0 ? 0 : 1.0 / 1024;
    co.decode[0] = 8, co.decode[1] = i % 8 == 0 ? 0 : 1.0 / 256, co.decode[2] = 0.5;
  } else {  // DistServe's OPT-13B fit (presets.hpp)
    co.prefill[0] = 18.10, co.prefill[1] = 0.1019, co.prefill[2] = 7.12e-6;
    co.decode[0] = 19.93, co.decode[1] = 6.27e-4, co.decode[2] = 0.0385;
  }
  Cluster& c = s.cluster;
  const auto pick = [&](int64_t lo, int64_t n) { return lo + static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n))); };
  const int64_t kind = pick(0, 4);  // colocated, chunked, xPyD, xPyD
  if (kind <= 1) c.colocated = pick(1, 3);
  else c.prefill = pick(1, 3), c.decode = pick(1, 3);
  if (kind == 1) c.chunked_prefill_tokens = pick(64, 1024);
  c.decode_max_batch = pick(1, 64);  // small caps and capacities: decode workers that cannot pull
  c.prefill_token_budget = pick(256, 4096);
  c.kv_capacity_tokens = pick(2048, 30000);
  c.kv_bytes_per_token = 800000;
  c.link_GBps = rng.uniform() < 0.4 ? 0 : (grid ? 64.0 : rng.uniform(1, 100));
  c.link_latency_ms = rng.uniform() < 0.5 ? 0 : (grid ? 2.0 : rng.uniform(0, 3));
  Workload& w = s.workload;
  w.requests = pick(200, 800);
  w.seed = 100 + static_cast<uint64_t>(i);
  w.input = LengthDist::uniform(1, pick(1, 1500));
  w.output = LengthDist::uniform(1, pick(1, 300));
  w.rate = rng.uniform(0.5, 40);
  w.cv = rng.uniform(0.3, 3);
  if (grid) {
    double t = 0;
    for (int64_t k = 0; k < w.requests; ++k) {
      t += 4.0 * static_cast<double>(rng.uniform_int(static_cast<uint64_t>(1000.0 / w.rate) + 1));
      w.arrivals.push_back(Arrival{k, t, pick(1, 1024), pick(1, 200)});
    }
  }
  return s;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("fast path on and off: identical records and summary on seeded random setups, ties included") {
  Rng rng(606);
  int64_t fewer_events = 0;
  for (int i = 0; i < 80; ++i) {
    const Setup s = random_setup(rng, i);
    const DistServeModel m(s.coef);
    SimOptions slow, fast;
    slow.keep_requests = fast.keep_requests = true;
    slow.queue_every_step = true;
    const SimResult a = simulate(m, s.cluster, s.workload, Slo{400, 40}, slow);
    const SimResult b = simulate(m, s.cluster, s.workload, Slo{400, 40}, fast);
    CAPTURE(i);
    REQUIRE(a.records.size() == b.records.size());
    size_t bad = 0;
    for (size_t k = 0; k < a.records.size(); ++k) {
      const RequestRecord &p = a.records[k], &q = b.records[k];
      const bool eq = p.id == q.id && p.prefill_worker == q.prefill_worker && p.decode_worker == q.decode_worker &&
                      p.prefilled == q.prefilled && p.chunks == q.chunks && same_bits(p.arrival, q.arrival) &&
                      same_bits(p.prefill_start, q.prefill_start) && same_bits(p.first_token, q.first_token) &&
                      same_bits(p.pulled, q.pulled) && same_bits(p.decode_start, q.decode_start) &&
                      same_bits(p.finish, q.finish);
      if (!eq && bad++ == 0)
        FAIL_CHECK("request " << k << ": queued finish " << p.finish << " first token " << p.first_token
                              << ", fast path finish " << q.finish << " first token " << q.first_token);
    }
    CHECK(bad == 0);
    const Summary &x = a.summary, &y = b.summary;
    CHECK(x.decode_steps == y.decode_steps);
    CHECK(x.prefill_batches == y.prefill_batches);
    CHECK(x.max_in_flight == y.max_in_flight);
    CHECK(x.max_blocks_used == y.max_blocks_used);
    CHECK(same_bits(x.sum_ttft, y.sum_ttft));
    CHECK(same_bits(x.sum_tpot, y.sum_tpot));
    CHECK(same_bits(x.end_ms, y.end_ms));
    fewer_events += b.queued_events < a.queued_events;
  }
  // The comparison means something only if the fast path ran: most setups must skip the queue.
  CHECK(fewer_events >= 40);
}
