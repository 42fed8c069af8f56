// tests/06-disagg/test_mtp.cpp -- stage 06, part 2: MTP speculative decoding (ladder/06-disagg/deploy/mtp.hpp).
// The verify rung: greedy acceptance by hand; rejection sampling emits tokens distributed as the target
// p (seeded chi-square over 4e5 samples, the project's Rng: the same counts on every machine), and the
// planted bug -- resampling from p instead of normalise(max(0, p - q)) -- is caught by the same test.
// The whole verify (k = 3 drafts, four distinct target rows and three distinct draft rows): the step's
// length follows the chain of acceptances, the token at each position follows that position's own row,
// the bonus follows p_k; planted bugs in the row indexing and in the bonus path are caught.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
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
  // k = 3 drafts, four target rows with four different argmaxes (1, 0, 3, 2): a wrong row shows.
  const std::vector<Dist> p = {{0.1, 0.7, 0.1, 0.1}, {0.5, 0.2, 0.2, 0.1}, {0.1, 0.1, 0.2, 0.6}, {0.2, 0.1, 0.6, 0.1}};
  CHECK(verify_greedy({1, 0, 3}, p) == std::vector<int64_t>{1, 0, 3, 2});  // all accepted + bonus argmax p_3
  CHECK(verify_greedy({1, 0, 2}, p) == std::vector<int64_t>{1, 0, 3});     // third rejected: argmax p_2
  CHECK(verify_greedy({1, 2, 3}, p) == std::vector<int64_t>{1, 0});        // second rejected: argmax p_1
  CHECK(verify_greedy({0, 0, 3}, p) == std::vector<int64_t>{1});           // first rejected
  CHECK(verify_greedy({}, {p[2]}) == std::vector<int64_t>{3});             // k = 0: the plain decode step
  CHECK_THROWS_AS(verify_greedy({1}, p), ladder::Error);                   // rows != drafts + 1
  CHECK_THROWS_AS(verify_greedy({1, 4, 0}, p), ladder::Error);             // token outside the vocab
  CHECK_THROWS_AS(verify_greedy({1, 0, 3}, {p[0], p[1], p[2], {0.5, 0.5}}), ladder::Error);  // ragged rows
  // The planted bugs change the all-accepted step: off-by-one rows reject the first draft (argmax p_1
  // is 0), the bonus from p_2 gives 3 instead of 2.
  CHECK(verify_greedy({1, 0, 3}, p, VerifyBug::row_index) != std::vector<int64_t>{1, 0, 3, 2});
  CHECK(verify_greedy({1, 0, 3}, p, VerifyBug::bonus_row) != std::vector<int64_t>{1, 0, 3, 2});
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

