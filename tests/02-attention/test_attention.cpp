// tests/02-attention/test_attention.cpp -- stage 02 references on the golden cases: every registered rung (and
// the tiled rungs at awkward tile sizes) vs the fp64 oracle, in float32 and float64, forward outputs
// and intermediates (O, L, m, D) and gradients; the committed goldens regenerated from their seeds.
//
// The judge never runs code a lab student edits (tiled.hpp, recompute.hpp): the fp64 oracle is the
// committed files (or, for a sampled case, the naive fp64 rung of naive.hpp), the float baselines are
// the naive rungs, and the backward rungs get O and L from the naive float forward. The drift test
// (a test of the oracle) is in the test suite "judge", which a lab leaves out. In a lab's test run the
// golden tests run only the student's rungs, tiled and backward_recompute (test::lab_runs).
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <tuple>

#include "golden_util.hpp"
#include "lab_check.hpp"
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/02-attention/golden.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/02-attention/golden_cases.hpp"
#include "test_attention_util.hpp"

using namespace ladder;
using namespace ladder::attention;
namespace fs = std::filesystem;

namespace {
Coverage coverage;

struct Case {
  const GoldenCase* c;
  GoldenInputs in;
  GoldenOracle o;
};

// A full case is read from its files (inputs and oracle as committed); a sampled case is rebuilt from
// its seed (the drift test below checks the committed sample against the same computation). Once per
// case and process: the forward and the backward test share it (the fp64 oracle of a sampled case is
// most of a lab's test time).
Case load_case(const std::string& name) {
  const GoldenCase& c = golden_case(name);
  const fs::path dir = test::golden_dir(kStage) / name;
  if (read_json(dir / "case.json")["stored"] != "full") {
    GoldenInputs in = golden_inputs(c);
    GoldenOracle o = golden_oracle(c, in);
    return {&c, std::move(in), std::move(o)};
  }
  // A forward-only case has no dO and no gradients: those stay empty.
  auto f4 = [&](const char* f) { return c.backward || f[0] != 'd' ? load_npy<float>(dir / f) : Array<float>(); };
  auto f8 = [&](const char* f) {
    return c.backward || (f[0] != 'd' && f[0] != 'D') ? load_npy<double>(dir / f) : Array<double>();
  };
  return {&c,
          {f4("Q.npy"), f4("K.npy"), f4("V.npy"), f4("dO.npy")},
          {f8("O.npy"), f8("L.npy"), f8("m.npy"), f8("D.npy"), f8("dQ.npy"), f8("dK.npy"), f8("dV.npy")}};
}

// A rung that does not compute the case's shape (GQA, d_v != d, a window, seqlens: problem.hpp) must refuse
// it with an error naming the constraint, never compute garbage; case.json "rungs" lists the ones that apply.
bool applies(const Rung& r, const std::string& name) {
  const nlohmann::json rungs = read_json(test::golden_dir(kStage) / name / "case.json")["rungs"];
  const bool listed = std::find(rungs.begin(), rungs.end(), r.id) != rungs.end();
  CHECK(listed == (golden_case(name).p.plain() || r.id == "naive" || r.id == "backward_naive"));
  return listed;
}
template <class F>
void refused(const std::string& rung, const std::string& name, F&& run) {
  INFO("rung " << rung << " on case " << name << " must refuse it");
  CHECK_THROWS_WITH_AS(run(), doctest::Contains("violates"), Error);
}

const Case& load(const std::string& name) {
  static std::map<std::string, Case> cases;
  auto it = cases.find(name);
  if (it == cases.end()) it = cases.emplace(name, load_case(name)).first;
  return it->second;
}

// O [B, H, Nq, d]; L, m [B, H, Nq]. `rung` names the candidate, `what` the case (and tiles, if any).
template <class T>
void check_forward(const std::string& rung, const std::string& what, const Case& k, const Forward<T>& y,
                   const Forward<float>& base) {
  constexpr bool f32 = std::is_same_v<T, float>;
  for (auto [name, o, c, b] : {std::tuple{"O", &k.o.O, &y.O, &base.O}, std::tuple{"L", &k.o.L, &y.L, &base.L},
                               std::tuple{"m", &k.o.m, &y.m, &base.m}}) {
    const test::What w{rung, f32 ? "float32" : "float64", name, what, std::string(name) == "O" ? test::kBHRC : test::kBHR};
    if constexpr (f32)
      test::check_rule(w, *o, *c, *b, test::kForward32);
    else
      test::check_rule(w, *o, *c, test::scaled_baseline(*o, *b), test::kForward64);
  }
}

template <class T>
void check_backward(const std::string& rung, const std::string& what, const Case& k, const Grads<T>& g,
                    const Grads<float>& base) {
  const Grads<double> og{k.o.dQ, k.o.dK, k.o.dV, k.o.D};
  constexpr bool f32 = std::is_same_v<T, float>;
  const char* prec = f32 ? "float32" : "float64";
  if constexpr (f32)
    test::check_gradient(rung, prec, what, og, g, base, test::kBackward32);
  else
    test::check_gradient(rung, prec, what, og, g, base, test::kBackward64);
  const test::What w{rung, prec, "D", what, test::kBHR};
  if constexpr (f32)
    test::check_rule(w, k.o.D, g.D, base.D, test::kBackward32);
  else
    test::check_rule(w, k.o.D, g.D, test::scaled_baseline(k.o.D, base.D), test::kBackward64);
}

std::string tiles_str(const Tiles& t) { return " tiles " + std::to_string(t.Br) + "x" + std::to_string(t.Bc); }

const std::vector<Tiles> kAwkwardTiles = {{16, 24}, {37, 13}, {1, 7}};
}  // namespace

