// tests/02-attention/test_attention_numerics.cpp -- stage 02: the naive backward against finite differences, the
// defined masked rows, deliberately broken candidates the rule must reject, thread-count independence,
// errors naming the parameter, and the accuracy cost of Fig. 8's per-step normalisation.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "golden_util.hpp"
#include "ladder/02-attention/attention.hpp"
#include "ladder/02-attention/golden.hpp"
#include "test_attention_util.hpp"

using namespace ladder;
using namespace ladder::attention;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

double loss(const Problem& p, const Array<double>& Q, const Array<double>& K, const Array<double>& V,
            const Array<double>& G) {  // l = sum(O o G), so dl/dO = G
  const Forward<double> f = run_forward<double>(&naive_forward<double>, p, Q, K, V);
  double s = 0;
  for (int64_t i = 0; i < G.size(); ++i) s += f.O.data[i] * G.data[i];
  return s;
}

// The tiled forward in a few lines (non-causal, B x B tiles), with the §3.7 merge factor e^{m_old - m_new}
// switchable: rescale = false is the classic bug (state from earlier tiles kept at a stale max).
Forward<float> tiled_sketch(const Problem& p, const GoldenInputs& in, int64_t B, bool rescale) {
  Forward<float> r{Array<float>(in.Q.shape), Array<float>({p.B, p.H, p.Nq}), Array<float>({p.B, p.H, p.Nq})};
  for (int64_t bh = 0; bh < p.heads(); ++bh)
    for (int64_t r0 = 0; r0 < p.Nq; r0 += B) {
      const int64_t br = std::min(B, p.Nq - r0);
      Mat<float> q = float(p.scale) * ConstMatMap<float>(&in.Q.data[(bh * p.Nq + r0) * p.d], br, p.d);
      Mat<float> o = Mat<float>::Zero(br, p.d);
      Vec<float> m = Vec<float>::Constant(br, -INFINITY), l = Vec<float>::Zero(br);
      for (int64_t c0 = 0; c0 < p.Nk; c0 += B) {
        const int64_t bc = std::min(B, p.Nk - c0);
        ConstMatMap<float> k(&in.K.data[(bh * p.Nk + c0) * p.d], bc, p.d),
            v(&in.V.data[(bh * p.Nk + c0) * p.d], bc, p.d);
        Mat<float> s = q * k.transpose();
        for (int64_t i = 0; i < br; ++i) {
          const float m_new = std::max(m(i), s.row(i).maxCoeff());
          const float alpha = rescale ? std::exp(m(i) - m_new) : 1.0f;
          s.row(i) = (s.row(i).array() - m_new).exp().matrix();
          l(i) = alpha * l(i) + s.row(i).sum();
          o.row(i) *= alpha;
          m(i) = m_new;
        }
        o += s * v;
      }
      for (int64_t i = 0; i < br; ++i) {
        MatMap<float>(&r.O.data[(bh * p.Nq + r0 + i) * p.d], 1, p.d) = o.row(i) / l(i);
        r.L.data[bh * p.Nq + r0 + i] = m(i) + std::log(l(i));
      }
    }
  return r;
}

// Causal attention row by row with the mask "query i attends key j iff j <= i + offset": offset = Nk - Nq
// is the bottom-right rule; offset = 0 aligns top-left (FlashAttention-2 before v2.1), a classic bug.
Array<float> causal_sketch(const Problem& p, const GoldenInputs& in, int64_t offset) {
  Array<float> O(in.Q.shape);
  for (int64_t bh = 0; bh < p.heads(); ++bh)
    for (int64_t i = 0; i < p.Nq; ++i) {
      const int64_t n = std::clamp<int64_t>(i + offset + 1, 0, p.Nk);
      if (n == 0) continue;  // fully masked: O = 0
      Eigen::Map<const RowVec<float>> q(&in.Q.data[(bh * p.Nq + i) * p.d], p.d);
      ConstMatMap<float> k(&in.K.data[bh * p.Nk * p.d], n, p.d), v(&in.V.data[bh * p.Nk * p.d], n, p.d);
      RowVec<float> s = float(p.scale) * (q * k.transpose());
      s = (s.array() - s.maxCoeff()).exp().matrix();
      MatMap<float>(&O.data[(bh * p.Nq + i) * p.d], 1, p.d) = (s / s.sum()) * v;
    }
  return O;
}
}  // namespace

