// ladder/06-disagg/deploy/mtp.hpp -- stage 06, part 2: MTP speculative decoding, the verify rung and the step model.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, overlap, MTP]
//
// Verify (CSE 234 lecture notes Sec. 5, MTP; Huawei report Sec. 5.3): the MTP layer drafts k tokens
// d_1..d_k with draft probabilities q_i; one target step scores 1 + k query rows per request and gives
// p_0..p_k.
//   greedy:   accept d_i while d_i == argmax p_{i-1}; then emit argmax of the first unmatched row.
//   sampling: accept d_i with probability min(1, p(d_i) / q(d_i)); on the first rejection emit a token
//             drawn from normalise(max(0, p - q)) and stop; if all k are accepted emit one from p_k.
// Either way a step emits 1 + accepted tokens, and sampling emits tokens distributed exactly as p: the
// accepted mass min(p, q) plus the residual (1 - sum min(p, q)) x max(0, p - q) / sum max(0, p - q) = p.
// Step model: with acceptance p per draft and k drafts a step emits E = 1 + p + ... + p^k tokens, so
// TPOT = T_step / E and tokens/s per card = requests_per_card x E / T_step (Huawei report Sec. 7.1.1, k = 1).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::deploy {

using Dist = std::vector<double>;  // probabilities over the vocabulary

inline int64_t argmax(const Dist& p) {
  int64_t best = 0;
  for (size_t i = 1; i < p.size(); ++i)
    if (p[i] > p[static_cast<size_t>(best)]) best = static_cast<int64_t>(i);  // lowest index wins ties
  return best;
}

// Inverse-CDF draw from unnormalised weights w (sum > 0) with one uniform from rng.
inline int64_t draw(const Dist& w, Rng& rng) {
  double total = 0;
  for (double x : w) total += x;
  require(total > 0, "mtp::draw: weights sum to {} (must be > 0)", total);
  const double u = rng.uniform() * total;
  double acc = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    acc += w[i];
    if (u < acc) return static_cast<int64_t>(i);
  }
  for (size_t i = w.size(); i-- > 0;)
    if (w[i] > 0) return static_cast<int64_t>(i);  // u rounded onto the total: the last nonzero weight
  return 0;
}

inline void check_rows(const std::vector<int64_t>& draft, const std::vector<Dist>& p, const char* who) {
  require(p.size() == draft.size() + 1, "{}: target rows = {} violates rows == drafts + 1 = {}", who, p.size(),
          draft.size() + 1);
  for (size_t i = 1; i < p.size(); ++i)
    require(p[i].size() == p[0].size(), "{}: target row {} has {} entries violates == vocab {} (row 0)", who, i,
            p[i].size(), p[0].size());
  for (int64_t d : draft)
    require(d >= 0 && static_cast<size_t>(d) < p[0].size(), "{}: draft token {} outside vocab [0, {})", who, d,
            p[0].size());
}

// Planted bugs for the tests (none = the rung): `row_index` judges draft i against the row after it,
// p[i + 1] (the off-by-one between "the row that predicts token i" and "the row at token i");
// `bonus_row` draws the bonus token from p[k - 1], the last draft's row, instead of p[k].
enum class VerifyBug { none, row_index, bonus_row };

// The target row that judges draft i, and the row of the bonus token (k = drafts).
inline const Dist& judge_row(const std::vector<Dist>& p, size_t i, VerifyBug bug) {
  return bug == VerifyBug::row_index ? p[i + 1] : p[i];
}
inline const Dist& bonus_row(const std::vector<Dist>& p, VerifyBug bug) {
  return bug == VerifyBug::bonus_row && p.size() > 1 ? p[p.size() - 2] : p.back();
}

// Greedy verify: the emitted tokens (1 + accepted).
inline std::vector<int64_t> verify_greedy(const std::vector<int64_t>& draft, const std::vector<Dist>& p,
                                          VerifyBug bug = VerifyBug::none) {
  check_rows(draft, p, "verify_greedy");
  std::vector<int64_t> out;
  for (size_t i = 0; i < draft.size(); ++i) {
    const int64_t t = argmax(judge_row(p, i, bug));
    out.push_back(t);
    if (t != draft[i]) return out;  // the target's own token replaces the first mismatch
  }
  out.push_back(argmax(bonus_row(p, bug)));  // all drafts accepted: the bonus token
  return out;
}

enum class ResampleFrom { residual, target };  // target = the planted bug (resample from p)

// Rejection-sampling verify: draft[i] was drawn from q[i]; p has k + 1 rows.
inline std::vector<int64_t> verify_sampling(const std::vector<int64_t>& draft, const std::vector<Dist>& q,
                                            const std::vector<Dist>& p, Rng& rng,
                                            ResampleFrom from = ResampleFrom::residual,
                                            VerifyBug bug = VerifyBug::none) {
  check_rows(draft, p, "verify_sampling");
  require(q.size() == draft.size(), "verify_sampling: draft rows = {} violates == drafts = {}", q.size(), draft.size());
  for (size_t i = 0; i < q.size(); ++i)
    require(q[i].size() == p[0].size(), "verify_sampling: draft row {} has {} entries violates == vocab {}", i,
            q[i].size(), p[0].size());
  std::vector<int64_t> out;
  for (size_t i = 0; i < draft.size(); ++i) {
    const size_t d = static_cast<size_t>(draft[i]);
    const Dist& pi = judge_row(p, i, bug);
    require(q[i][d] > 0, "verify_sampling: q[{}][{}] = 0 but the draft chose it", i, d);
    const double ratio = pi[d] / q[i][d];
    if (rng.uniform() < ratio) {  // accept with probability min(1, p/q)
      out.push_back(draft[i]);
      continue;
    }
    Dist r(pi.size());
    for (size_t v = 0; v < r.size(); ++v)
      r[v] = from == ResampleFrom::residual ? (pi[v] > q[i][v] ? pi[v] - q[i][v] : 0.0) : pi[v];
    out.push_back(draw(r, rng));
    return out;
  }
  out.push_back(draw(bonus_row(p, bug), rng));  // all k accepted: the bonus token from p_k
  return out;
}

// Expected tokens per step with k drafts accepted in a chain, each with probability p: 1 + p + ... + p^k.
inline double tokens_per_step(double p, int64_t k) {
  require(p >= 0 && p <= 1 && k >= 0, "tokens_per_step: p = {}, k = {} violate 0 <= p <= 1, k >= 0", p, k);
  double e = 1, pk = 1;
  for (int64_t i = 0; i < k; ++i) pk *= p, e += pk;
  return e;
}

// Pearson chi-square statistic of counts against probabilities (n = sum of counts).
inline double chi_square(const std::vector<int64_t>& counts, const Dist& p) {
  double n = 0;
  for (int64_t c : counts) n += static_cast<double>(c);
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    const double d = static_cast<double>(counts[i]) - e;
    s += e > 0 ? d * d / e : (counts[i] > 0 ? 1e300 : 0.0);
  }
  return s;
}

// Upper critical value of chi-square with df degrees of freedom at the normal quantile z (Wilson and
// Hilferty 1931: (chi2/df)^(1/3) is close to normal with mean 1 - 2/(9 df), variance 2/(9 df)).
inline double chi_square_critical(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  const double s = std::sqrt(a);  // IEEE 754 rounds sqrt exactly: the same bits on every CPU
  const double c = 1.0 - a + z * s;
  return df * c * c * c;
}

}  // namespace ladder::deploy
