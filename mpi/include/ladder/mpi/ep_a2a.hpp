// ladder/mpi/ep_a2a.hpp -- expert parallelism's all-to-all dispatch and combine (stage 04's MoE layer
// across MPI ranks), shared by ladder-ep-moe and ladder-serve-demo.
//
// Slots: rank r holds expert slots [r S, (r+1) S); slot s runs expert phy2log[s] (without EPLB, slot s is
// expert s; with stage 05's placement an expert may have replicas, and an assignment goes to replica
// (token id mod replicas), round-robin by token as DeepSeek's dispatch does).
// a2a_moe: the counts are exchanged first (all-to-all), then each assignment's token row travels to the
// rank of its slot (all-to-allv); that rank sorts what it received by slot (stage 04's counting sort),
// runs the grouped products (ragged dot), and sends the outputs back along the same counts; the home
// rank sums them weighted, in top-k order: the same operations, in the same order, as the one-process
// sorted_dropless layer, so the fp64 result is bit-identical. A rank may be home to no token (the
// serve demo: every decode token lives on the decode rank, the experts on every rank).
// The collectives are comm::Group's (ladder/mpi/comm.hpp): non-blocking underneath, each waited on with
// the group's deadline, so a rank that never joins is an error that names the step, not a hang.
#pragma once
#include <string>
#include <vector>

#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/sorted.hpp"
#include "ladder/mpi/comm.hpp"

