// tests/07-precision/test_bf16_gemm.cpp -- recipe bf16_gemm (ladder/07-precision/bf16_gemm.hpp) through stage 07's
// contract on every bf16_gemm golden: right candidates in other summation orders and blockings pass (chains up and
// down, float32 blocks of 64, a pairwise tree, products rounded to float32 first); the wrong ones fail: float32 from
// the UNROUNDED x, w (and even their exact float64 product), w read transposed, codes truncated (RTZ) where RNE is
// declared, one output column summed over k = 0..K-2. The bound's DAZ / FTZ allowance, each term needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "golden_util.hpp"
#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/07-precision/golden_cases.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

using namespace ladder;
using namespace ladder::precision;

namespace {

struct Bf16Case {
  CaseFolder cf;
  Mat<float> x, w;
};

std::vector<std::string> bf16_cases() {
  std::vector<std::string> v;
  for (const std::string& n : golden_case_names())
    if (n.rfind("bf16_", 0) == 0) v.push_back(n);
  return v;
}

Bf16Case load_bf16(const std::string& name) {
  Bf16Case c;
  c.cf = read_case(contract("07-precision"), test::golden_dir("07-precision") / name);
  c.x = from_npy<float>(c.cf.inputs.at("x"), "x").mat();
  c.w = from_npy<float>(c.cf.inputs.at("w"), "w").mat();
  return c;
}

bool judged(const Bf16Case& c, const std::string& output, const NpyData& cand) {
  const CheckReport r = check(contract("07-precision"), c.cf.inputs, c.cf.params, c.cf.expected, output, cand);
  INFO(output << ": " << r.text);
  return r.pass;
}

// y [M, N] float32 from operands a(i, k), b(k, j) (already the values to multiply) with column j summed over
// k in [0, kend(j)) by `sum` (a float32 summation of the products in some order).
using Sum = std::function<float(const std::vector<float>&)>;
NpyData gemm(int64_t M, int64_t K, int64_t N, const std::function<float(int64_t, int64_t)>& a,
             const std::function<float(int64_t, int64_t)>& b, const Sum& sum,
             const std::function<int64_t(int64_t)>& kend = nullptr) {
  Array<float> y({M, N});
  std::vector<float> p;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      p.clear();
      for (int64_t k = 0; k < (kend ? kend(j) : K); ++k) p.push_back(a(i, k) * b(k, j));
      y.data[static_cast<size_t>(i * N + j)] = sum(p);
    }
  return to_npy(y);
}

float chain_up(const std::vector<float>& p) {
  float s = 0;
  for (float v : p) s += v;
  return s;
}
float chain_down(const std::vector<float>& p) {
  float s = 0;
  for (size_t k = p.size(); k-- > 0;) s += p[k];
  return s;
}
float blocks64(const std::vector<float>& p) {
  float s = 0;
  for (size_t b = 0; b < p.size(); b += 64) {
    float t = 0;
    for (size_t k = b; k < std::min(p.size(), b + 64); ++k) t += p[k];
    s += t;
  }
  return s;
}
float pairwise(const std::vector<float>& p) {
  std::vector<float> v = p;
  while (v.size() > 1) {
    std::vector<float> n;
    for (size_t k = 0; k + 1 < v.size(); k += 2) n.push_back(v[k] + v[k + 1]);
    if (v.size() % 2) n.push_back(v.back());
    v.swap(n);
  }
  return v.empty() ? 0.0f : v[0];
}

}  // namespace

TEST_CASE("07: bf16_gemm -- any summation order passes, the wrong candidates fail, on every golden") {
  const std::vector<std::string> cases = bf16_cases();
  REQUIRE(cases.size() == 4);
  for (const std::string& name : cases) {
    CAPTURE(name);
    const Bf16Case g = load_bf16(name);
    const int64_t M = g.x.rows(), K = g.x.cols(), N = g.w.cols();
    const std::vector<uint16_t> xq = bf16_codes(g.x, "x"), wq = bf16_codes(g.w, "w");
    CHECK(judged(g, "xq", to_npy(bf16_codes_i32(xq, M, K))));
    CHECK(judged(g, "wq", to_npy(bf16_codes_i32(wq, K, N))));
    const auto xv = [&](int64_t i, int64_t k) { return formats::from_bf16(xq[static_cast<size_t>(i * K + k)]); };
    const auto wv = [&](int64_t k, int64_t j) { return formats::from_bf16(wq[static_cast<size_t>(k * N + j)]); };
    // Right: four orders of the exact products (a float32 product of two bf16 values is exact), float32 sums.
    for (const Sum& s : std::vector<Sum>{chain_up, chain_down, blocks64, pairwise})
      CHECK(judged(g, "y", gemm(M, K, N, xv, wv, s)));
    // The oracle rounded to float32 passes too.
    Array<double> o = from_npy<double>(g.cf.expected.at("y"), "y");
    Array<float> of({M, N});
    for (size_t e = 0; e < o.data.size(); ++e) of.data[e] = static_cast<float>(o.data[e]);
    CHECK(judged(g, "y", to_npy(of)));
    // Wrong: the float32 recipe passed off as bf16 (unrounded x, w), in float32 and even summed exactly.
    const auto xf = [&](int64_t i, int64_t k) { return g.x(i, k); };
    const auto wf = [&](int64_t k, int64_t j) { return g.w(k, j); };
    CHECK_FALSE(judged(g, "y", gemm(M, K, N, xf, wf, chain_up)));
    Array<double> exact({M, N});
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < K; ++k)
          exact.data[static_cast<size_t>(i * N + j)] += static_cast<double>(g.x(i, k)) * g.w(k, j);
    CHECK_FALSE(judged(g, "y", to_npy(exact)));
    // Wrong: w's [K, N] memory read as [N, K] (transposed).
    const auto wt = [&](int64_t k, int64_t j) { return wv(0, j * K + k); };  // element j K + k of the codes
    CHECK_FALSE(judged(g, "y", gemm(M, K, N, xv, wt, chain_up)));
    // Wrong: codes truncated (RTZ) where RNE is declared: the codes and the product.
    const std::vector<uint16_t> xt = bf16_codes(g.x, "x", formats::Round::toward_zero),
                                wtq = bf16_codes(g.w, "w", formats::Round::toward_zero);
    CHECK_FALSE(judged(g, "xq", to_npy(bf16_codes_i32(xt, M, K))));
    CHECK_FALSE(judged(g, "wq", to_npy(bf16_codes_i32(wtq, K, N))));
    const auto xr = [&](int64_t i, int64_t k) { return formats::from_bf16(xt[static_cast<size_t>(i * K + k)]); };
    const auto wr = [&](int64_t k, int64_t j) { return formats::from_bf16(wtq[static_cast<size_t>(k * N + j)]); };
    CHECK_FALSE(judged(g, "y", gemm(M, K, N, xr, wr, chain_up)));
    // Wrong: the last column's k range off by one (k = 0..K-2).
    CHECK_FALSE(judged(g, "y", gemm(M, K, N, xv, wv, chain_up, [&](int64_t j) { return j == N - 1 ? K - 1 : K; })));
  }
}

