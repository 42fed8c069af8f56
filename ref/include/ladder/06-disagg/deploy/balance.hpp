// ladder/06-disagg/deploy/balance.hpp -- stage 06, part 2: DP-rank balance in decode with DP attention.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, overlap, MTP, DP-RANK BALANCE]
//
// With MLA under DP (Huawei report Sec. 3.2.1) every rank reads its own requests' KV cache, and the MoE's
// AllGather makes every rank wait for the slowest: a step takes
//   T_step = base + max over ranks (sum of the rank's contexts x KV bytes per token / HBM bandwidth),
// base being the rest of the step (the layout's step time at context 1). How requests are assigned to
// ranks decides the max (the Huawei report's Sec. 8 names balancing by predicted output length):
//   round_robin:  request i to rank i mod R at arrival, each rank admits from its own queue;
//   least_kv:     when a slot frees, the next request goes to the rank with the least KV tokens now;
//   predicted:    ... to the rank whose KV at its requests' predicted ends is least (predicted output
//                 = true length x a seeded factor in [1 - noise, 1 + noise]).
// All requests arrive at once (an offline batch); each rank holds at most `slots` requests.
// With MTP (mtp.k drafts, acceptance p) a step scores 1 + k rows per request and a request emits
// 1 + accepted tokens, accepted = the run of successes (each with probability p, seeded Rng) up to k:
// E = 1 + p + ... + p^k tokens per request-step on average, so TPOT = T_step / E (mtp.hpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::deploy {

struct BalanceRequest {
  int64_t input = 1, output = 1;
  double predicted_output = 1;
};

enum class Assign { round_robin, least_kv, predicted };

inline const char* assign_name(Assign a) {
  return a == Assign::round_robin ? "round-robin" : a == Assign::least_kv ? "least KV-loaded" : "predicted output length";
}

struct MtpOptions {
  int64_t k = 0;          // draft tokens per request per step
  double acceptance = 0;  // probability that one draft is accepted
  uint64_t seed = 1;
};

struct BalanceResult {
  double total_ms = 0;          // time to finish every request
  int64_t steps = 0, tokens = 0;
  int64_t request_steps = 0;    // sum over steps of the requests decoding in it
  double mean_imbalance = 0;    // mean over steps of max rank KV / mean rank KV
};

// ms_per_kv_token: KV bytes per token over all layers / HBM bandwidth, in ms.
inline BalanceResult simulate_balance(const std::vector<BalanceRequest>& reqs, int64_t ranks, int64_t slots,
                                      double base_ms, double ms_per_kv_token, Assign policy,
                                      MtpOptions mtp = {}) {
  require(ranks >= 1 && slots >= 1, "balance: ranks = {}, slots = {} violate >= 1", ranks, slots);
  require(mtp.k >= 0 && mtp.acceptance >= 0 && mtp.acceptance <= 1, "balance: mtp k = {}, acceptance = {} violate "
          "k >= 0, 0 <= p <= 1", mtp.k, mtp.acceptance);
  Rng rng(mtp.seed);
  struct Active {
    int64_t ctx, left;
    double predicted_end;
  };
  std::vector<std::vector<Active>> rank(static_cast<size_t>(ranks));
  std::vector<std::deque<size_t>> own(static_cast<size_t>(ranks));  // round-robin queues
  std::deque<size_t> queue;
  for (size_t i = 0; i < reqs.size(); ++i) {
    require(reqs[i].input >= 1 && reqs[i].output >= 1, "balance: request {} has input {} output {} (need >= 1)", i,
            reqs[i].input, reqs[i].output);
    if (policy == Assign::round_robin) own[i % static_cast<size_t>(ranks)].push_back(i);
    else queue.push_back(i);
  }
  const auto load = [&](size_t r, bool predicted) {
    double s = 0;
    for (const Active& a : rank[r]) s += predicted ? a.predicted_end : static_cast<double>(a.ctx);
    return s;
  };
  const auto admit = [&](size_t r, size_t i) {
    const BalanceRequest& q = reqs[i];
    rank[r].push_back({q.input, q.output, static_cast<double>(q.input) + q.predicted_output});
  };
  BalanceResult res;
  double imbalance_sum = 0;
  for (;;) {
    if (policy == Assign::round_robin) {
      for (size_t r = 0; r < rank.size(); ++r)
        while (static_cast<int64_t>(rank[r].size()) < slots && !own[r].empty()) admit(r, own[r].front()), own[r].pop_front();
    } else {
      while (!queue.empty()) {
        size_t best = rank.size();
        double best_load = 0;
        for (size_t r = 0; r < rank.size(); ++r) {  // lowest rank wins ties
          if (static_cast<int64_t>(rank[r].size()) >= slots) continue;
          const double l = load(r, policy == Assign::predicted);
          if (best == rank.size() || l < best_load) best = r, best_load = l;
        }
        if (best == rank.size()) break;
        admit(best, queue.front());
        queue.pop_front();
      }
    }
    double kv_max = 0, kv_sum = 0;
    int64_t active = 0;
    for (size_t r = 0; r < rank.size(); ++r) {
      const double kv = load(r, false);
      kv_max = std::max(kv_max, kv), kv_sum += kv;
      active += static_cast<int64_t>(rank[r].size());
    }
    if (active == 0) break;
    res.total_ms += base_ms + kv_max * ms_per_kv_token;
    imbalance_sum += kv_sum > 0 ? kv_max / (kv_sum / static_cast<double>(ranks)) : 1.0;
    ++res.steps;
    for (auto& rr : rank) {
      for (Active& a : rr) {
        int64_t emit = 1;  // the target's own token, plus the accepted run of drafts
        while (emit <= mtp.k && rng.uniform() < mtp.acceptance) ++emit;
        emit = std::min(emit, a.left);
        a.ctx += emit, a.left -= emit, res.tokens += emit, ++res.request_steps;
      }
      rr.erase(std::remove_if(rr.begin(), rr.end(), [](const Active& a) { return a.left == 0; }), rr.end());  // C++17: notebooks
    }
  }
  res.mean_imbalance = res.steps > 0 ? imbalance_sum / static_cast<double>(res.steps) : 1.0;
  return res;
}

// A mixed-length workload: inputs uniform in [256, 4096]; outputs short (64-512) with probability
// 0.7, long (2048-6144) otherwise; the predictor's factor uniform in [1 - noise, 1 + noise].
inline std::vector<BalanceRequest> mixed_workload(int64_t n, uint64_t seed, double noise) {
  Rng rng(seed);
  std::vector<BalanceRequest> out;
  for (int64_t i = 0; i < n; ++i) {
    BalanceRequest q;
    q.input = 256 + static_cast<int64_t>(rng.uniform_int(4096 - 256 + 1));
    q.output = rng.uniform() < 0.7 ? 64 + static_cast<int64_t>(rng.uniform_int(512 - 64 + 1))
                                   : 2048 + static_cast<int64_t>(rng.uniform_int(6144 - 2048 + 1));
    q.predicted_output = static_cast<double>(q.output) * rng.uniform(1 - noise, 1 + noise);
    out.push_back(q);
  }
  return out;
}

}  // namespace ladder::deploy