namespace {
// k = 3: four target rows p_0..p_3 (p_3 = the bonus row) and three draft rows q_0..q_2, all different,
// each p row with one token it never emits. Acceptance per position a_i = sum min(p_i, q_i) = 0.6, 0.65,
// 0.75, so a step reaches the bonus with probability 0.2925.
const std::vector<Dist> kPk = {{0.40, 0.10, 0.20, 0.00, 0.20, 0.10},
                               {0.05, 0.45, 0.10, 0.20, 0.00, 0.20},
                               {0.25, 0.05, 0.05, 0.35, 0.30, 0.00},
                               {0.00, 0.15, 0.50, 0.05, 0.10, 0.20}};
const std::vector<Dist> kQk = {{0.20, 0.30, 0.10, 0.20, 0.10, 0.10},
                               {0.10, 0.30, 0.30, 0.10, 0.10, 0.10},
                               {0.30, 0.10, 0.10, 0.20, 0.20, 0.10}};
constexpr size_t kK = 3;

struct VerifyStats {
  std::vector<int64_t> length;                    // steps emitting 1..k+1 tokens
  std::vector<std::vector<int64_t>> at_position;  // tokens emitted at position j (steps that reach it)
  int64_t malformed = 0;                          // steps not of the form (accepted drafts, one token)
};

VerifyStats run_verify(VerifyBug bug, uint64_t seed) {
  ladder::Rng rng(seed);
  VerifyStats s{std::vector<int64_t>(kK + 1, 0), std::vector<std::vector<int64_t>>(kK + 1, std::vector<int64_t>(6, 0)),
                0};
  for (int64_t n = 0; n < kSamples; ++n) {
    std::vector<int64_t> d(kK);
    for (size_t i = 0; i < kK; ++i) d[i] = draw(kQk[i], rng);  // the draft chain, each from its own q_i
    const auto out = verify_sampling(d, kQk, kPk, rng, ResampleFrom::residual, bug);
    bool shape_ok = !out.empty() && out.size() <= kK + 1;
    for (size_t j = 0; shape_ok && j + 1 < out.size(); ++j) shape_ok = out[j] == d[j];  // accepted drafts first
    if (!shape_ok) {
      s.malformed++;
      continue;
    }
    s.length[out.size() - 1]++;
    for (size_t j = 0; j < out.size(); ++j) s.at_position[j][static_cast<size_t>(out[j])]++;
  }
  return s;
}

// Chi-square of counts against p over p's nonzero cells (df = cells - 1), and how many tokens of
// probability 0 were emitted (any is a failure on its own).
struct RowFit {
  double x, df;
  int64_t impossible;
};
RowFit chi_square_row(const std::vector<int64_t>& counts, const Dist& p) {
  std::vector<int64_t> c;
  Dist q;
  int64_t impossible = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0) c.push_back(counts[i]), q.push_back(p[i]);
    else impossible += counts[i];
  }
  return {chi_square(c, q), static_cast<double>(c.size()) - 1, impossible};
}

// The step's length: P(len = j + 1) = a_0 ... a_{j-1} (1 - a_j) for j < k, P(len = k + 1) = a_0 ... a_{k-1}.
Dist length_law() {
  Dist law(kK + 1);
  double reach = 1;
  for (size_t j = 0; j < kK; ++j) {
    double a = 0;
    for (size_t v = 0; v < kPk[j].size(); ++v) a += std::min(kPk[j][v], kQk[j][v]);
    law[j] = reach * (1 - a);
    reach *= a;
  }
  law[kK] = reach;
  return law;
}

// Every check of the whole verify; returns the names of those that fail (empty = the rung is right).
std::vector<std::string> verify_failures(VerifyBug bug, uint64_t seed) {
  const VerifyStats s = run_verify(bug, seed);
  std::vector<std::string> failed;
  if (s.malformed > 0) failed.push_back("malformed");
  const double x_len = chi_square(s.length, length_law());
  MESSAGE("length: chi-square " << x_len << " vs " << chi_square_critical(3, 3.09));
  if (!(x_len < chi_square_critical(3, 3.09))) failed.push_back("length");
  for (size_t j = 0; j <= kK; ++j) {
    const RowFit f = chi_square_row(s.at_position[j], kPk[j]);
    MESSAGE("position " << j << ": chi-square " << f.x << " vs " << chi_square_critical(f.df, 3.09) << ", "
                        << f.impossible << " tokens of probability 0");
    if (!(f.x < chi_square_critical(f.df, 3.09)) || f.impossible > 0) failed.push_back("position " + std::to_string(j));
  }
  return failed;
}
}  // namespace

TEST_CASE("mtp: the whole sampling verify, k = 3 -- length law, each position's token follows its own row, the bonus p_k") {
  CHECK(length_law()[kK] == doctest::Approx(0.6 * 0.65 * 0.75));
  for (uint64_t seed : {1u, 2u})
    CHECK(verify_failures(VerifyBug::none, seed).empty());
}

TEST_CASE("mtp: planted bugs in the whole verify are caught -- off-by-one target rows, the bonus from p_{k-1}") {
  const auto rows = verify_failures(VerifyBug::row_index, 1);
  CHECK(std::find(rows.begin(), rows.end(), "position 0") != rows.end());  // draft 0 judged by p_1
  CHECK(std::find(rows.begin(), rows.end(), "length") != rows.end());      // acceptances of the wrong rows
  // The bonus bug leaves every accept / reject alone: only the bonus position fails.
  CHECK(verify_failures(VerifyBug::bonus_row, 1) == std::vector<std::string>{"position 3"});
}