TEST_CASE("naive backward = central finite differences of sum(O o G) in fp64; D = rowsum(dO o O)") {
  struct Shape5 {
    int64_t Nq, Nk;
    bool causal;
  };
  for (const Shape5 s : {Shape5{5, 7, false}, Shape5{5, 7, true}, Shape5{7, 5, true}}) {
    CAPTURE(s.Nq);
    CAPTURE(s.Nk);
    CAPTURE(s.causal);
    const Problem p = Problem::make(1, 2, s.Nq, s.Nk, 4, s.causal);
    Rng rng(31);
    Array<double> Q = test::randn<double>(rng, {1, 2, s.Nq, 4}), K = test::randn<double>(rng, {1, 2, s.Nk, 4});
    Array<double> V = test::randn<double>(rng, {1, 2, s.Nk, 4}), G = test::randn<double>(rng, {1, 2, s.Nq, 4});
    const Forward<double> f = run_forward<double>(&naive_forward<double>, p, Q, K, V);
    const Grads<double> g = run_backward<double>(&naive_backward<double>, p, Q, K, V, f.O, G, f.L);
    // h = 1e-5: truncation h^2 |l'''| ~ 1e-9 and cancellation eps |l| / h ~ 1e-10 are far below the bound
    // 1e-7, and any wrong term of the gradient formulas is of order 1.
    const double h = 1e-5, bound = 1e-7;
    double largest = 0;
    for (auto [X, dX] : {std::pair{&Q, &g.dQ}, std::pair{&K, &g.dK}, std::pair{&V, &g.dV}})
      for (int64_t i = 0; i < X->size(); ++i) {
        const double x = X->data[i];
        X->data[i] = x + h;
        const double up = loss(p, Q, K, V, G);
        X->data[i] = x - h;
        const double down = loss(p, Q, K, V, G);
        X->data[i] = x;
        CHECK(std::abs((up - down) / (2 * h) - dX->data[i]) <= bound);
        largest = std::max(largest, std::abs(dX->data[i]));
      }
    CHECK(largest > 0.1);  // not trivially zero
    for (int64_t row = 0; row < p.heads() * p.Nq; ++row) {
      double dot = 0;
      for (int64_t j = 0; j < p.d; ++j) dot += G.data[row * p.d + j] * f.O.data[row * p.d + j];
      CHECK(g.D.data[row] == doctest::Approx(dot).epsilon(1e-12).scale(1));
    }
  }
}

