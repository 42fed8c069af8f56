// tests/test_02_attention.cpp -- stage 02 references on the golden cases: every registered rung (and
// the tiled rungs at awkward tile sizes) vs the fp64 oracle, in float32 and float64, forward outputs
// and intermediates (O, L, m, D) and gradients; the committed goldens regenerated from their seeds.
#include <doctest/doctest.h>

#include <set>
#include <tuple>

#include "golden_util.hpp"
#include "ladder/attention.hpp"
#include "ladder/attention/golden.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/golden_cases.hpp"
#include "test_02_attention_util.hpp"

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
// its seed (the drift test below checks the committed sample against the same computation).
Case load(const std::string& name) {
  const GoldenCase& c = golden_case(name);
  const fs::path dir = test::golden_dir(kStage) / name;
  if (read_json(dir / "case.json")["stored"] != "full") {
    GoldenInputs in = golden_inputs(c);
    GoldenOracle o = golden_oracle(c, in);
    return {&c, std::move(in), std::move(o)};
  }
  auto f4 = [&](const char* f) { return load_npy<float>(dir / f); };
  auto f8 = [&](const char* f) { return load_npy<double>(dir / f); };
  return {&c,
          {f4("Q.npy"), f4("K.npy"), f4("V.npy"), f4("dO.npy")},
          {f8("O.npy"), f8("L.npy"), f8("m.npy"), f8("D.npy"), f8("dQ.npy"), f8("dK.npy"), f8("dV.npy")}};
}

void check_forward(const Case& k, const Forward<float>& y, const Forward<float>& base) {
  for (auto [name, o, c, b] : {std::tuple{"O", &k.o.O, &y.O, &base.O}, std::tuple{"L", &k.o.L, &y.L, &base.L},
                               std::tuple{"m", &k.o.m, &y.m, &base.m}}) {
    CAPTURE(name);
    const CompareReport r = compare(*o, *c, *b, test::kForward32);
    CHECK_MESSAGE(r.pass, r.text());
  }
}

void check_forward64(const Case& k, const Forward<double>& y, const Forward<float>& base) {
  for (auto [name, o, c, b] : {std::tuple{"O", &k.o.O, &y.O, &base.O}, std::tuple{"L", &k.o.L, &y.L, &base.L},
                               std::tuple{"m", &k.o.m, &y.m, &base.m}}) {
    CAPTURE(name);
    const CompareReport r = compare(*o, *c, test::scaled_baseline(*o, *b), test::kForward64);
    CHECK_MESSAGE(r.pass, r.text());
  }
}

template <class T>
void check_backward(const Case& k, const Grads<T>& g, const Grads<float>& base) {
  const Grads<double> og{k.o.dQ, k.o.dK, k.o.dV, k.o.D};
  const Array<double> oracle = test::gradient(og);
  const Array<float> b = test::gradient(base);
  const bool f32 = std::is_same_v<T, float>;
  const Tolerance tol = f32 ? test::kBackward32 : test::kBackward64;
  const CompareReport r = f32 ? compare(oracle, test::gradient(g), b, tol)
                              : compare(oracle, test::gradient(g), test::scaled_baseline(oracle, b), tol);
  CHECK_MESSAGE(r.pass, "gradient (dQ | dK | dV): ", r.text());
  const CompareReport rd =
      f32 ? compare(k.o.D, g.D, base.D, tol) : compare(k.o.D, g.D, test::scaled_baseline(k.o.D, base.D), tol);
  CHECK_MESSAGE(rd.pass, "D: ", rd.text());
}

const std::vector<Tiles> kAwkwardTiles = {{16, 24}, {37, 13}, {1, 7}};
}  // namespace

TEST_CASE("every forward rung vs the fp64 oracle on every golden case (O, L, m; float32 and float64)") {
  const auto rungs = registry().stage(kStage, "ref");
  REQUIRE(rungs.size() == 5);
  for (const std::string& name : golden_case_names()) {
    CAPTURE(name);
    const Case k = load(name);
    const Problem& p = k.c->p;
    const Array<double> Q = k.in.Q.cast<double>(), K = k.in.K.cast<double>(), V = k.in.V.cast<double>();
    const Forward<float> base = run_forward<float>(&naive_forward<float>, p, k.in.Q, k.in.K, k.in.V);
    for (const Rung* r : rungs) {
      if (is_backward(*r)) continue;
      CAPTURE(r->key());
      coverage.mark(*r);
      check_forward(k, test::forward<float>(*r, p, k.in.Q, k.in.K, k.in.V), base);
      check_forward64(k, test::forward<double>(*r, p, Q, K, V), base);
    }
    for (const Tiles t : kAwkwardTiles) {  // many tiles, partial tiles, skipped tiles
      CAPTURE(t.Br);
      CAPTURE(t.Bc);
      auto tiled = [t](const Problem& q, const float* a, const float* b, const float* c, float* o, float* l, float* m) {
        tiled_forward(q, a, b, c, o, l, m, t);
      };
      check_forward(k, run_forward<float>(tiled, p, k.in.Q, k.in.K, k.in.V), base);
    }
  }
}

TEST_CASE("every backward rung vs the fp64 oracle on every golden case (dQ, dK, dV, D; float32 and float64)") {
  for (const std::string& name : golden_case_names()) {
    CAPTURE(name);
    const Case k = load(name);
    const Problem& p = k.c->p;
    const Array<double> Q = k.in.Q.cast<double>(), K = k.in.K.cast<double>(), V = k.in.V.cast<double>();
    const Array<double> dO = k.in.dO.cast<double>();
    // The float rungs consume the float forward's O and L, as a kernel pipeline would.
    const Forward<float> f = run_forward<float>(&tiled_forward_default<float>, p, k.in.Q, k.in.K, k.in.V);
    const Grads<float> base = run_backward<float>(&naive_backward<float>, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L);
    for (const Rung* r : registry().stage(kStage, "ref")) {
      if (!is_backward(*r)) continue;
      CAPTURE(r->key());
      coverage.mark(*r);
      check_backward(k, test::backward<float>(*r, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L), base);
      check_backward(k, test::backward<double>(*r, p, Q, K, V, k.o.O, dO, k.o.L), base);
    }
    for (const Tiles t : kAwkwardTiles) {
      CAPTURE(t.Br);
      CAPTURE(t.Bc);
      auto bwd = [t](const Problem& q, const float* a, const float* b, const float* c, const float* o, const float* g,
                     const float* l, float* dq, float* dk, float* dv,
                     float* D) { recompute_backward(q, a, b, c, o, g, l, dq, dk, dv, D, t); };
      check_backward(k, run_backward<float>(bwd, p, k.in.Q, k.in.K, k.in.V, f.O, k.in.dO, f.L), base);
    }
  }
}

TEST_CASE("goldens: every case regenerated from its seed equals the committed files (drift fails)") {
  test::TempDir tmp;
  const auto names = golden_case_names();
  CHECK(names.size() == 11);
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

TEST_CASE("goldens cover the issue's shapes: every length as Nq and Nk, every head dim, causal, B x H > 1") {
  std::set<int64_t> nq, nk, d;
  bool causal = false, plain = false, multi = false, more_q = false, more_k = false;
  for (const std::string& name : golden_case_names()) {
    const Problem& p = golden_case(name).p;
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
