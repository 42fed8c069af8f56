// ladder/mpi/comm.hpp -- the collectives of the multi-process rungs behind one small interface: a Group
// of ranks (MPI today) whose every collective is non-blocking underneath and waited for with a deadline
// that names what was awaited, so a rank that never joins is one error, never a hang.
//
// Used by expert parallelism (ep_a2a.hpp, ladder-ep-moe), tensor parallelism (tp.hpp, ladder-tp-mla) and
// the serve demo. The calls are the ones NCCL also offers (all-gather, all-to-all(v) as grouped
// send/recv, broadcast, reduce, all-reduce, reduce-scatter, gather), on typed buffers with counts, so a
// GPU build can serve the same calls from device memory later by implementing this class over NCCL.
// The KV-cache transport (kv_transport.hpp) is deliberately not on it: its pull protocol uses tagged
// messages from any source and cancellable receives, which NCCL does not have; on GPUs that part is a
// different protocol (a one-sided copy engine or NIXL-style transfers), not the same calls.
#pragma once
#include <mpi.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "ladder/core/error.hpp"

namespace ladder::comm {

// The MPI datatype of T (the element types the rungs send).
template <class T>
MPI_Datatype datatype() {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else if constexpr (std::is_same_v<T, int64_t>) return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, uint8_t>) return MPI_UINT8_T;  // FP8 codes (E4M3 bits)
  else static_assert(sizeof(T) == 0, "comm: no MPI datatype for this element type");
}

enum class Op { sum, min, max };

inline MPI_Op mpi_op(Op op) { return op == Op::sum ? MPI_SUM : op == Op::min ? MPI_MIN : MPI_MAX; }

// Waits for a non-blocking call until the deadline; on timeout throws naming what was awaited.
inline void wait_for(MPI_Request& req, double timeout_s, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int done = 0;
  for (int64_t polls = 0;; ++polls) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) break;
    if (polls > 10000) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  throw Error(fmt::format("comm: {} did not complete within {:.0f} s: some rank of the group never joined it", what,
                          timeout_s));
}

// A group of ranks: every rank of the job (world) or a split of it. Move-only; a split it made is freed
// with it. timeout_s bounds every collective's wait.
class Group {
 public:
  static Group world(double timeout_s) { return Group(MPI_COMM_WORLD, timeout_s, false); }
  static Group none() { return Group(MPI_COMM_NULL, 0, false); }  // no group (member() is false)
  Group(Group&& o) noexcept : c_(std::exchange(o.c_, MPI_COMM_NULL)), timeout_s_(o.timeout_s_), owned_(o.owned_) {}
  Group& operator=(Group&& o) noexcept {
    if (this != &o) {
      release();
      c_ = std::exchange(o.c_, MPI_COMM_NULL), timeout_s_ = o.timeout_s_, owned_ = o.owned_;
    }
    return *this;
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() { release(); }

  bool member() const { return c_ != MPI_COMM_NULL; }
  int rank() const { return query(MPI_Comm_rank); }
  int size() const { return query(MPI_Comm_size); }
  double timeout_s() const { return timeout_s_; }
  // The same group with another deadline for its collectives (a long wait: peers still computing); a view,
  // valid while this group is.
  Group with_timeout(double timeout_s) const { return Group(c_, timeout_s, false); }
  // Every rank of this group calls it; ranks of one color form a group, ordered by key; color < 0: no
  // group (member() is false).
  Group split(int color, int key) const {
    MPI_Comm s = MPI_COMM_NULL;
    MPI_Comm_split(c_, color < 0 ? MPI_UNDEFINED : color, key, &s);
    return Group(s, timeout_s_, true);
  }

  template <class T>
  void allgather(const T* send, int count, T* recv, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Iallgather(send, count, datatype<T>(), recv, count, datatype<T>(), c_, r); });
  }
  template <class T>
  void gather(const T* send, int count, T* recv, int root, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Igather(send, count, datatype<T>(), recv, count, datatype<T>(), root, c_, r); });
  }
  template <class T>
  void alltoall(const T* send, int count, T* recv, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Ialltoall(send, count, datatype<T>(), recv, count, datatype<T>(), c_, r); });
  }
  // counts and displacements in elements, one per rank of the group.
  template <class T>
  void alltoallv(const T* send, const std::vector<int>& scount, const std::vector<int>& sdispl, T* recv,
                 const std::vector<int>& rcount, const std::vector<int>& rdispl, const std::string& what) const {
    run(what, [&](MPI_Request* r) {
      MPI_Ialltoallv(send, scount.data(), sdispl.data(), datatype<T>(), recv, rcount.data(), rdispl.data(),
                     datatype<T>(), c_, r);
    });
  }
  template <class T>
  void bcast(T* buf, int count, int root, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Ibcast(buf, count, datatype<T>(), root, c_, r); });
  }
  template <class T>
  void allreduce(const T* send, T* recv, int count, Op op, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Iallreduce(send, recv, count, datatype<T>(), mpi_op(op), c_, r); });
  }
  template <class T>
  void reduce(const T* send, T* recv, int count, Op op, int root, const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Ireduce(send, recv, count, datatype<T>(), mpi_op(op), root, c_, r); });
  }
  // recv_counts[i]: the elements rank i keeps of the reduced vector (the MPI library's reduction order).
  template <class T>
  void reduce_scatter(const T* send, T* recv, const std::vector<int>& recv_counts, Op op, const std::string& what) const {
    run(what, [&](MPI_Request* r) {
      MPI_Ireduce_scatter(send, recv, recv_counts.data(), datatype<T>(), mpi_op(op), c_, r);
    });
  }
  void barrier(const std::string& what) const {
    run(what, [&](MPI_Request* r) { MPI_Ibarrier(c_, r); });
  }

 private:
  Group(MPI_Comm c, double timeout_s, bool owned) : c_(c), timeout_s_(timeout_s), owned_(owned) {}
  void release() {
    if (owned_ && c_ != MPI_COMM_NULL) MPI_Comm_free(&c_);
    c_ = MPI_COMM_NULL;
  }
  int query(int (*f)(MPI_Comm, int*)) const {
    require(member(), "comm: rank or size of a group this rank is not in");
    int v = 0;
    f(c_, &v);
    return v;
  }
  template <class Start>
  void run(const std::string& what, Start&& start) const {
    require(member(), "comm: {} on a group this rank is not in", what);
    MPI_Request req;
    start(&req);
    wait_for(req, timeout_s_, what);
  }

  MPI_Comm c_ = MPI_COMM_NULL;
  double timeout_s_ = 60;
  bool owned_ = false;
};

}  // namespace ladder::comm
