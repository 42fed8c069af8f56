// tests/02-attention/test_tile_simd.cpp -- the float tile kernels (ladder/02-attention/tile_simd.hpp): every
// SIMD path this CPU has gives the same bits as the portable loops (products, e^x, the row sums, and the
// tiled rungs end to end); the portable loops are the order the header states and agree with an fp64
// product within its rounding bound; e^x is within a few ulp; a kernel summing in another order is caught.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ladder/02-attention/tile_ops.hpp"
#include "ladder/core/rng.hpp"
#include "test_attention_util.hpp"

namespace {
using namespace ladder;
using namespace ladder::attention;
namespace simd = ladder::attention::tile::simd;

// The paths this CPU can run, portable first.
std::vector<simd::Path> ts_paths() {
  std::vector<simd::Path> r;
  for (int p = 0; p <= static_cast<int>(simd::detail::widest()); ++p) r.push_back(static_cast<simd::Path>(p));
  return r;
}

// Runs f with the path capped at p (restored after, even on a throw).
template <class F>
void ts_on(simd::Path p, const F& f) {
  struct Reset {
    ~Reset() { simd::reset_path_cap(); }
  } reset;
  simd::set_path_cap(p);
  REQUIRE(simd::path() == p);
  f();
}

std::vector<float> ts_random(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

bool ts_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The four products of tile_ops.hpp on [M, K] x [K, N] tiles cut from padded buffers (ld > width), written
// one after another into `out`.
std::vector<float> ts_products(int64_t M, int64_t N, int64_t K) {
  const int64_t pad = 3;
  const std::vector<float> a = ts_random(M * (K + pad), 1), bt = ts_random(N * (K + pad), 2),
                           b = ts_random(K * (N + pad), 3), at = ts_random(K * (M + pad), 4);
  using In = tile::In<float>;
  using RMap = Eigen::Map<const Mat<float>, 0, Eigen::OuterStride<>>;
  const RMap A(a.data(), M, K, Eigen::OuterStride<>(K + pad)), Bt(bt.data(), N, K, Eigen::OuterStride<>(K + pad)),
      B(b.data(), K, N, Eigen::OuterStride<>(N + pad)), At(at.data(), K, M, Eigen::OuterStride<>(M + pad));
  std::vector<float> out;
  for (int op = 0; op < 4; ++op) {
    Mat<float> C = Mat<float>::Constant(M, N + pad, 0.25f);
    auto c = C.leftCols(N);
    if (op == 0) tile::nt<float>(In(A), In(Bt), c);
    if (op == 1) tile::nn_add<float>(In(A), In(B), c);
    if (op == 2) tile::nn_add<float>(0.5f, In(A), In(B), c);
    if (op == 3) tile::tn_add<float>(In(At), In(B), c);
    out.insert(out.end(), C.data(), C.data() + C.size());
  }
  return out;
}

// The portable order written out for C += A B at one element: k ascending, one fma per step.
float ts_element(const std::vector<float>& a, int64_t lda, const std::vector<float>& b, int64_t ldb, int64_t i,
                 int64_t j, int64_t K, float c0, bool reversed) {
  float c = c0;
  for (int64_t s = 0; s < K; ++s) {
    const int64_t k = reversed ? K - 1 - s : s;
    c = std::fma(a[static_cast<size_t>(i * lda + k)], b[static_cast<size_t>(k * ldb + j)], c);
  }
  return c;
}
}  // namespace

TEST_CASE("tile kernels: every SIMD path gives the portable loops' bits (ragged shapes, strided tiles)") {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {6, 64, 128}, {13, 17, 59}, {97, 113, 59}, {64, 130, 200},
                               {256, 256, 128}, {5, 71, 300}};
  for (const auto& s : shapes) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    std::vector<float> portable;
    ts_on(simd::Path::portable, [&] { portable = ts_products(s[0], s[1], s[2]); });
    for (simd::Path p : ts_paths()) {
      CAPTURE(simd::path_name(p));
      std::vector<float> got;
      ts_on(p, [&] { got = ts_products(s[0], s[1], s[2]); });
      CHECK(ts_same_bits(got, portable));
    }
  }
}

TEST_CASE("tile kernels: C += A B is the stated order and within the fp64 product's rounding bound") {
  const int64_t M = 9, N = 37, K = 150;  // K > kKc: the sum crosses a k block
  const std::vector<float> a = ts_random(M * K, 5), b = ts_random(K * N, 6);
  for (simd::Path p : ts_paths()) {
    CAPTURE(simd::path_name(p));
    std::vector<float> c(static_cast<size_t>(M * N), 0.5f);
    ts_on(p, [&] { simd::gemm(M, N, K, a.data(), K, 1, b.data(), N, c.data(), N, true); });
    int wrong_order_caught = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        const float got = c[static_cast<size_t>(i * N + j)];
        CHECK(got == ts_element(a, K, b, N, i, j, K, 0.5f, false));
        // Planted: the same products summed k descending -- another order, other bits somewhere.
        wrong_order_caught += got != ts_element(a, K, b, N, i, j, K, 0.5f, true);
        double exact = 0.5, mag = 0.5;
        for (int64_t k = 0; k < K; ++k) {
          const double t = double(a[static_cast<size_t>(i * K + k)]) * double(b[static_cast<size_t>(k * N + j)]);
          exact += t;
          mag += std::abs(t);
        }
        CHECK(std::abs(double(got) - exact) <= double(K + 1) * 0x1p-24 * mag);
      }
    CHECK(wrong_order_caught > 0);
  }
}

