// tests/06-disagg/test_disagg_chunked.cpp -- stage 06: chunked prefill on colocated workers (Sarathi-Serve:
// Agrawal et al., "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI'24).
// A hand-traced schedule, the invariants on seeded setups, a planted bug caught, the config key's
// validation, and an explicit request list giving the same schedule as the drawn stream it lists.
#include <doctest/doctest.h>

#include "ladder/core/json.hpp"
#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/golden.hpp"
#include "ladder/06-disagg/invariants.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "source_dir.hpp"

using namespace ladder;
using namespace ladder::disagg;

namespace {

SimResult run(const StepModel& m, const Cluster& c, const Workload& w, Faults f = {}) {
  SimOptions o;
  o.keep_requests = true, o.faults = f;
  return simulate(m, c, w, Slo{}, o);
}

Workload listed(std::vector<Arrival> a) {
  Workload w;
  w.requests = static_cast<int64_t>(a.size());
  w.arrivals = std::move(a);
  return w;
}

bool has(const std::vector<std::string>& v, const std::string& what) {
  for (const auto& s : v)
    if (s.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("chunked prefill, traced by hand: budget 8, decodes first, chunks of the prompt in progress first") {
  // prefill 10 + 1 ms per new token; decode 10 + 1 ms per request: every step time is an integer.
  DistServeCoefficients k;
  k.prefill[0] = 10, k.prefill[1] = 1, k.decode[0] = 10, k.decode[2] = 1;
  const DistServeModel m(k);
  Cluster c;
  c.colocated = 1, c.chunked_prefill_tokens = 8;
  // r0: 12-token prompt, 3 tokens; r1: 4, 2; r2 arrives at 40 ms: 10, 2.
  const Workload w = listed({{0, 0, 12, 3}, {1, 0, 4, 2}, {2, 40, 10, 2}});
  const SimResult r = run(m, c, w);
  REQUIRE(r.records.size() == 3);
  //  0-18  prefill r0[0:8]                        10 + 8
  // 18-36  prefill r0[8:12] + r1[0:4]             10 + 8       -> first tokens of r0, r1 at 36
  // 36-48  decode r0, r1                          10 + 2       -> r1 done (2 tokens)
  // 48-66  decode r0 + prefill r2[0:7] (8 - 1)    max(17, 11, 11 + 17 - 10) = 18 -> r0 done (3 tokens)
  // 66-79  prefill r2[7:10]                       10 + 3       -> first token of r2
  // 79-90  decode r2                              10 + 1       -> r2 done
  const RequestRecord &r0 = r.records[0], &r1 = r.records[1], &r2 = r.records[2];
  CHECK(r0.prefill_start == 0);
  CHECK(r0.first_token == 36);
  CHECK(r0.finish == 66);
  CHECK(r0.chunks == 2);
  CHECK(r0.tpot() == 15);
  CHECK(r1.prefill_start == 18);
  CHECK(r1.first_token == 36);
  CHECK(r1.finish == 48);
  CHECK(r1.chunks == 1);
  CHECK(r2.prefill_start == 48);
  CHECK(r2.first_token == 79);
  CHECK(r2.ttft() == 39);
  CHECK(r2.finish == 90);
  CHECK(r2.chunks == 2);
  CHECK(r.summary.prefill_batches == 4);
  CHECK(r.summary.decode_steps == 3);
  CHECK(check_invariants(m, c, w, r).empty());
  // Without chunking, DistServe's colocated baseline: r0's prefill starts alone at 0 (r1's arrival, also
  // at 0, is the next event), 10 + 12 = 22; r1's 10 + 4 -> 36; decode r0, r1 -> 48; r2's 10 + 10 -> 68.
  c.chunked_prefill_tokens = 0;
  const SimResult u = run(m, c, w);
  CHECK(u.records[0].first_token == 22);
  CHECK(u.records[1].first_token == 36);
  CHECK(u.records[2].first_token == 68);
  CHECK(check_invariants(m, c, w, u).empty());
}

TEST_CASE("chunked prefill: invariants on seeded setups; the whole prompt precedes the first token") {
  Rng rng(6161);
  for (int i = 0; i < 16; ++i) {
    SimSetup s = golden_setup(i % 2 ? "sim_colocated" : "goodput_fig1");
    Cluster c = s.placements.front().cluster;
    c.colocated = 1 + static_cast<int64_t>(rng.uniform_int(2));
    c.chunked_prefill_tokens = 1 + static_cast<int64_t>(rng.uniform_int(i < 4 ? 64 : 2048));
    c.decode_max_batch = 1 + static_cast<int64_t>(rng.uniform_int(64));
    s.workload.rate = rng.uniform(0.5, 8);
    s.workload.seed = 900 + static_cast<uint64_t>(i);
    CAPTURE(c.chunked_prefill_tokens);
    const SimResult r = run(*s.model, c, s.workload);
    const auto bad = check_invariants(*s.model, c, s.workload, r);
    CHECK_MESSAGE(bad.empty(), (bad.empty() ? "" : bad.front()));
    int64_t multi = 0;
    for (const RequestRecord& q : r.records) multi += q.chunks > 1;
    if (c.chunked_prefill_tokens < 97) CHECK(multi == s.workload.requests);  // every prompt is longer than a step
    // Deterministic: the same setup gives the same bytes.
    const SimResult again = run(*s.model, c, s.workload);
    bool same = true;
    for (size_t j = 0; j < r.records.size(); ++j)
      same = same && r.records[j].finish == again.records[j].finish && r.records[j].first_token == again.records[j].first_token;
    CHECK(same);
  }
}

TEST_CASE("planted bug: first token after the first chunk -> the prompt invariant fires") {
  SimSetup s = golden_setup("goodput_fig1");
  Cluster c = s.placements.front().cluster;
  c.chunked_prefill_tokens = 256;  // 512-token prompts: two chunks at least
  Faults f;
  f.first_token_early = true;
  const auto bad = check_invariants(*s.model, c, s.workload, run(*s.model, c, s.workload, f));
  CHECK(has(bad, "prompt tokens were prefilled"));
  CHECK(check_invariants(*s.model, c, s.workload, run(*s.model, c, s.workload)).empty());
}

TEST_CASE("chunked prefill: bad settings name the key") {
  SimSetup s = golden_setup("sim_2p1d_migration");
  Cluster c = s.placements.front().cluster;
  c.chunked_prefill_tokens = 512;
  CHECK_THROWS_WITH_AS(simulate(*s.model, c, s.workload, s.slo),
                       doctest::Contains("chunked_prefill_tokens = 512 applies to colocated workers only"), Error);
  c = golden_setup("sim_colocated").placements.front().cluster;
  c.chunked_prefill_tokens = -1;
  CHECK_THROWS_WITH_AS(simulate(*s.model, c, s.workload, s.slo), doctest::Contains("chunked_prefill_tokens = -1"), Error);
  const auto cfg = [](nlohmann::json placement) {
    nlohmann::json j = read_json(ladder::source_dir() / "data/disagg/distserve-fig1.json");
    j["placements"] = nlohmann::json::array({placement});
    return parse_sim_config(j, "t", ".", ladder::source_dir() / "data");
  };
  CHECK(cfg({{"colocated", 1}, {"chunked_prefill_tokens", 512}}).placements[0].cluster.chunked_prefill_tokens == 512);
  CHECK_THROWS_WITH_AS(cfg({{"colocated", 1}, {"chunked_prefill_tokens", 0}}),
                       doctest::Contains("placements[0].chunked_prefill_tokens = 0 violates >= 1"), Error);
  CHECK_THROWS_WITH_AS(cfg({{"prefill", 2}, {"decode", 1}, {"chunked_prefill_tokens", 512}}),
                       doctest::Contains("placements[0].chunked_prefill_tokens applies to colocated"), Error);
}

TEST_CASE("an explicit request list runs exactly as the drawn stream it lists") {
  const SimSetup s = golden_setup("sim_2p1d_migration");
  ArrivalStream stream(s.workload);
  std::vector<Arrival> list;
  while (!stream.done()) list.push_back(stream.next());
  const Workload w = listed(list);
  for (Cluster c : {s.placements.front().cluster, golden_setup("sim_colocated").placements.front().cluster}) {
    const SimResult a = run(*s.model, c, s.workload), b = run(*s.model, c, w);
    REQUIRE(a.records.size() == b.records.size());
    bool same = true;
    for (size_t i = 0; i < a.records.size(); ++i)
      same = same && a.records[i].first_token == b.records[i].first_token && a.records[i].finish == b.records[i].finish;
    CHECK(same);
  }
  Workload bad = w;
  bad.arrivals[5].t_ms = -1;
  CHECK_THROWS_WITH_AS(run(*s.model, s.placements.front().cluster, bad), doctest::Contains("arrival_ms[5] = -1"), Error);
  bad = w;
  bad.arrivals[3].output = 0;
  CHECK_THROWS_WITH_AS(run(*s.model, s.placements.front().cluster, bad), doctest::Contains("request 3"), Error);
}