TEST_CASE("fully masked rows (causal, Nq > Nk): O = 0, L = m = -inf, dQ = 0, D = 0 in every rung") {
  const GoldenCase& c = golden_case("q113_k97_d59_causal");
  const Problem& p = c.p;
  const GoldenInputs in = golden_inputs(c);
  const int64_t masked = p.Nq - p.Nk;  // rows i < Nq - Nk see no key
  // One check per rung and output: the first row that breaks the rule, and how many do (a missing
  // l = 0 guard breaks every element of these rows: one line, not one per element).
  const auto rows_obey = [&](const std::string& rung, const std::string& output, const std::string& rule,
                             auto&& bad_row) {
    int64_t first = -1, n = 0;
    for (int64_t bh = 0; bh < p.heads(); ++bh)
      for (int64_t i = 0; i < p.Nq; ++i)
        if (bad_row(bh * p.Nq + i, i)) {
          if (first < 0) first = bh * p.Nq + i;
          ++n;
        }
    CHECK_MESSAGE(n == 0, "rung " << rung << " (float32), output " << output << ", case " << c.name << " (rows 0.."
                  << masked - 1 << " fully masked): first bad row at [bh " << first / p.Nq << ", row " << first % p.Nq
                  << "] of [" << p.heads() << ", " << p.Nq << "]: " << rule << "; " << n << " of " << p.heads() * p.Nq
                  << " rows bad");
  };
  const auto zero_row = [&](const Array<float>& a, int64_t row) {
    for (int64_t j = 0; j < p.d; ++j)
      if (!(a.data[row * p.d + j] == 0.0f)) return false;
    return true;
  };
  for (const Rung* r : registry().stage(kStage, "ref")) {
    CAPTURE(r->key());
    const Forward<float> f = run_forward<float>(&naive_forward<float>, p, in.Q, in.K, in.V);
    if (is_backward(*r)) {
      const Grads<float> g = test::backward<float>(*r, p, in.Q, in.K, in.V, f.O, in.dO, f.L);
      rows_obey(r->id, "D", "D = 0 on a fully masked row",
                [&](int64_t row, int64_t i) { return i < masked && !(g.D.data[row] == 0.0f); });
      rows_obey(r->id, "dQ", "dQ = 0 on a fully masked row",
                [&](int64_t row, int64_t i) { return i < masked && !zero_row(g.dQ, row); });
      continue;
    }
    const Forward<float> y = test::forward<float>(*r, p, in.Q, in.K, in.V);
    rows_obey(r->id, "L", "L = -inf on the fully masked rows and only there",
              [&](int64_t row, int64_t i) { return (i < masked) != (y.L.data[row] == -kInf); });
    rows_obey(r->id, "m", "m = -inf on the fully masked rows and only there",
              [&](int64_t row, int64_t i) { return (i < masked) != (y.m.data[row] == -kInf); });
    rows_obey(r->id, "O", "O = 0 on a fully masked row",
              [&](int64_t row, int64_t i) { return i < masked && !zero_row(y.O, row); });
  }
}

TEST_CASE("one key: O = V exactly; a key seen by one row gets exactly that row's dO as dV") {
  const GoldenInputs one = golden_inputs(golden_case("q1_k1_d32"));
  const Problem p1 = golden_case("q1_k1_d32").p;
  const GoldenCase& c = golden_case("q239_k1_d64_causal");
  const GoldenInputs in = golden_inputs(c);
  for (const Rung* r : registry().stage(kStage, "ref")) {
    CAPTURE(r->key());
    if (!is_backward(*r)) {
      CHECK(test::forward<float>(*r, p1, one.Q, one.K, one.V).O.data == one.V.data);
      continue;
    }
    const Forward<float> f = run_forward<float>(&naive_forward<float>, c.p, in.Q, in.K, in.V);
    const Grads<float> g = test::backward<float>(*r, c.p, in.Q, in.K, in.V, f.O, in.dO, f.L);
    for (int64_t bh = 0; bh < c.p.heads(); ++bh)
      for (int64_t j = 0; j < c.p.d; ++j)
        CHECK(g.dV.data[bh * c.p.d + j] == in.dO.data[(bh * c.p.Nq + c.p.Nq - 1) * c.p.d + j]);
  }
}

TEST_CASE("a tiled forward without the rescale e^{m_old - m_new} is rejected; with it, accepted") {
  const GoldenCase& c = golden_case("q97_k97_d64_peaky");
  const GoldenInputs in = golden_inputs(c);
  const GoldenOracle o = golden_oracle(c, in);
  const Forward<float> base = run_forward<float>(&naive_forward<float>, c.p, in.Q, in.K, in.V);
  const Forward<float> good = tiled_sketch(c.p, in, 16, true), bad = tiled_sketch(c.p, in, 16, false);
  CHECK(compare(o.O, good.O, base.O, test::kForward32).pass);
  CHECK(compare(o.L, good.L, base.L, test::kForward32).pass);
  const CompareReport r = compare(o.O, bad.O, base.O, test::kForward32);
  CHECK_FALSE(r.pass);
  CHECK(r.pct_within < 50);  // not a near miss: most of the output is wrong
  CHECK_FALSE(compare(o.L, bad.L, base.L, test::kForward32).pass);
}

