// tests/06-disagg/test_techniques.cpp -- stage 06, part 3: the Huawei report's Sec. 5-6 techniques as switches
// on the step model (ladder/06-disagg/deploy/techniques.hpp). Each switch must move the step in the direction and
// by the mechanism it names: FlashComm cuts the MLA bytes by the counted factor (ab + cb) / (2 ab); the
// concurrency of int8 activations and scales changes the AllGather bytes by (h cb + 4) / (h ab); an overlap never
// saves more than the shorter of the ops it overlaps, never makes the step longer, never beats the critical path;
// fused Dispatch / Combine is a no-op on an AllGather layout and removes exactly the permutation copies on an
// All2All one; the hierarchical pipeline moves no byte. Planted wrong switches (an overlap that double counts, a
// FlashComm that counts int8 on both halves) are fed to the same checks and must fail them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "06-disagg/plan.hpp"
#include "ladder/06-disagg/deploy/techniques.hpp"
#include "source_dir.hpp"

namespace {
using namespace ladder::deploy;
using ladder::cli::deploy06::a2_decode_72;
using ladder::cli::deploy06::a2_prefill;

Layout cm384() {
  const auto root = ladder::source_dir() / "data";
  Layout L = load_layout(root / "deployments" / "huawei-cm384-decode.json", root);
  return L;
}
bool close(double a, double b, double rel = 1e-9) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

// The graph's bounds: critical path <= step <= sum of its ops.
bool bounded(const TechniqueStep& r) { return r.critical_ms <= r.step_ms * (1 + 1e-12) && r.step_ms <= r.sum_ms * (1 + 1e-12); }

// The gate / shared-expert overlap: never slower; per MoE layer it hides at most the shorter of the two paths it
// runs side by side (the AllGathers of activations and gate results; gate + shared expert); never below the
// critical path.
bool overlap_ok(const TechniqueStep& off, const TechniqueStep& on, double moe_layers) {
  const double hideable = moe_layers * std::min(on.gather_ms + on.gate_comm_ms, on.gate_ms + on.shared_ms);
  return on.step_ms <= off.step_ms && off.step_ms - on.step_ms <= hideable * (1 + 1e-9) + 1e-12 && bounded(on);
}
// FlashComm: the MLA bytes, both levels, change by the counted factor.
bool flashcomm_ok(const Layout& L, const TechniqueStep& off, const TechniqueStep& on) {
  const double f = (L.bytes.activations + L.bytes.comm) / (2 * L.bytes.activations);
  return close(on.mla_comm.intra, f * off.mla_comm.intra) && close(on.mla_comm.inter, f * off.mla_comm.inter) &&
         on.step_ms < off.step_ms;
}
}  // namespace

TEST_CASE("techniques: every combination of switches stays within the graph's bounds") {
  for (const Layout& L : {a2_decode_72(), a2_prefill(), cm384()}) {
    CAPTURE(L.name);
    for (int bits = 0; bits < 128; ++bits) {
      CAPTURE(bits);
      const Switches s{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, (bits & 16) != 0,
                       (bits & 32) != 0, (bits & 64) != 0};
      const TechniqueStep r = technique_step(L, s);
      CHECK(r.step_ms > 0);
      CHECK(bounded(r));
      if (!s.gate_overlap) CHECK(close(r.step_ms, r.sum_ms));  // every op waits for the previous one
    }
  }
}

TEST_CASE("techniques: FlashComm cuts the prefill MLA bytes by (ab + cb) / (2 ab) = 0.75; no-op in DP decode") {
  Switches on = Switches::all();
  on.tp_dp_conversion = false;
  Switches off = on;
  off.flashcomm = false;
  const Layout P = a2_prefill();
  const TechniqueStep a = technique_step(P, off), b = technique_step(P, on);
  CHECK(a.mla_comm.total() > 0);
  CHECK(flashcomm_ok(P, a, b));
  CHECK(close(b.mla_comm.total() / a.mla_comm.total(), 0.75));
  // Planted: a FlashComm that sends the ReduceScatter in int8 too (factor 0.5) fails the same check.
  TechniqueStep wrong = b;
  wrong.mla_comm.intra = 0.5 * a.mla_comm.intra, wrong.mla_comm.inter = 0.5 * a.mla_comm.inter;
  CHECK_FALSE(flashcomm_ok(P, a, wrong));
  const Layout D = a2_decode_72();
  CHECK(technique_step(D, off).step_ms == technique_step(D, on).step_ms);
  CHECK(technique_step(D, on).mla_comm.total() == 0);
}

TEST_CASE("techniques: the TP <-> DP conversion cuts the prefill MLA's intra-node bytes and its step") {
  const Layout P = a2_prefill();
  Switches on = Switches::all(), off = on;
  off.tp_dp_conversion = false;
  const TechniqueStep a = technique_step(P, off), b = technique_step(P, on);
  CHECK(b.mla_comm.intra < a.mla_comm.intra);
  CHECK(b.step_ms < a.step_ms);
  CHECK(b.mla_ms < a.mla_ms);  // the replicated down projections and the TP16 output projection are gone
}

