// ladder/mpi/tp.hpp -- the all-reduce of tensor-parallel attention over a group of ranks (comm.hpp): what ladder-tp-mla (one
// decode step) and ladder-serve-demo (--decode-tp: every decode step of the serve pipeline) share. The
// shards and the rank-order sum are ladder/mpi/tp_shard.hpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/mpi/comm.hpp"
#include "ladder/mpi/tp_shard.hpp"

namespace ladder::tp {

// The all-reduce over group g: every rank's partial gathered (an all-gather with the group's deadline,
// naming `what`), then summed in rank order on every rank.
inline Mat<float> allreduce_in_rank_order(const Mat<float>& mine, const comm::Group& g, const std::string& what,
                                          bool reverse = false) {
  const int n = g.size();
  const int64_t count = mine.size();
  std::vector<float> parts(static_cast<size_t>(n * count));
  g.allgather(mine.data(), static_cast<int>(count), parts.data(), what);
  return sum_in_rank_order(parts, n, mine.rows(), mine.cols(), reverse);
}

}  // namespace ladder::tp