TEST_CASE("a causal mask aligned top-left instead of bottom-right is rejected (Nq < Nk and Nq > Nk)") {
  for (const std::string name : {"q97_k113_d32_causal", "q113_k97_d59_causal"}) {
    CAPTURE(name);
    const GoldenCase& c = golden_case(name);
    const GoldenInputs in = golden_inputs(c);
    const GoldenOracle o = golden_oracle(c, in);
    const Array<float> base = run_forward<float>(&naive_forward<float>, c.p, in.Q, in.K, in.V).O;
    CHECK(compare(o.O, causal_sketch(c.p, in, c.p.Nk - c.p.Nq), base, test::kForward32).pass);
    CHECK_FALSE(compare(o.O, causal_sketch(c.p, in, 0), base, test::kForward32).pass);
  }
}

TEST_CASE("results do not depend on the OpenMP thread count (bit-identical)") {
  const GoldenCase& c = golden_case("q113_k97_d59_causal");
  const GoldenInputs in = golden_inputs(c);
  const Forward<float> f = run_forward<float>(&naive_forward<float>, c.p, in.Q, in.K, in.V);
  const std::string what = c.name + " (1 thread vs 2)";
  for (const Rung* r : registry().stage(kStage, "ref")) {
    CAPTURE(r->key());
    if (is_backward(*r)) {
      Grads<float> a, b;
      test::with_threads(1, [&] { a = test::backward<float>(*r, c.p, in.Q, in.K, in.V, f.O, in.dO, f.L); });
      test::with_threads(2, [&] { b = test::backward<float>(*r, c.p, in.Q, in.K, in.V, f.O, in.dO, f.L); });
      const Array<float> ga = test::gradient(a), gb = test::gradient(b);
      test::check_bit_identical<float>({r->id, "float32", "dQ|dK|dV", what, {"b", "h", "i"}}, ga.data, gb.data, ga.shape,
                                       "1 thread", "2 threads");
      test::check_bit_identical<float>({r->id, "float32", "D", what, test::kBHR}, a.D.data, b.D.data, a.D.shape,
                                       "1 thread", "2 threads");
    } else {
      Forward<float> a, b;
      test::with_threads(1, [&] { a = test::forward<float>(*r, c.p, in.Q, in.K, in.V); });
      test::with_threads(2, [&] { b = test::forward<float>(*r, c.p, in.Q, in.K, in.V); });
      test::check_bit_identical<float>({r->id, "float32", "O", what, test::kBHRC}, a.O.data, b.O.data, a.O.shape,
                                       "1 thread", "2 threads");
      test::check_bit_identical<float>({r->id, "float32", "L", what, test::kBHR}, a.L.data, b.L.data, a.L.shape,
                                       "1 thread", "2 threads");
    }
  }
}

TEST_CASE("Fig. 8's per-step normalisation costs accuracy that the deferred form (tiled) does not") {
  // o' is multiplied by d'_{i-1} e^{m_{i-1}-m_i} / d'_i at every key: N roundings per output element,
  // against about log N rescales in the tiled rung. Measured, not assumed: flash's error is the larger.
  const Problem p = Problem::make(1, 1, 1024, 1024, 64);
  Rng rng(77);
  const Array<float> Q = test::randn<float>(rng, {1, 1, 1024, 64}, 3), K = test::randn<float>(rng, {1, 1, 1024, 64});
  const Array<float> V = test::randn<float>(rng, {1, 1, 1024, 64});
  const Forward<double> o =
      run_forward<double>(&naive_forward<double>, p, Q.cast<double>(), K.cast<double>(), V.cast<double>());
  const Forward<float> base = run_forward<float>(&naive_forward<float>, p, Q, K, V);
  const double e_flash =
      compare(o.O, run_forward<float>(&flash_forward<float>, p, Q, K, V).O, base.O, test::kForward32).max_abs_err;
  const double e_tiled =
      compare(o.O, run_forward<float>(&tiled_forward_default<float>, p, Q, K, V).O, base.O, test::kForward32)
          .max_abs_err;
  MESSAGE("N = 1024, peaky: max error flash ", e_flash, ", tiled ", e_tiled, ", ratio ", e_flash / e_tiled);
  CHECK_MESSAGE(e_flash > e_tiled, "rung tiled (float32), output O, case random_q1024_k1024_d64_peaky (seeded random "
                "inputs): the tiled rung's max error " << e_tiled << " must stay below the per-step normalisation's "
                << e_flash);
}

