// ladder/mpi/launch.hpp -- what every MPI program of ladder does around its work: one error line per
// rank and a clean exit for a bad launch, an abort (never a hang) for a failure once ranks talk, the
// same configuration on every rank, and integer arguments checked before use. Used by
// ladder-kv-migrate, ladder-ep-moe and ladder-serve-demo (mpi/src/).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "ladder/core/error.hpp"

namespace ladder::mpi {

// A non-negative integer argument (at most 9 digits), or an Error naming the program and the option.
inline int64_t parse_count(const std::string& s, const char* program, const char* what) {
  require(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() <= 9,
          "{}: {} = '{}' violates a non-negative integer", program, what, s);
  return std::stoll(s);
}

// Every rank must run the same configuration: compares each rank's digest before any work, so a rank
// given other arguments or another config file is one error on every rank, not a hang later.
inline void require_same_config(uint64_t digest, int rank, const char* program) {
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&digest, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&digest, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  require(lo == hi, "{}: rank {}: the ranks were given different configurations (digest {:016x}; min {:016x}, "
          "max {:016x} over all ranks)", program, rank, digest, lo, hi);
}

// MPI_Init, body(rank, size, checked), MPI_Finalize; returns body's exit code. The body sets `checked`
// once it is past the checks every rank makes alike (before its first message to a peer). An error
// before that is seen by every rank alike: each prints it and exits 2. An error after it may leave
// peers waiting: the job is aborted, which ends every rank with an error.
template <class Body>
int run_ranks(int argc, char** argv, const char* program, Body body) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  bool checked = false;
  try {
    rc = body(rank, size, checked);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: error: %s\n", program, rank, e.what());
    std::fflush(stderr);
    if (checked) MPI_Abort(MPI_COMM_WORLD, 2);
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}

}  // namespace ladder::mpi
