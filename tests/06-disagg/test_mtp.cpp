// tests/06-disagg/test_mtp.cpp -- stage 06, part 2: MTP speculative decoding (ladder/06-disagg/deploy/mtp.hpp).
// The verify rung: greedy acceptance by hand; rejection sampling emits tokens distributed as the target
// p (seeded chi-square over 4e5 samples, the project's Rng: the same counts on every machine), and the
// planted bug -- resampling from p instead of normalise(max(0, p - q)) -- is caught by the same test.
#include <doctest/doctest.h>

#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/06-disagg/deploy/mtp.hpp"

namespace {
using namespace ladder::deploy;

// Draft q puts mass where p has little (token 3 has p = 0): a wrong resampling shows clearly.
const Dist kP = {0.30, 0.05, 0.20, 0.0, 0.15, 0.10, 0.12, 0.08};
const Dist kQ = {0.10, 0.25, 0.05, 0.20, 0.15, 0.05, 0.10, 0.10};
constexpr int64_t kSamples = 400000;

// Emitted-token counts at one position: first token of each verify step (one draft from q).
std::vector<int64_t> first_token_counts(ResampleFrom from, uint64_t seed) {
  ladder::Rng rng(seed);
  std::vector<int64_t> counts(kP.size(), 0);
  for (int64_t i = 0; i < kSamples; ++i) {
    const int64_t d = draw(kQ, rng);
    counts[static_cast<size_t>(verify_sampling({d}, {kQ}, {kP, kP}, rng, from)[0])]++;
  }
  return counts;
}

// Chi-square over the tokens p can emit (df = 6 here: 7 nonzero cells); token 3 must never appear.
double chi_square_nonzero(const std::vector<int64_t>& counts) {
  std::vector<int64_t> c;
  Dist p;
  for (size_t i = 0; i < kP.size(); ++i)
    if (kP[i] > 0) c.push_back(counts[i]), p.push_back(kP[i]);
  return chi_square(c, p);
}
}  // namespace

TEST_CASE("mtp: greedy verify accepts while the draft matches the target's argmax, then emits the target's token") {
  const std::vector<Dist> p = {{0.1, 0.7, 0.2}, {0.5, 0.2, 0.3}, {0.1, 0.1, 0.8}};
  CHECK(verify_greedy({1, 0}, p) == std::vector<int64_t>{1, 0, 2});  // both accepted + bonus
  CHECK(verify_greedy({1, 2}, p) == std::vector<int64_t>{1, 0});     // second rejected: target's argmax
  CHECK(verify_greedy({0, 0}, p) == std::vector<int64_t>{1});        // first rejected
  CHECK_THROWS_AS(verify_greedy({1}, p), ladder::Error);             // rows != drafts + 1
}

TEST_CASE("mtp: rejection sampling -- acceptance rate is sum min(p, q); emitted tokens follow p (chi-square)") {
  // Accepted mass: sum_v min(p_v, q_v), the expected acceptance of one draft.
  double accept = 0;
  for (size_t v = 0; v < kP.size(); ++v) accept += std::min(kP[v], kQ[v]);
  ladder::Rng rng(11);
  int64_t accepted = 0;
  for (int64_t i = 0; i < kSamples; ++i) {
    const int64_t d = draw(kQ, rng);
    accepted += static_cast<int64_t>(verify_sampling({d}, {kQ}, {kP, kP}, rng).size()) - 1;
  }
  const double rate = static_cast<double>(accepted) / static_cast<double>(kSamples);
  CHECK(rate == doctest::Approx(accept).epsilon(0.01));  // sd of the mean ~ 0.0008 at 4e5 samples

  const double crit = chi_square_critical(6, 3.09);  // p = 0.001 upper tail, df 6
  CHECK(crit == doctest::Approx(22.46).epsilon(0.02));  // the table's 22.458
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto c = first_token_counts(ResampleFrom::residual, seed);
    CHECK(c[3] == 0);
    const double x = chi_square_nonzero(c);
    MESSAGE("seed " << seed << ": chi-square " << x << " vs critical " << crit);
    CHECK(x < crit);
  }
}

TEST_CASE("mtp: the planted bug (resample from p) is caught by the same chi-square") {
  const auto c = first_token_counts(ResampleFrom::target, 1);
  const double x = chi_square_nonzero(c);
  MESSAGE("planted: chi-square " << x);
  CHECK(x > chi_square_critical(6, 3.09));
}

TEST_CASE("mtp: tokens per step and TPOT") {
  CHECK(tokens_per_step(0.7, 1) == 1.7);
  CHECK(tokens_per_step(0.5, 3) == 1 + 0.5 + 0.25 + 0.125);
  CHECK(tokens_per_step(0.0, 4) == 1);
  CHECK_THROWS_AS(tokens_per_step(1.2, 1), ladder::Error);
}

#include "ladder/06-disagg/deploy/balance.hpp"

TEST_CASE("mtp: in the step-by-step decode a request emits 1 + p tokens per step on average (k = 1), 1 + p + p^2 (k = 2)") {
  const std::vector<BalanceRequest> wave(64, BalanceRequest{100, 4000, 4000});
  for (double p : {0.0, 0.7, 0.9}) {
    for (int64_t k : {1, 2}) {
      const BalanceResult r = simulate_balance(wave, 4, 16, 1.0, 0.0, Assign::least_kv, MtpOptions{k, p, 3});
      CHECK(r.tokens == 64 * 4000);  // every token emitted exactly once, none beyond a request's output
      const double per_step = static_cast<double>(r.tokens) / static_cast<double>(r.request_steps);
      // ~1.5e5 request-steps: the mean is within 0.01 of E (its sd is about 0.002); the last step of
      // a request may emit fewer than drawn, a bias of under 1 / 4000 steps.
      CHECK(per_step == doctest::Approx(tokens_per_step(p, k)).epsilon(0.01));
    }
  }
}