namespace ladder::ep {

using moe::Index;

struct Slots {
  Index per_rank = 1;
  std::vector<Index> phy2log;                // [slot] -> expert
  std::vector<std::vector<Index>> replicas;  // [expert] -> its slots
  Index slot_of(Index token, Index e) const {
    const auto& rs = replicas[static_cast<size_t>(e)];
    return rs[static_cast<size_t>(token % Index(rs.size()))];
  }
  int rank_of(Index slot) const { return static_cast<int>(slot / per_rank); }
};

// Slots from a placement phy2log over P ranks (phy2log.size() a multiple of P).
inline Slots make_slots(const std::vector<Index>& phy2log, Index n_experts, int P) {
  Slots s{static_cast<Index>(phy2log.size()) / P, phy2log, std::vector<std::vector<Index>>(static_cast<size_t>(n_experts))};
  for (Index sl = 0; sl < static_cast<Index>(phy2log.size()); ++sl)
    s.replicas[static_cast<size_t>(phy2log[static_cast<size_t>(sl)])].push_back(sl);
  return s;
}

// The products of rows grouped by this rank's local slots (group g = slot rank * S + g, its expert's weights).
inline Mat<double> slot_products(const moe::Weights<double>& w, const Slots& sl, int rank, const Mat<double>& xs,
                                 const std::vector<Index>& gs) {
  Mat<double> out = Mat<double>::Zero(xs.rows(), w.cfg.hidden);
  Index start = 0;
  for (Index g = 0; g < sl.per_rank; ++g) {
    const Index n = gs[static_cast<size_t>(g)];
    if (n > 0)
      out.middleRows(start, n) = moe::expert_products(w, sl.phy2log[static_cast<size_t>(rank * sl.per_rank + g)],
                                                      Mat<double>(xs.middleRows(start, n)), std::vector<Index>{n});
    start += n;
  }
  return out;
}

inline std::vector<int> displs(const std::vector<int>& counts) {
  std::vector<int> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

struct A2AOut {
  Mat<double> y;                   // [home tokens, D]: the routed experts' weighted sum (no shared expert)
  std::vector<Index> group_sizes;  // [S] rows of each local slot
  std::vector<int> recv_rows;      // [P] dispatch rows received from each rank
  int64_t sent_bytes = 0;          // to other ranks, dispatch and combine, counted at the calls
};

// xh [Tp, D] the home tokens (global ids t0 ..), r their routing, g the ranks holding the slots.
// plant_swap_weights (test): each output is weighted by the token's next top-k weight (must fail).
inline A2AOut a2a_moe(const moe::Weights<double>& w, const Mat<double>& xh, const moe::Routing<double>& r, Index t0,
                      const Slots& sl, const comm::Group& g, bool plant_swap_weights = false) {
  const Index D = w.cfg.hidden, k = w.cfg.top_k, Tp = xh.rows(), S = sl.per_rank;
  const int rank = g.rank(), P = g.size();
  auto dest_of_a = [&](Index a) { return sl.rank_of(sl.slot_of(t0 + a / k, r.topk_idx.data[static_cast<size_t>(a)])); };
  auto wa = [&](Index a) { return plant_swap_weights ? (a / k) * k + (a % k + 1) % k : a; };
  A2AOut out;
  // Dispatch: assignments grouped by destination rank, in assignment order within each.
  std::vector<int> scount(static_cast<size_t>(P), 0);
  for (Index a = 0; a < Tp * k; ++a) ++scount[static_cast<size_t>(dest_of_a(a))];
  std::vector<int> rcount(static_cast<size_t>(P));
  g.alltoall(scount.data(), 1, rcount.data(), "the dispatch counts' all-to-all");
  const std::vector<int> sdispl = displs(scount), rdispl = displs(rcount);
  const int nsend = sdispl.back() + scount.back(), nrecv = rdispl.back() + rcount.back();
  std::vector<double> srows(static_cast<size_t>(nsend) * D);
  std::vector<int64_t> sexp(static_cast<size_t>(nsend));
  std::vector<Index> pos_of(static_cast<size_t>(Tp * k));  // assignment -> its position in the send buffer
  std::vector<int> fill = sdispl;
  for (Index a = 0; a < Tp * k; ++a) {
    const Index s = sl.slot_of(t0 + a / k, r.topk_idx.data[static_cast<size_t>(a)]);  // what travels: the slot
    const int pos = fill[static_cast<size_t>(dest_of_a(a))]++;
    pos_of[static_cast<size_t>(a)] = pos;
    std::copy(xh.row(a / k).data(), xh.row(a / k).data() + D, srows.data() + static_cast<size_t>(pos) * D);
    sexp[static_cast<size_t>(pos)] = s;
  }
  std::vector<double> rrows(static_cast<size_t>(nrecv) * D);
  std::vector<int64_t> rexp(static_cast<size_t>(nrecv));
  auto scaled = [D](std::vector<int> v) {
    for (int& c : v) c *= static_cast<int>(D);
    return v;
  };
  const std::vector<int> scount_d = scaled(scount), sdispl_d = scaled(sdispl), rcount_d = scaled(rcount),
                         rdispl_d = scaled(rdispl);
  g.alltoallv(sexp.data(), scount, sdispl, rexp.data(), rcount, rdispl, "the dispatch slots' all-to-allv");
  g.alltoallv(srows.data(), scount_d, sdispl_d, rrows.data(), rcount_d, rdispl_d, "the dispatch rows' all-to-allv");
  for (int p = 0; p < P; ++p)
    if (p != rank) out.sent_bytes += int64_t{scount[static_cast<size_t>(p)]} * D * 8;
  out.recv_rows = rcount;
  // The rank's slots: sort what arrived by local slot, grouped products, back in arrival order.
  std::vector<Index> keys(static_cast<size_t>(nrecv));
  for (int i = 0; i < nrecv; ++i) keys[static_cast<size_t>(i)] = rexp[static_cast<size_t>(i)] - rank * S;
  const moe::Permutation p = moe::sort_by_key(keys, S);
  out.group_sizes = p.group_sizes;
  const Mat<double> rx = Eigen::Map<const Mat<double>>(rrows.data(), nrecv, D);
  const Mat<double> o = slot_products(w, sl, rank, moe::gather_rows(rx, p.sort_idx, 1, nrecv), p.group_sizes);
  std::vector<double> back(static_cast<size_t>(nrecv) * D);
  for (int i = 0; i < nrecv; ++i)
    std::copy(o.row(p.inverse[static_cast<size_t>(i)]).data(), o.row(p.inverse[static_cast<size_t>(i)]).data() + D,
              back.data() + static_cast<size_t>(i) * D);
  // Combine: the outputs return along the same counts, reversed.
  std::vector<double> got(static_cast<size_t>(nsend) * D);
  g.alltoallv(back.data(), rcount_d, rdispl_d, got.data(), scount_d, sdispl_d, "the combine's all-to-allv");
  for (int q = 0; q < P; ++q)
    if (q != rank) out.sent_bytes += int64_t{rcount[static_cast<size_t>(q)]} * D * 8;
  out.y = Mat<double>::Zero(Tp, D);
  for (Index t = 0; t < Tp; ++t)
    for (Index j = 0; j < k; ++j) {
      const Index a = t * k + j;
      out.y.row(t) += r.topk_weight.data[static_cast<size_t>(wa(a))] *
                      Eigen::Map<const RowVec<double>>(got.data() + static_cast<size_t>(pos_of[static_cast<size_t>(a)]) * D, D);
    }
  return out;
}

}  // namespace ladder::ep