TEST_CASE("every forward rung vs the fp64 oracle on every golden case (O, L, m; float32 and float64)") {
  const auto rungs = registry().stage(kStage, "ref");
  REQUIRE(rungs.size() == 5);
  for (const std::string& name : golden_case_names()) {
    CAPTURE(name);
    const Case& k = load(name);
    const Problem& p = k.c->p;
    const Array<double> Q = k.in.Q.cast<double>(), K = k.in.K.cast<double>(), V = k.in.V.cast<double>();
    const Forward<float> base = [&] {  // the rule's baseline, fixed order (core/fixed_order.hpp)
      const FixedOrder pinned;
      return run_forward<float>(&naive_forward<float>, p, k.in.Q, k.in.K, k.in.V);
    }();
    for (const Rung* r : rungs) {
      if (is_backward(*r)) continue;
      coverage.mark(*r);
      if (!test::lab_runs(r->id)) continue;
      if (!applies(*r, name)) {
        refused(r->id, name, [&] { test::forward<float>(*r, p, k.in.Q, k.in.K, k.in.V); });
        continue;
      }
      check_forward(r->id, name, k, test::forward<float>(*r, p, k.in.Q, k.in.K, k.in.V), base);
      check_forward(r->id, name, k, test::forward<double>(*r, p, Q, K, V), base);
    }
    for (const Tiles t : p.plain() ? kAwkwardTiles : std::vector<Tiles>{}) {  // many, partial, skipped tiles
      auto tiled = [t](const Problem& q, const float* a, const float* b, const float* c, float* o, float* l, float* m) {
        tiled_forward(q, a, b, c, o, l, m, t);
      };
      check_forward("tiled", name + tiles_str(t), k, run_forward<float>(tiled, p, k.in.Q, k.in.K, k.in.V), base);
    }
  }
}

