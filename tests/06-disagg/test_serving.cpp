// tests/06-disagg/test_serving.cpp -- stage 06, part 3: a serving deployment end to end (data/serving/*.json,
// ladder/06-disagg/deploy/serving.hpp and serving_search.hpp, `ladder deploy`).
// What is checked: the files parse and every bad field is named; MTP's drawn steps emit 1 + p + ... + p^k tokens
// each (and a planted "acceptance ignored" is caught); the step model the simulator calls is the layout's own;
// the simulated TPOT is the step over E at the mean context; the search returns a concurrency that meets the
// limit with the next one above it failing (a planted search that returns the first failing one is caught).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <functional>
#include <string>

#include "ladder/core/error.hpp"
#include "ladder/core/json.hpp"
#include "ladder/06-disagg/deploy/serving_search.hpp"
#include "source_dir.hpp"

namespace {
namespace fs = std::filesystem;
using namespace ladder::deploy;
const fs::path kData = ladder::source_dir() / "data";

Serving serving(const std::string& name) { return load_serving(kData / "serving" / (name + ".json"), kData); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ladder::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The A2 file with one edit; the error names the field.
std::string bad(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = ladder::read_json(kData / "serving" / "huawei-a2.json");
  edit(j);
  return error_of([&] { parse_serving(j, "x.json", kData); });
}
}  // namespace

TEST_CASE("serving files: both parse, with the report's lengths, MTP and limits") {
  for (const char* name : {"huawei-a2", "huawei-cm384"}) {
    CAPTURE(name);
    const Serving s = serving(name);
    CHECK(s.decode.layout.phase == "decode");
    CHECK(s.prefill.layout.phase == "prefill");
    CHECK(s.mtp_draft == 1);
    CHECK(s.acceptance == 0.7);
    CHECK(s.input == 2048);
    CHECK(s.output == 2048);
    CHECK(s.prefill.batch_tokens == 16384);
  }
  CHECK(serving("huawei-a2").tpot_limit_ms == 100);
  CHECK(serving("huawei-cm384").tpot_limit_ms == 50);  // Huawei report Sec. 7.2
}

TEST_CASE("serving files: bad fields are named") {
  CHECK(bad([](auto& j) { j["extra"] = 1; }).find("unknown key (top level).extra") != std::string::npos);
  CHECK(bad([](auto& j) { j["mtp"]["acceptance"] = 1.5; }).find("mtp.acceptance = 1.5 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j["mtp"]["draft"] = 2; }).find("mtp.draft = 2 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j["decode"]["layout"] = "huawei-a2-prefill"; }).find("decode.layout") != std::string::npos);
  CHECK(bad([](auto& j) { j["decode"]["layout"] = "nothing"; }).find("no data/deployments/nothing.json") !=
        std::string::npos);
  CHECK(bad([](auto& j) { j["prefill"]["instances"] = 0; }).find("prefill.instances = 0 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j.erase("tpot_limit_ms"); }).find("tpot_limit_ms is required") != std::string::npos);
  CHECK(bad([](auto& j) { j["tpot_limit_ms"] = -1; }).find("tpot_limit_ms = -1 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j["search"]["waves"] = 2; }).find("search.waves = 2 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j["requests"]["output"] = 1; }).find("requests.output = 1 violates") != std::string::npos);
  CHECK(bad([](auto& j) { j["decode"]["step"] = "fast"; }).find("decode.step = 'fast'") != std::string::npos);
  CHECK(bad([](auto& j) { j["decode"]["batch_tokens"] = 8; }).find("decode.batch_tokens") != std::string::npos);
  CHECK(error_of([] { load_serving(kData / "serving" / "none.json", kData); }).find("no such file") != std::string::npos);
}

// Tokens per request-step over many requests: 1 + p + ... + p^k. Each step's emitted count has variance at most
// k^2 / 4 (a count in [1, 1 + k]); over M steps the mean's standard error is at most k / (2 sqrt(M)); the last step
// of each request is cut at the output length, at most k tokens less per request, a bias of at most k N / M. The
// tolerance is 5 standard errors plus that bias.
TEST_CASE("MTP steps: a request's steps emit 1 + p + ... + p^k tokens each; an ignored acceptance is caught") {
  for (const auto& [k, p] : {std::pair<int64_t, double>{1, 0.7}, {1, 0.9}, {2, 0.8}, {3, 0.5}}) {
    for (bool planted : {false, true}) {
      INFO("k = ", k, ", p = ", p, ", planted = ", planted);
      ladder::Rng rng(11);
      const int64_t n = 2000, output = 2048;
      int64_t steps = 0;
      for (int64_t i = 0; i < n; ++i) steps += mtp_steps(output, k, p, rng, planted);
      const double m = static_cast<double>(steps), kd = static_cast<double>(k);
      const double per_step = static_cast<double>(n * (output - 1)) / m;
      const double tol = 5 * kd / (2 * std::sqrt(m)) + kd * static_cast<double>(n) / m;
      const bool close = std::abs(per_step - tokens_per_step(p, k)) <= tol;
      CHECK(close == !planted);
    }
  }
  ladder::Rng rng(1);
  CHECK(mtp_steps(2, 1, 0.7, rng) == 1);  // one token after the first: one step
  CHECK(mtp_steps(5, 0, 0.7, rng) == 4);  // no drafts: one token per step
  CHECK(mtp_steps(5, 1, 1.0, rng) == 2);  // every draft accepted: 2 tokens per step
}

TEST_CASE("the step model the simulator calls is the layout's, at ceil(n / cards) per card and the real context") {
  const Serving s = serving("huawei-a2");
  const LayoutStepModel m(s);
  const int64_t C = s.decode.layout.cards;
  // n = 72 C requests whose simulated contexts average input + 1024 / E: real mean context input + 1024 = 3072.
  const double E = s.tokens_per_step(), n = 72.0 * static_cast<double>(C);
  const ladder::disagg::BatchStats b{72 * C, n * (2048 + 1024 / E), 0};
  Layout L = s.decode.layout;
  L.work.requests_per_card = 72, L.work.tokens_per_card = 144, L.work.context = 3072;
  CHECK(m.decode_ms(b) == layout_step_ms(L, StepKind::sequential));
  const ladder::disagg::BatchStats one_more{72 * C + 1, (n + 1) * (2048 + 1024 / E), 0};  // the fullest rank: 73
  L.work.requests_per_card = 73, L.work.tokens_per_card = 146;
  CHECK(m.decode_ms(one_more) == layout_step_ms(L, StepKind::sequential));
  // Prefill: 8 x 2K over 16 cards is the layout file's own batch (1024 tokens per card).
  CHECK(m.prefill_ms(ladder::disagg::BatchStats{8, 16384, 8 * 2048.0 * 2048}) ==
        layout_step_ms(s.prefill.layout, StepKind::sequential));
}

// Simulated TPOT at 72 per card against step(72, mean context) / E. The terms between them, each bounded: the wait
// for the step boundary (at most one step per request, over output - 1 = 2047 tokens: 0.05 %), the KV migration
// (144 MB at 50 GB/s = 2.9 ms per request: 0.002 %), the realised tokens per step against E (5 standard errors over
// the window's requests: 0.2 %); the step is linear in the context where the attention is memory-bound, so a batch
// whose contexts sweep input .. input + output averages the step at the mean. 1 % covers them; ignoring the
// acceptance moves the TPOT by 70 %.
TEST_CASE("end to end: the simulated TPOT is the step over E, and tokens/s rise with the acceptance") {
  Serving s = serving("huawei-a2");
  s.waves = 3;
  const Layout L = [&] {
    Layout x = s.decode.layout;
    x.work.requests_per_card = 72, x.work.tokens_per_card = 144, x.work.context = 3072;
    return x;
  }();
  const double expect = layout_step_ms(L, StepKind::sequential) / s.tokens_per_step();
  for (bool planted : {false, true}) {
    CAPTURE(planted);
    ServingFaults f;
    f.ignore_acceptance = planted;
    const ServingPoint p = simulate_serving(s, 72, f);
    REQUIRE(p.simulated);
    CHECK(p.fits);
    CHECK(p.window_requests > 100);
    CHECK(p.batch_per_card > 0.95 * 72);  // one prefill instance keeps the batch full
    CHECK((std::abs(p.tpot_mean_ms / expect - 1) <= 0.01) == !planted);
  }
  // At a fixed concurrency the step is the same for every p (1 + k rows either way, the same mean context): tokens/s
  // follow 1 + p. Tokens/s is the batch over the in-batch time per token (Little's law), so each side carries the
  // TPOT's 1 % bound above: 2 % for the ratio. Ignoring the acceptance makes the ratio 1.7 / 1.9, 10.5 % off.
  Serving hi = s;
  hi.acceptance = 0.9;
  const ServingPoint a = simulate_serving(s, 72), b = simulate_serving(hi, 72);
  CHECK(std::abs((b.decode_tokens_per_card_s / a.decode_tokens_per_card_s) / (1.9 / 1.7) - 1) <= 0.02);
  CHECK(b.tpot_mean_ms < a.tpot_mean_ms);
}

TEST_CASE("the search: the largest concurrency that meets the TPOT limit; a planted off-by-one is caught") {
  Serving s = serving("huawei-a2");
  s.waves = 3;
  const ServingSearch r = search_serving(s);
  REQUIRE(r.found);
  CHECK(r.best.meets(s.tpot_limit_ms));
  CHECK(r.best.per_card < r.memory_max);  // the limit binds before the memory at 100 ms
  const ServingPoint next = simulate_serving(s, r.best.per_card + 1);
  CHECK(!next.meets(s.tpot_limit_ms));
  CHECK(r.binds.find("TPOT limit") != std::string::npos);
  // The bisection rests on TPOT growing with the concurrency: true of every probe it ran.
  std::vector<ServingPoint> probes = r.probes;
  std::sort(probes.begin(), probes.end(), [](const auto& x, const auto& y) { return x.per_card < y.per_card; });
  for (size_t i = 1; i < probes.size(); ++i) CHECK(probes[i].tpot_mean_ms >= probes[i - 1].tpot_mean_ms);
  ServingFaults f;
  f.search_returns_violating = true;
  const ServingSearch planted = search_serving(s, f);
  CHECK(!planted.best.meets(s.tpot_limit_ms));  // what the first check above would have caught
  // A limit nothing meets, and one the memory stops first.
  s.tpot_limit_ms = 1;
  CHECK(!search_serving(s).found);
  s.tpot_limit_ms = 1e4;
  const ServingSearch loose = search_serving(s);
  CHECK(loose.best.per_card == loose.memory_max);
  CHECK(loose.binds.find("memory") != std::string::npos);
  CHECK(!decode_fits(s, loose.memory_max + 1));
}