TEST_CASE("tile kernels: e^x within 3 ulp of std::exp, e^-inf = 0, NaN stays NaN; exp_sum's bits on every path") {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double e = std::exp(double(x)), got = simd::exp_scalar(x);
    worst = std::max(worst, std::abs(got - e) / (e * 0x1p-24));
  }
  CHECK(worst <= 3.0);
  CHECK(simd::exp_scalar(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(simd::exp_scalar(-100.0f) == 0.0f);
  CHECK(simd::exp_scalar(0.0f) == 1.0f);
  CHECK(std::isnan(simd::exp_scalar(std::numeric_limits<float>::quiet_NaN())));

  for (int64_t n : {1, 7, 15, 16, 17, 33, 256, 259}) {
    CAPTURE(n);
    std::vector<float> row = ts_random(n, 7 + static_cast<uint64_t>(n));
    row[0] = -std::numeric_limits<float>::infinity();
    const float m = 3.0f;
    std::vector<float> ref = row;
    float ref_sum = 0;
    ts_on(simd::Path::portable, [&] { ref_sum = simd::exp_sum(ref.data(), n, m); });
    CHECK(ref[0] == 0.0f);
    for (int64_t j = 1; j < n; ++j) CHECK(ref[static_cast<size_t>(j)] == simd::exp_scalar(row[static_cast<size_t>(j)] - m));
    for (simd::Path p : ts_paths()) {
      CAPTURE(simd::path_name(p));
      std::vector<float> got = row;
      float sum = 0;
      ts_on(p, [&] { sum = simd::exp_sum(got.data(), n, m); });
      CHECK(ts_same_bits(got, ref));
      CHECK(std::memcmp(&sum, &ref_sum, sizeof sum) == 0);
    }
  }
}

TEST_CASE("tile kernels: the tiled rungs give the same bits on every SIMD path (forward and backward)") {
  for (const char* name : {"q113_k97_d59_causal", "q239_k239_d128"}) {
    const GoldenCase& c = golden_case(name);
    const GoldenInputs in = golden_inputs(c);
    const Forward<float> f = run_forward<float>(&naive_forward<float>, c.p, in.Q, in.K, in.V);
    for (const Rung* r : registry().stage(kStage, "ref")) {
      CAPTURE(r->key());
      const std::string what = c.name + " (portable vs a SIMD path)";
      for (simd::Path p : ts_paths()) {
        CAPTURE(simd::path_name(p));
        if (is_backward(*r)) {
          Grads<float> a, b;
          ts_on(simd::Path::portable, [&] { a = test::backward<float>(*r, c.p, in.Q, in.K, in.V, f.O, in.dO, f.L); });
          ts_on(p, [&] { b = test::backward<float>(*r, c.p, in.Q, in.K, in.V, f.O, in.dO, f.L); });
          const Array<float> ga = test::gradient(a), gb = test::gradient(b);
          test::check_bit_identical<float>({r->id, "float32", "dQ|dK|dV", what, {"b", "h", "i"}}, ga.data, gb.data, ga.shape,
                                     "portable", simd::path_name(p));
        } else {
          Forward<float> a, b;
          ts_on(simd::Path::portable, [&] { a = test::forward<float>(*r, c.p, in.Q, in.K, in.V); });
          ts_on(p, [&] { b = test::forward<float>(*r, c.p, in.Q, in.K, in.V); });
          test::check_bit_identical<float>({r->id, "float32", "O", what, test::kBHRC}, a.O.data, b.O.data, a.O.shape, "portable",
                                     simd::path_name(p));
          test::check_bit_identical<float>({r->id, "float32", "L", what, test::kBHR}, a.L.data, b.L.data, a.L.shape, "portable",
                                     simd::path_name(p));
        }
      }
    }
  }
}

TEST_CASE("tile kernels: LADDER_CPU_PATH takes amx, avx512, avx, avx2, portable; another value is an Error naming it") {
  CHECK(simd::detail::parse_cap(nullptr) == 2);
  CHECK(simd::detail::parse_cap("amx") == 2);
  CHECK(simd::detail::parse_cap("avx") == 1);
  CHECK(simd::detail::parse_cap("portable") == 0);
  CHECK_THROWS_WITH_AS(simd::detail::parse_cap("sse"), doctest::Contains("LADDER_CPU_PATH"), ladder::Error);
}
