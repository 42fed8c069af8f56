// tests/06-disagg/test_disagg_schedule.cpp -- stage 06 event simulator, disaggregated schedules traced by hand:
// a request whose KV migration ends during a decode step joins at the next step boundary (never the
// step in progress, which was priced without it), and migrated requests go to the least-loaded decode
// worker (fewest requests held, running + pulled; ties to fewer KV blocks reserved, then the lowest
// index: chapter 06 §4). Every expected number below is derived in the comments, not read off a run.
#include <doctest/doctest.h>

#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/invariants.hpp"
#include "ladder/06-disagg/presets.hpp"

using namespace ladder;
using namespace ladder::disagg;

namespace {

// prefill 10 + 1 ms per prompt token; decode 10 + 1 ms per request in the batch: every time is an integer.
DistServeModel integer_model() {
  DistServeCoefficients k;
  k.prefill[0] = 10, k.prefill[1] = 1, k.decode[0] = 10, k.decode[2] = 1;
  return DistServeModel(k);
}

SimResult run(const StepModel& m, const Cluster& c, const std::vector<Arrival>& a) {
  Workload w;
  w.requests = static_cast<int64_t>(a.size());
  w.arrivals = a;
  SimOptions o;
  o.keep_requests = true;
  SimResult r = simulate(m, c, w, Slo{}, o);
  CHECK(check_invariants(m, c, w, r).empty());
  return r;
}

}  // namespace

TEST_CASE("1P1D: a request migrated during a decode step joins at the next boundary, not the step in progress") {
  const DistServeModel m = integer_model();
  Cluster c;
  c.prefill = 1, c.decode = 1;  // free migration, as in DistServe's simulator
  // A: arrives at 0, 10-token prompt, 4 tokens. B: arrives at 15 (prefill worker busy), 5 tokens, 2 tokens.
  //  0-20  prefill A                      10 + 10  -> A's first token at 20; A migrates (0 ms), joins the idle worker
  // 20-35  prefill B                      10 + 5   -> B's first token at 35; B migrates, arrives at 35 mid-step
  // 20-31  decode [A]                     10 + 1   -> A has 2 tokens
  // 31-42  decode [A]                     10 + 1   -> A has 3; B joins here, at the boundary (decode_start 42)
  // 42-54  decode [A, B]                  10 + 2   -> A has 4 (done), B has 2 (done)
  // B: TPOT = (54 - 35) / (2 - 1) = 19, one step plus the 7 ms it waited for the boundary.
  // A: TPOT = (54 - 20) / 3 = 34 / 3.
  // The defect this guards against: B joined the 31-42 step at 35 and was credited with its token, so B
  // finished at 42 with a TPOT of 7 ms, less than any step takes, and A's last step ran alone (42-53).
  const SimResult r = run(m, c, {{0, 0, 10, 4}, {1, 15, 5, 2}});
  REQUIRE(r.records.size() == 2);
  const RequestRecord &a = r.records[0], &b = r.records[1];
  CHECK(a.first_token == 20);
  CHECK(a.decode_start == 20);
  CHECK(a.finish == 54);
  CHECK(a.tpot() == doctest::Approx(34.0 / 3).epsilon(1e-15));
  CHECK(b.first_token == 35);
  CHECK(b.pulled == 35);
  CHECK(b.decode_start == 42);
  CHECK(b.finish == 54);
  CHECK(b.tpot() == 19);
  CHECK(r.summary.decode_steps == 3);
  // A KV transfer of 2 ms (latency): B's cache lands at 37, still inside the 31-42 step: the same schedule.
  c.link_latency_ms = 2;
  const SimResult l = run(m, c, {{0, 0, 10, 4}, {1, 15, 5, 2}});
  // A's own migration now delays it: A joins at 22, steps 22-33, 33-44; B (ready at 37) joins at 44;
  // 44-56 [A, B]. B's TPOT = (56 - 35) / 1 = 21.
  CHECK(l.records[0].decode_start == 22);
  CHECK(l.records[1].decode_start == 44);
  CHECK(l.records[1].finish == 56);
  CHECK(l.records[1].tpot() == 21);
}

