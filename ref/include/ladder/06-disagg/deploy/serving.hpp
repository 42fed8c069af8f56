// ladder/06-disagg/deploy/serving.hpp -- stage 06, part 3: a serving deployment as data (data/serving/*.json) and
// the per-module step model the event simulator runs it with.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> deployment (layouts, memory, traffic,
//               overlap, MTP, techniques) -> [SERVING: the deployment in the event simulator, concurrency search]
//
// A serving file names a decode layout and a prefill layout (data/deployments/NAME.json, deploy/layout.hpp), how
// many instances of each (xPyD: x prefill, y decode instances), MTP (k drafts, acceptance p), the request lengths,
// the KV link between the instances, the TPOT limit and the search. Every key is checked; a bad value throws
// ladder::Error "FILE: FIELD = VALUE violates CONSTRAINT" (the CLI prints that one line and exits 2).
//
// The step model (LayoutStepModel) is the layouts' own: a decode batch of n requests on an instance of C cards
// runs ceil(n / C) requests per card (DP attention: the fullest rank sets the step), 1 + k query rows each, at the
// batch's mean context; the step is deploy/traffic.hpp's sum of module rooflines and collectives ("sequential"),
// the better of that and overlap.hpp's two micro-batches ("two_batch"), or techniques.hpp's graph with every
// switch on ("techniques"). A prefill batch of n requests and S tokens runs ceil(S / C) tokens per card.
// MTP in the simulator: the simulator counts steps, not tokens. A request of output O needs the first token (the
// prefill's) and then decode steps that each emit 1 + (accepted drafts) tokens until O exist; the number of steps
// S is drawn per request from the acceptance chain (mtp_steps), and the simulator decodes 1 + S "outputs". Its
// contexts then grow by one per step where the real ones grow by the tokens emitted; the step model restores them
// with the expected tokens per step E = 1 + p + ... + p^k: ctx = input + E (ctx_sim - input) (fixed input lengths).
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "ladder/core/rng.hpp"
#include "ladder/06-disagg/deploy/layout.hpp"
#include "ladder/06-disagg/deploy/mtp.hpp"
#include "ladder/06-disagg/deploy/overlap.hpp"
#include "ladder/06-disagg/deploy/techniques.hpp"
#include "ladder/06-disagg/deploy/traffic.hpp"
#include "ladder/06-disagg/step_model.hpp"