TEST_CASE("techniques: int8 + scale before the AllGather changes its bytes by (h cb + 4) / (h ab)") {
  const Layout D = a2_decode_72();
  Switches on = Switches::all(), off = on;
  off.comm_comm = false;
  const TechniqueStep a = technique_step(D, off), b = technique_step(D, on);
  const double h = static_cast<double>(D.model.hidden);
  const double f = (h * D.bytes.comm + 4) / (h * D.bytes.activations);
  // The MoE AllGather's time scales by f at either level (bytes / a fixed bandwidth; the same level binds).
  CHECK(close(b.gather_ms, f * a.gather_ms));
  CHECK(b.comm.total() < a.comm.total());
  CHECK(b.step_ms < a.step_ms);
}

TEST_CASE("techniques: prefetch takes at most the ReduceScatter's time at HBM rate, and only MLA bytes") {
  for (const Layout& L : {a2_decode_72(), a2_prefill()}) {
    CAPTURE(L.name);
    Switches on = Switches::all(), off = on;
    off.prefetch = false;
    const TechniqueStep a = technique_step(L, off), b = technique_step(L, on);
    CHECK(b.prefetched_bytes > 0);
    CHECK(b.prefetched_bytes <= b.scatter_ms * 1e-3 * L.gpu.hbm_GBps * 1e9 * (1 + 1e-12));
    CHECK(b.mla_after_prefetch_ms <= b.mla_ms);
    CHECK(b.step_ms <= a.step_ms);
    // Saves at most the prefetched bytes' HBM time in every MLA that follows a MoE layer.
    const double bound = static_cast<double>(L.moe_layers() - 1) * 1e3 * b.prefetched_bytes / (L.gpu.hbm_GBps * 1e9);
    CHECK(a.step_ms - b.step_ms <= bound * (1 + 1e-9));
    CHECK(a.comm.total() == b.comm.total());
  }
}

TEST_CASE("techniques: the gate / shared-expert overlap; a planted double-counting overlap fails") {
  for (const Layout& L : {a2_decode_72(), a2_prefill(), cm384()}) {
    CAPTURE(L.name);
    Switches on = Switches::all(), off = on;
    off.gate_overlap = false;
    const TechniqueStep a = technique_step(L, off), b = technique_step(L, on);
    const double moe = static_cast<double>(L.moe_layers());
    CHECK(b.step_ms < a.step_ms);
    CHECK(overlap_ok(a, b, moe));
    // Planted: the hidden time subtracted twice (the overlapped op counted on both streams).
    TechniqueStep twice = b;
    twice.step_ms = b.step_ms - (a.step_ms - b.step_ms);
    CHECK_FALSE(overlap_ok(a, twice, moe));
  }
}

TEST_CASE("techniques: fused Dispatch / Combine is a no-op on AllGather layouts, removes the copies on All2All") {
  Switches off{}, on{};
  on.fused_dispatch = true;
  for (const Layout& L : {a2_decode_72(), a2_prefill()}) {
    CHECK(technique_step(L, off).step_ms == technique_step(L, on).step_ms);
    CHECK(technique_step(L, off).permute_bytes == 0);
  }
  const Layout C = cm384();
  const TechniqueStep a = technique_step(C, off), b = technique_step(C, on);
  CHECK(a.permute_bytes > 0);
  CHECK(b.permute_bytes == 0);
  CHECK(close(a.step_ms - b.step_ms, 2 * static_cast<double>(C.moe_layers()) * a.permute_ms, 1e-9));
}

TEST_CASE("techniques: the hierarchical pipeline moves no byte and never lengthens the step") {
  for (const Layout& L : {a2_decode_72(), a2_prefill()}) {
    Switches on = Switches::all(), off = on;
    off.hierarchical = false;
    const TechniqueStep a = technique_step(L, off), b = technique_step(L, on);
    CHECK(a.comm.intra == b.comm.intra);
    CHECK(a.comm.inter == b.comm.inter);
    CHECK(b.step_ms < a.step_ms);  // both levels carry bytes on these multi-node layouts
  }
}

TEST_CASE("techniques: the table of `ladder reproduce 06-disagg`: every technique, claims from data/papers") {
  const auto rows = ladder::cli::deploy06::technique_rows();
  REQUIRE(rows.size() == 7);
  const std::string md = ladder::cli::deploy06::techniques_table();
  for (const auto& r : rows) {
    CAPTURE(r.name);
    CHECK(md.find(r.name) != std::string::npos);
    CHECK(!r.why.empty());
    for (int i = 0; i < 2; ++i) CHECK(r.gain(i) >= 0);  // no switch of the report makes a step slower
  }
  for (const char* claim : {"-25 %", "-71 %", "+15 %", "+10 %", "8 to 20 %"}) {
    CAPTURE(claim);
    CHECK(md.find(claim) != std::string::npos);
  }
  CHECK(md.find("restated") != std::string::npos);
  CHECK(md.find("derived") != std::string::npos);
  CHECK(md.find("reproduc") == std::string::npos);
}