TEST_CASE("07: bf16_gemm -- both rungs registered; the reference rung passes every bf16 golden") {
  const Contract& c = contract("07-precision");
  const Rung& ref = registry().find("07-precision", "ref", "bf16_gemm");
  for (const std::string& name : bf16_cases()) {
    CAPTURE(name);
    const Bf16Case g = load_bf16(name);
    const Tensors out = run_rung(c, ref, g.cf.inputs, g.cf.params, DType::F4);
    CHECK(out.size() == 3);
    for (const auto& [k, v] : out) {
      CAPTURE(k);
      CHECK(judged(g, k, v));
    }
    const Rung& a8w8 = registry().find("07-precision", "ref", "a8w8");
    CHECK_THROWS_WITH_AS(run_rung(c, a8w8, g.cf.inputs, g.cf.params, DType::F4), doctest::Contains("params.recipe is"),
                         Error);
  }
}

TEST_CASE("07: bf16_gemm's bound -- the DAZ and FTZ allowances are each needed by the reference's flushing") {
  // y_00 = 2^-130 (a bf16 subnormal) x 2^100: DAZ drops the product 2^-30. y_11 = 2^-70 2^-70 + 2^-70 2^-70: each
  // product and partial sum 2^-140 or 2^-139 is tiny and FTZ flushes it. Neither is within gamma_K(2^-24) S alone.
  const float sub = std::ldexp(1.0f, -130), big = std::ldexp(1.0f, 100), t = std::ldexp(1.0f, -70);
  Mat<float> x(2, 3), w(3, 2);
  x << sub, 0, 0, 0, t, t;
  w << big, 0, 0, t, 0, t;
  const Recipe r = parse_recipe(nlohmann::json{{"recipe", "bf16_gemm"}});
  const std::vector<uint16_t> xq = bf16_codes(x, "x"), wq = bf16_codes(w, "w");
  Array<float> y({2, 2});
  gemm_bf16_cpu(xq.data(), wq.data(), y.data.data(), 2, 3, 2);  // the reference rung's kernel: DAZ, FTZ
  const Array<float> chain = from_npy<float>(run_recipe(r, x, w).at("y"), "y");  // the baseline: gradual underflow
  const OracleOut o = oracle_recipe(r, x, w);
  const Array<double> oy = from_npy<double>(o.outputs.at("y"), "y");
  CHECK(y.data[0] == 0.0f);  // DAZ: the subnormal code read as zero
  CHECK(oy.data[0] == std::ldexp(1.0, -30));
  CHECK(y.data[3] == 0.0f);  // FTZ: 2^-140 sums flushed
  CHECK(oy.data[3] == std::ldexp(1.0, -139));
  CHECK(chain.data[0] == std::ldexp(1.0f, -30));  // no DAZ: exact; 2^-140 + 2^-140 exact in float32's subnormals
  CHECK(chain.data[3] == std::ldexp(1.0f, -139));
  for (size_t e = 0; e < 4; ++e) {
    CAPTURE(e);
    CHECK(std::fabs(y.data[e] - oy.data[e]) <= o.bound.data[e]);
  }
  // Without the allowances (D = 0, no K 2^-124) both would fail.
  CHECK(std::fabs(y.data[0] - oy.data[0]) > bf16_gemm_bound(3, std::ldexp(1.0, -30), 0) - 3 * std::ldexp(1.0, -124));
  CHECK(std::fabs(y.data[3] - oy.data[3]) > (gamma_n(3, 0x1p-24) + gamma_n(3, 0x1p-53)) * std::ldexp(1.0, -139) * 2);
  CHECK_THROWS_WITH_AS(bf16_gemm_bound(int64_t{1} << 23, 1, 0), doctest::Contains("K = 8388608 violates"), Error);
}