namespace ladder::deploy {

enum class StepKind { sequential, two_batch, techniques };

inline const char* step_kind_name(StepKind k) {
  return k == StepKind::sequential ? "sequential" : k == StepKind::two_batch ? "two_batch" : "techniques";
}

// One step of a layout at its workload, by the chosen rule.
inline double layout_step_ms(const Layout& L, StepKind k) {
  if (k == StepKind::techniques) return technique_step(L, Switches::all()).step_ms;
  const double seq = step_time(L).total_ms();
  return k == StepKind::two_batch ? std::min(seq, overlap(L).two_batch_ms) : seq;
}

struct Instance {
  std::string layout_name;
  Layout layout;
  int64_t count = 1;                       // instances of this kind (x or y of xPyD)
  StepKind step = StepKind::sequential;
  int64_t batch_tokens = 0;                // prefill: new tokens per batch (the simulator's token budget)
};

struct Serving {
  std::string file, name, source;
  Instance decode, prefill;
  int64_t mtp_draft = 0;
  double acceptance = 0;
  int64_t input = 1, output = 2;           // tokens per request (fixed lengths)
  double kv_GBps = 0, kv_latency_ms = 0;   // the link a request's KV cache crosses from prefill to decode
  double tpot_limit_ms = 0;
  int64_t max_per_card = 1024;             // the search's upper end (before memory)
  int64_t waves = 4;                       // requests simulated = waves x the decode batch cap
  uint64_t seed = 1;
  std::string report_decode_id, report_prefill_id;  // data/papers ids of the reported figures ("" = none)
  int64_t report_per_card = 0;             // the report's concurrency per card (0 = not stated)
  double tokens_per_step() const { return deploy::tokens_per_step(acceptance, mtp_draft); }  // E = 1 + p + ... + p^k
};

namespace serving_detail {
inline StepKind step_kind(const nlohmann::json& j, const std::string& where, const std::string& file) {
  if (!j.contains("step")) return StepKind::sequential;
  const std::string s = j.at("step").is_string() ? j.at("step").get<std::string>() : j.at("step").dump();
  require(s == "sequential" || s == "two_batch" || s == "techniques",
          "{}: {}.step = '{}' must be sequential, two_batch or techniques", file, where, s);
  return s == "sequential" ? StepKind::sequential : s == "two_batch" ? StepKind::two_batch : StepKind::techniques;
}
inline Instance instance(const nlohmann::json& top, const char* key, const char* phase, const std::string& file,
                         const std::filesystem::path& data_root) {
  const nlohmann::json& j = detail::field(top, key, "", file);
  detail::known_keys(j, key, file, {"layout", "instances", "step", "batch_tokens", "note"});
  Instance in;
  require(j.contains("layout") && j.at("layout").is_string(), "{}: {}.layout is required (a data/deployments name)",
          file, key);
  in.layout_name = j.at("layout").get<std::string>();
  const std::filesystem::path lf = data_root / "deployments" / (in.layout_name + ".json");
  require(std::filesystem::exists(lf), "{}: {}.layout = '{}': no data/deployments/{}.json", file, key, in.layout_name,
          in.layout_name);
  in.layout = load_layout(lf, data_root);
  require(in.layout.phase == phase, "{}: {}.layout = '{}' is a {} layout (a {} layout is needed)", file, key,
          in.layout_name, in.layout.phase, phase);
  in.count = detail::positive_int(j, "instances", key, file);
  in.step = step_kind(j, key, file);
  if (std::string(phase) == "prefill")
    in.batch_tokens = j.contains("batch_tokens") ? detail::positive_int(j, "batch_tokens", key, file)
                                                 : in.layout.work.tokens_per_card * in.layout.cards;
  else
    require(!j.contains("batch_tokens"), "{}: {}.batch_tokens applies to the prefill instance only", file, key);
  return in;
}
}  // namespace serving_detail

inline Serving parse_serving(const nlohmann::json& j, const std::string& file, const std::filesystem::path& data_root) {
  using detail::number;
  using detail::positive_int;
  require(!(j.is_object() && j.contains("modules")),
          "{}: is a layout (data/deployments, `ladder plan`); a serving file (data/serving) names two layouts", file);
  detail::known_keys(j, "(top level)", file,
                     {"name", "source", "decode", "prefill", "mtp", "requests", "kv_transfer", "tpot_limit_ms",
                      "search", "report", "notes"});
  Serving s;
  s.file = file;
  require(j.contains("name") && j.at("name").is_string(), "{}: name is required (a string)", file);
  s.name = j.at("name").get<std::string>();
  s.source = j.value("source", std::string());
  s.decode = serving_detail::instance(j, "decode", "decode", file, data_root);
  s.prefill = serving_detail::instance(j, "prefill", "prefill", file, data_root);
  const nlohmann::json& m = detail::field(j, "mtp", "", file);
  detail::known_keys(m, "mtp", file, {"draft", "acceptance", "note"});
  const double k = number(m, "draft", "mtp", file);
  require(k >= 0 && k == std::floor(k) && k <= static_cast<double>(s.decode.layout.mtp_layers),
          "{}: mtp.draft = {} violates integer 0 <= draft <= the decode layout's mtp_layers = {}", file, k,
          s.decode.layout.mtp_layers);
  s.mtp_draft = static_cast<int64_t>(k);
  s.acceptance = number(m, "acceptance", "mtp", file);
  require(s.acceptance >= 0 && s.acceptance <= 1, "{}: mtp.acceptance = {} violates 0 <= p <= 1", file, s.acceptance);
  const nlohmann::json& r = detail::field(j, "requests", "", file);
  detail::known_keys(r, "requests", file, {"input", "output", "note"});
  s.input = positive_int(r, "input", "requests", file);
  s.output = positive_int(r, "output", "requests", file);
  require(s.output >= 2, "{}: requests.output = {} violates output >= 2 (one token from prefill, the rest decoded)",
          file, s.output);
  const nlohmann::json& kv = detail::field(j, "kv_transfer", "", file);
  detail::known_keys(kv, "kv_transfer", file, {"GBps", "latency_ms", "note"});
  s.kv_GBps = number(kv, "GBps", "kv_transfer", file);
  require(s.kv_GBps > 0, "{}: kv_transfer.GBps = {} violates > 0", file, s.kv_GBps);
  s.kv_latency_ms = kv.contains("latency_ms") ? number(kv, "latency_ms", "kv_transfer", file) : 0;
  require(s.kv_latency_ms >= 0, "{}: kv_transfer.latency_ms = {} violates >= 0", file, s.kv_latency_ms);
  s.tpot_limit_ms = number(j, "tpot_limit_ms", "", file);
  require(std::isfinite(s.tpot_limit_ms) && s.tpot_limit_ms > 0, "{}: tpot_limit_ms = {} violates > 0", file,
          s.tpot_limit_ms);
  if (j.contains("search")) {
    const nlohmann::json& q = detail::field(j, "search", "", file);
    detail::known_keys(q, "search", file, {"max_per_card", "waves", "seed", "note"});
    if (q.contains("max_per_card")) s.max_per_card = positive_int(q, "max_per_card", "search", file);
    if (q.contains("waves")) s.waves = positive_int(q, "waves", "search", file);
    require(s.waves >= 3, "{}: search.waves = {} violates waves >= 3 (the batch fills, runs full, drains)",
            file, s.waves);
    if (q.contains("seed")) s.seed = static_cast<uint64_t>(positive_int(q, "seed", "search", file));
  }
  if (j.contains("report")) {
    const nlohmann::json& p = detail::field(j, "report", "", file);
    detail::known_keys(p, "report", file, {"decode_tokens_per_card", "prefill_tokens_per_card", "per_card", "note"});
    s.report_decode_id = p.value("decode_tokens_per_card", std::string());
    s.report_prefill_id = p.value("prefill_tokens_per_card", std::string());
    if (p.contains("per_card")) s.report_per_card = positive_int(p, "per_card", "report", file);
  }
  return s;
}

inline Serving load_serving(const std::filesystem::path& file, const std::filesystem::path& data_root) {
  require(std::filesystem::exists(file), "deploy: {}: no such file", file.string());
  nlohmann::json j;
  try {
    j = read_json(file);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", file.string(), e.what()));
  }
  return parse_serving(j, file.filename().string(), data_root);
}

// Decode steps a request of `output` tokens needs after its first token, each step emitting 1 + the accepted
// prefix of k drafts (each accepted with probability p, a rejection ends the chain). `ignore_acceptance` is the
// planted bug the tests catch: every step emits one token, as if no draft were ever accepted.
inline int64_t mtp_steps(int64_t output, int64_t k, double p, Rng& rng, bool ignore_acceptance = false) {
  int64_t left = output - 1, steps = 0;
  while (left > 0) {
    int64_t emitted = 1;
    for (int64_t i = 0; i < k && !ignore_acceptance; ++i) {
      if (rng.uniform() >= p) break;
      ++emitted;
    }
    left -= emitted, ++steps;
  }
  return steps;
}

// The layouts as the simulator's StepModel.
class LayoutStepModel final : public disagg::StepModel {
 public:
  explicit LayoutStepModel(const Serving& s) : s_(s), d_(s.decode.layout), p_(s.prefill.layout) {}
  // Requests per card and mean real context of a decode batch of n requests at simulated context sum `sum_ctx`.
  std::pair<int64_t, double> decode_shape(const disagg::BatchStats& b) const {
    const int64_t n = std::max<int64_t>(1, b.n), C = s_.decode.layout.cards;
    const double sim_ctx = b.n > 0 ? b.sum_tokens / static_cast<double>(b.n) : static_cast<double>(s_.input);
    const double in = static_cast<double>(s_.input);
    return {(n + C - 1) / C, std::max(1.0, in + s_.tokens_per_step() * (sim_ctx - in))};
  }
  double decode_ms(const disagg::BatchStats& b) const override {
    const auto [r, ctx] = decode_shape(b);
    d_.work.requests_per_card = r;
    d_.work.tokens_per_card = r * (1 + s_.mtp_draft);
    d_.work.mtp_draft = s_.mtp_draft, d_.work.acceptance = s_.acceptance;
    d_.work.context = std::max<int64_t>(1, std::llround(ctx));
    return layout_step_ms(d_, s_.decode.step);
  }
  double prefill_ms(const disagg::BatchStats& b) const override {
    const int64_t C = s_.prefill.layout.cards, n = std::max<int64_t>(1, b.n);
    const int64_t tokens = std::max<int64_t>(1, std::llround(std::ceil(b.sum_tokens / static_cast<double>(C))));
    p_.work.requests_per_card = (n + C - 1) / C;
    p_.work.tokens_per_card = tokens;
    p_.work.context = std::max<int64_t>(1, tokens / p_.work.requests_per_card);
    return layout_step_ms(p_, s_.prefill.step);
  }
  std::string describe() const override {
    return fmt::format("deployment layouts: decode {} ({} cards, {}), prefill {} ({} cards, {})", s_.decode.layout_name,
                       s_.decode.layout.cards, step_kind_name(s_.decode.step), s_.prefill.layout_name,
                       s_.prefill.layout.cards, step_kind_name(s_.prefill.step));
  }

 private:
  const Serving& s_;
  mutable Layout d_, p_;  // scratch: the simulator is single-threaded, one model per run
};

}  // namespace ladder::deploy