TEST_CASE("every backward rung vs the fp64 oracle on every golden case (dQ, dK, dV, D; float32 and float64)") {
  for (const std::string& name : golden_case_names()) {
    CAPTURE(name);
    const Case& k = load(name);
    if (!k.c->backward) continue;  // a forward-only case (no dO)
    const Problem& p = k.c->p;
    const Array<double> Q = k.in.Q.cast<double>(), K = k.in.K.cast<double>(), V = k.in.V.cast<double>();
    const Array<double> dO = k.in.dO.cast<double>();
    // The float rungs consume a float forward's O and L, as a kernel pipeline would: the naive rung's,
    // so that a wrong forward in a lab cannot make the backward rungs fail (or pass).
    const Forward<float> f = [&] {  // the rule's baseline, fixed order (core/fixed_order.hpp)
      const FixedOrder pinned;
      return run_forward<float>(&naive_forward<float>, p, k.in.Q, k.in.K, k.in.V);
    }();
    const Grads<float> base = [&] {
      const FixedOrder pinned;
      return run_backward<float>(&naive_backward<float>, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L);
    }();
    for (const Rung* r : registry().stage(kStage, "ref")) {
      if (!is_backward(*r)) continue;
      coverage.mark(*r);
      if (!test::lab_runs(r->id)) continue;
      if (!applies(*r, name)) {
        refused(r->id, name, [&] { test::backward<float>(*r, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L); });
        continue;
      }
      check_backward(r->id, name, k, test::backward<float>(*r, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L), base);
      check_backward(r->id, name, k, test::backward<double>(*r, p, Q, K, V, k.o.O, dO, k.o.L), base);
    }
    for (const Tiles t : p.plain() ? kAwkwardTiles : std::vector<Tiles>{}) {
      auto bwd = [t](const Problem& q, const float* a, const float* b, const float* c, const float* o, const float* g,
                     const float* l, float* dq, float* dk, float* dv,
                     float* D) { recompute_backward(q, a, b, c, o, g, l, dq, dk, dv, D, t); };
      check_backward("backward_recompute", name + tiles_str(t), k,
                     run_backward<float>(bwd, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L), base);
    }
  }
}

TEST_CASE("goldens: every case regenerated from its seed equals the committed files (drift fails)" *
          doctest::test_suite("judge")) {
  test::TempDir tmp;
  const auto names = golden_case_names();
  CHECK(names.size() == 20);
  for (const std::string& name : names) {
    CAPTURE(name);
    const fs::path ref = test::golden_dir(kStage) / name, out = tmp.path / name;
    write_golden_case(name, out, false);
    const nlohmann::json a = read_json(ref / "case.json"), b = read_json(out / "case.json");
    CHECK(a == b);  // includes the sampled cases' input sums: the inputs did not drift either
    for (const std::string f : a["files"]) {
      CAPTURE(f);
      const NpyData x = read_npy(ref / f), y = read_npy(out / f);
      CHECK(x.shape == y.shape);
      CHECK(x.dtype == y.dtype);
      CHECK(x.bytes == y.bytes);  // bit-identical: the RNG and the fp64 oracle are deterministic
    }
  }
}

TEST_CASE("goldens cover the stage's shapes: every length as Nq and Nk, every head dim, causal, B x H > 1") {
  std::set<int64_t> nq, nk, d;
  bool causal = false, plain = false, multi = false, more_q = false, more_k = false;
  for (const std::string& name : golden_case_names()) {
    const Problem& p = golden_case(name).p;
    if (!p.plain()) continue;  // the oracle-only shapes: tests/02-attention/test_attention_shapes.cpp
    nq.insert(p.Nq), nk.insert(p.Nk), d.insert(p.d);
    (p.causal ? causal : plain) = true;
    multi = multi || p.heads() > 1;
    more_q = more_q || (p.causal && p.Nq > p.Nk);
    more_k = more_k || (p.causal && p.Nq < p.Nk);
  }
  const std::set<int64_t> lengths{1, 97, 113, 239, 1023, 1024, 1025};
  CHECK(nq == lengths);
  CHECK(nk == lengths);
  CHECK(d == std::set<int64_t>{32, 59, 64, 111, 128});
  CHECK((causal && plain && multi && more_q && more_k));
}

TEST_CASE("every registered reference rung of stage 02 was exercised") {
  CHECK(coverage.missing(registry(), kStage, "ref").empty());
}
