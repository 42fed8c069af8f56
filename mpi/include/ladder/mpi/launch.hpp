// ladder/mpi/launch.hpp -- what every MPI program of ladder does around its work: `--help`, one error line
// per job and a clean exit for a bad launch, an abort (never a hang) for a failure once ranks talk, the
// same configuration on every rank, and integer arguments checked before use. Used by ladder-kv-migrate,
// ladder-ep-moe, ladder-serve-demo and ladder-tp-mla (mpi/src/).
//
// A program is two steps: setup(rank, size, digest) parses and checks its arguments against the rank count
// without a message to any peer and returns its options (and a digest of them); body(options, rank, size)
// does the work. Between them every rank joins one all-gather of (setup failed?, digest), so a
// bad launch is decided by all ranks together: the lowest rank whose setup failed prints its error, a
// digest that differs from rank 0's is printed once by rank 0, and every rank exits 2. An error in body
// may leave peers waiting: that rank prints it and aborts the job, which ends every rank.
// Launched through scripts/mpirun (mpirun -q: without Open MPI's own paragraphs about the exit code).
#pragma once
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"

namespace ladder::mpi {

// A non-negative integer argument (at most 9 digits), or an Error naming the program and the option.
inline int64_t parse_count(const std::string& s, const char* program, const char* what) {
  require(!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() <= 9,
          "{}: {} = '{}' violates a non-negative integer", program, what, s);
  return std::stoll(s);
}

// A positive integer argument: parse_count and >= 1.
inline int64_t parse_positive(const std::string& s, const char* program, const char* what) {
  const int64_t v = parse_count(s, program, what);
  require(v >= 1, "{}: {} = {} violates >= 1", program, what, v);
  return v;
}

// The smallest multiple of m that is >= at_least: a default that divides over any rank count.
inline int64_t round_up_multiple(int64_t at_least, int64_t m) { return (at_least + m - 1) / m * m; }

// Was --help or -h given? Then the usage goes to stdout once per job: before MPI_Init, the launcher's
// environment says which process is rank 0 (none set: started without mpirun).
inline bool help_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") return true;
  return false;
}
inline bool launcher_rank0() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var)) return std::string(v) == "0";
  return true;
}

template <class Setup, class Body>
int run_ranks(int argc, char** argv, const char* program, const char* usage, Setup setup, Body body) {
  if (help_asked(argc, argv)) {
    if (launcher_rank0()) std::fputs(usage, stdout);
    return 0;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  bool checked = false;
  try {
    // Setup: local to this rank; its verdict and digest are shared by one all-gather.
    std::string error;
    uint64_t digest = 0;
    decltype(setup(rank, size, digest)) options{};
    try {
      options = setup(rank, size, digest);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const uint64_t mine[2] = {error.empty() ? 0u : 1u, digest};
    std::vector<uint64_t> all(2 * static_cast<size_t>(size));
    MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
    int first_failed = -1, failed = 0;
    std::string differ;
    for (int r = size - 1; r >= 0; --r) {
      if (all[2 * static_cast<size_t>(r)]) first_failed = r, ++failed;
      if (all[2 * static_cast<size_t>(r) + 1] != all[1])
        differ = std::to_string(r) + (differ.empty() ? "" : ", " + differ);
    }
    if (first_failed >= 0) {
      if (rank == first_failed)
        std::fprintf(stderr, "%s: error: %s%s\n", program, error.c_str(),
                     failed == size ? "" : fmt::format(" (on {} of {} ranks; rank {} first)", failed, size, rank).c_str());
      rc = 2;
    } else if (!differ.empty()) {
      if (rank == 0)
        std::fprintf(stderr, "%s: error: the ranks were given different configurations: rank(s) %s differ from rank 0 "
                     "(every rank must run the same arguments and files)\n", program, differ.c_str());
      rc = 2;
    } else {
      checked = true;
      rc = body(options, rank, size);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d: error: %s\n", program, rank, e.what());
    std::fflush(stderr);
    if (checked) MPI_Abort(MPI_COMM_WORLD, 2);
    rc = 2;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Finalize();
  return rc;
}

}  // namespace ladder::mpi