TEST_CASE("bad input raises ladder::Error naming the parameter") {
  Rng rng(5);
  const Array<float> Q = test::randn<float>(rng, {1, 2, 3, 8}), K = test::randn<float>(rng, {1, 2, 5, 8});
  const Array<float> V_bad = test::randn<float>(rng, {1, 2, 6, 8}), K_bad = test::randn<float>(rng, {1, 2, 5, 7});
  CHECK_THROWS_WITH_AS(problem_of(Q, K, V_bad, false), doctest::Contains("V.shape = [1, 2, 6, 8]"), Error);
  // d_v = 16 != d = 8 is a shape of its own (problem.hpp): the oracle's, refused by the other rungs by name.
  const Array<float> V16 = test::randn<float>(rng, {1, 2, 5, 16});
  const Problem p16 = problem_of(Q, K, V16, false);
  CHECK(run_forward<float>(&naive_forward<float>, p16, Q, K, V16).O.shape == Shape{1, 2, 3, 16});
  CHECK_THROWS_WITH_AS(run_forward<float>(&flash_forward<float>, p16, Q, K, V16),
                       doctest::Contains("d = 8, d_v = 16 violates d_v == d"), Error);
  CHECK_THROWS_WITH_AS(problem_of(Q, K_bad, K_bad, false), doctest::Contains("K.shape = [1, 2, 5, 7]"), Error);
  CHECK_THROWS_WITH_AS(problem_of(Array<float>({2, 3, 8}), K, K, false), doctest::Contains("Q.shape"), Error);
  const Problem p = problem_of(Q, K, K, true);
  CHECK_THROWS_WITH_AS(run_forward<float>(&naive_forward<float>, p, Q, K, V_bad), doctest::Contains("V.shape"), Error);
  const Forward<float> f = run_forward<float>(&flash_forward<float>, p, Q, K, K);
  CHECK_THROWS_WITH_AS(run_backward<float>(&naive_backward<float>, p, Q, K, K, f.O, f.O, Array<float>({1, 2, 4})),
                       doctest::Contains("L.shape = [1, 2, 4]"), Error);
  std::vector<float> buf(64);
  float* b = buf.data();
  Problem bad = p;
  bad.Nq = 0;
  CHECK_THROWS_WITH_AS(naive_forward<float>(bad, b, b, b, b, b, nullptr), doctest::Contains("Nq = 0"), Error);
  bad = p, bad.d = -3;
  CHECK_THROWS_WITH_AS(recompute_backward<float>(bad, b, b, b, b, b, b, b, b, b, b, Tiles{4, 4}),
                       doctest::Contains("d = -3"), Error);
  bad = p, bad.scale = NAN;
  CHECK_THROWS_WITH_AS(flash_forward<float>(bad, b, b, b, b, b, nullptr), doctest::Contains("scale"), Error);
  CHECK_THROWS_WITH_AS(tiled_forward<float>(p, b, b, b, b, b, nullptr, Tiles{0, 8}), doctest::Contains("Br = 0"),
                       Error);
  CHECK_THROWS_WITH_AS(flash_forward<float>(p, b, nullptr, b, b, b, nullptr), doctest::Contains("null"), Error);
  CHECK_THROWS_AS(registry().find(kStage, "ref", "tiled").cost(Shape{1, 2, 3}), Error);
}