TEST_CASE("decode steps: no request is in a batch for fewer steps than it has tokens to make") {
  // On any disaggregated run with DistServe's fit, a request with `output` tokens spends output - 1 steps
  // in a batch after it joins, each at least decode[0] + decode[2] (one request, no context): its
  // finish - decode_start can be no shorter. A request credited with a step it joined mid-way breaks it.
  const std::vector<std::pair<int64_t, int64_t>> placements = {{1, 1}, {2, 1}, {2, 2}, {1, 3}};
  for (const auto& [p, d] : placements) {
    SimSetup s = golden_setup("goodput_fig1");
    s.workload.rate = 4.0 * static_cast<double>(p + d);
    s.workload.requests = 300;
    s.workload.output = LengthDist::uniform(2, 3);  // one or two steps: a step credited part-way shows
    Cluster c = s.placements.back().cluster;  // 2P1D, free migration
    c.prefill = p, c.decode = d;
    const DistServeCoefficients& k = distserve_opt13b_a100();
    const double step = k.decode[0] + k.decode[2];
    SimOptions o;
    o.keep_requests = true;
    const SimResult r = simulate(*s.model, c, s.workload, s.slo, o);
    int64_t short_ = 0, first = -1;
    for (const RequestRecord& q : r.records)
      if (q.output > 1 && q.finish - q.decode_start < static_cast<double>(q.output - 1) * step * (1 - 1e-12))
        short_ += 1, first = first < 0 ? q.id : first;
    CHECK_MESSAGE(short_ == 0, p << "P" << d << "D: " << short_ << " requests (first: " << first << ") made their "
                                 << "tokens in less than (output - 1) x " << step << " ms after joining a batch");
  }
}

TEST_CASE("2P2D: migrated requests go to the least-loaded decode worker") {
  const DistServeModel m = integer_model();
  Cluster c;
  c.prefill = 2, c.decode = 2;     // workers 0, 1 prefill; 2, 3 decode
  c.prefill_token_budget = 10;     // one 10-token prompt per prefill batch
  // r0: 10-token prompt, 30 tokens (40 tokens: 3 blocks of 16); r1: 10, 3 (1 block); r2: 10, 2 (1 block);
  // all arrive at 0.
  //  0-20  P0 prefills r0, P1 prefills r1 (r2 waits: the budget holds one prompt)
  //  20    P0 done: r0 pulled; both decode workers hold nothing -> the lowest index, worker 2.
  //        P0 takes r2: 20-40.
  //  20    P1 done: r1 pulled; worker 2 holds r0 (still migrating: it counts), worker 3 nothing -> worker 3.
  //  20-31, 31-42, ...  worker 2 decodes [r0] (11 ms a step); r0 has 30 tokens at 20 + 29 x 11 = 339.
  //  20-31, 31-42       worker 3 decodes [r1]; r1 has 3 tokens at 42.
  //  40    P0 done: r2 pulled. Each decode worker holds one request: the tie goes to fewer KV blocks
  //        reserved, worker 3 (1 block) over worker 2 (3 blocks). r2 lands mid-step and joins at 42.
  //  42-53 worker 3 decodes [r2] -> r2 done at 53, TPOT (53 - 40) / 1 = 13.
  // The defect this guards against: decode workers pulled in index order, so worker 2 took all three.
  const SimResult r = run(m, c, {{0, 0, 10, 30}, {1, 0, 10, 3}, {2, 0, 10, 2}});
  REQUIRE(r.records.size() == 3);
  const RequestRecord &r0 = r.records[0], &r1 = r.records[1], &r2 = r.records[2];
  CHECK(r0.decode_worker == 2);
  CHECK(r1.decode_worker == 3);
  CHECK(r2.decode_worker == 3);
  CHECK(r0.finish == 339);
  CHECK(r0.tpot() == 11);
  CHECK(r1.finish == 42);
  CHECK(r1.tpot() == 11);
  CHECK(r2.first_token == 40);
  CHECK(r2.decode_start == 42);
  CHECK(r2.finish == 53);
  CHECK(r2.tpot() == 13);
}

TEST_CASE("2P2D on the Fig. 1 workload: both decode workers serve, about half each") {
  SimSetup s = golden_setup("goodput_fig1");
  s.workload.rate = 12;
  s.workload.requests = 2000;
  Cluster c = s.placements.back().cluster;
  c.prefill = 2, c.decode = 2;
  SimOptions o;
  o.keep_requests = true;
  const SimResult r = simulate(*s.model, c, s.workload, s.slo, o);
  int64_t served[2] = {0, 0};
  for (const RequestRecord& q : r.records) {
    REQUIRE((q.decode_worker == 2 || q.decode_worker == 3));
    ++served[q.decode_worker - 2];
  }
  MESSAGE("decode worker 2 served ", served[0], ", worker 3 served ", served[1]);
  CHECK(served[0] >= 800);  // least-loaded alternates; index order gave worker 2 all 2000
  CHECK(served[1] >= 800);
  CHECK(check_invariants(*s.model, c, s.workload, r).empty());
}
