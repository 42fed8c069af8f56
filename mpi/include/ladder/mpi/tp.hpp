// ladder/mpi/tp.hpp -- the all-reduce of tensor-parallel attention over MPI ranks: what ladder-tp-mla (one
// decode step) and ladder-serve-demo (--decode-tp: every decode step of the serve pipeline) share. The
// shards and the rank-order sum are ladder/mpi/tp_shard.hpp.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/mpi/ep_a2a.hpp"
#include "ladder/mpi/tp_shard.hpp"

namespace ladder::tp {

// The all-reduce over comm: every rank's partial gathered (MPI_Iallgather, a deadline naming `what`), then
// summed in rank order on every rank.
inline Mat<float> allreduce_in_rank_order(const Mat<float>& mine, MPI_Comm comm, double timeout_s,
                                          const std::string& what, bool reverse = false) {
  int n = 1;
  MPI_Comm_size(comm, &n);
  const int64_t count = mine.size();
  std::vector<float> parts(static_cast<size_t>(n * count));
  MPI_Request req;
  MPI_Iallgather(mine.data(), static_cast<int>(count), MPI_FLOAT, parts.data(), static_cast<int>(count), MPI_FLOAT,
                 comm, &req);
  ep::wait_collective(req, timeout_s, what);
  return sum_in_rank_order(parts, n, mine.rows(), mine.cols(), reverse);
}

}  // namespace ladder::tp
