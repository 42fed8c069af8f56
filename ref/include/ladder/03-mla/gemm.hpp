// ladder/03-mla/gemm.hpp -- stage 03: the one matrix product every MLA rung uses, and its FLOP counter.
//
// Every projection, every score product and every weighted sum of the MLA rungs goes through gemm_nt
// or gemm_nn, so (1) a rung's FLOPs can be counted as it runs -- each call adds M*N*K multiply-adds
// from the operands' actual shapes, the way PyTorch's FlopCounterMode counts per op -- and a test
// checks the count against the rung's Cost formula; (2) the parallel split is in one place: fixed
// chunks of output columns (or the whole product, in a WholeProducts scope), each a serial product
// over the whole K, so every output element is summed in the same order whatever the thread count. For T = double (the oracle) the product is
// ladder/core/gemm.hpp's fixed-order loop, not Eigen, so the bytes do not depend on the CPU either. Inside an OpenMP region (the rungs parallelise
// over sequences and heads) the product runs serially.
// Eigen parallelises a large product by itself when it is called outside a parallel region; its
// threads synchronise by spinning, which on a busy shared machine turned a 0.1 ms product into 8 ms.
// So at top level every product runs inside our own region -- chunks shared out when the product is
// large, otherwise one thread does it all (Eigen sees a team and stays serial).
#pragma once
#ifdef _OPENMP
#include <omp.h>
#endif

#include <atomic>
#include <cstdint>

#include "ladder/core/error.hpp"
#include "ladder/core/gemm.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::mla {

// Row-major matrix views (a block of a row-major matrix keeps inner stride 1).
template <class T>
using ConstRef = Eigen::Ref<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MutRef = Eigen::Ref<Mat<T>, 0, Eigen::OuterStride<>>;

// Multiply-adds counted while a CountFlops is alive (FLOPs = 2 * macs, the notes' convention).
struct FlopCount {
  std::atomic<int64_t> macs{0};
  double flops() const { return 2.0 * static_cast<double>(macs.load()); }
};

namespace detail {
inline std::atomic<FlopCount*> active_count{nullptr};
}

// RAII: while alive, every gemm_nt / gemm_nn adds its M*N*K to `c` (one counter at a time).
class CountFlops {
 public:
  explicit CountFlops(FlopCount& c) {
    FlopCount* expected = nullptr;
    require(detail::active_count.compare_exchange_strong(expected, &c),
            "mla CountFlops: a counter is already active (counters do not nest)");
  }
  ~CountFlops() { detail::active_count = nullptr; }
  CountFlops(const CountFlops&) = delete;
  CountFlops& operator=(const CountFlops&) = delete;
};

inline void count_macs(int64_t m, int64_t n, int64_t k) {
  if (FlopCount* c = detail::active_count.load(std::memory_order_relaxed)) c->macs += m * n * k;
}

namespace detail {
inline constexpr int64_t kGemmChunk = 128;         // output columns per parallel task
inline constexpr int64_t kGemmParallelMacs = 1 << 18;  // below this a product runs on one thread
inline thread_local bool whole_products = false;   // set by WholeProducts (below)

// True where a product must run inline: inside a team already, one thread, or no OpenMP at all (the
// notebooks' clang-repl compiles these headers without -fopenmp).
inline bool run_inline() {
#ifdef _OPENMP
  return omp_in_parallel() || omp_get_max_threads() == 1;
#else
  return true;
#endif
}

// Runs f(c) for c in [0, chunks): shared out over the threads when `parallel`, else on one thread;
// always inside a team (see above), or inline when already in one or when there is one thread.
template <class F>
void for_chunks(int64_t chunks, bool parallel, F&& f) {
  if (run_inline()) {
    for (int64_t c = 0; c < chunks; ++c) f(c);
    return;
  }
#pragma omp parallel
  {
    if (parallel) {
#pragma omp for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) f(c);
    } else {
#pragma omp single
      for (int64_t c = 0; c < chunks; ++c) f(c);
    }
  }
}
}  // namespace detail

// While alive (and `on`), every gemm_nt / gemm_nn on this thread is one Eigen product on this thread,
// not kGemmChunk-column chunks. For callers that already share out whole tasks (a sequence, a split of
// one): there the chunks run one after another anyway, and each chunk re-packs the whole left operand
// (a [128, 4096] score product = 32 chunks = 32 packings of q_abs; the perf profile of A_CC_ME at
// B = 32 showed Eigen's packing at a third of its kernel time). Set it from the code path and the
// shapes, never from the thread count: the chunking fixes each output's summation blocking.
class WholeProducts {
 public:
  explicit WholeProducts(bool on = true) : prev_(detail::whole_products) { detail::whole_products = prev_ || on; }
  ~WholeProducts() { detail::whole_products = prev_; }
  WholeProducts(const WholeProducts&) = delete;
  WholeProducts& operator=(const WholeProducts&) = delete;

 private:
  bool prev_;
};

namespace detail {
inline int64_t chunk_cols(int64_t N) { return whole_products ? std::max<int64_t>(N, 1) : kGemmChunk; }
}  // namespace detail

// C = A B^T (+ C if accumulate). A [M, K]; B [N, K] (an nn.Linear weight or cache rows); C [M, N].
template <class T>
void gemm_nt(const ConstRef<T>& A, const ConstRef<T>& B, MutRef<T> C, bool accumulate = false) {
  const int64_t M = A.rows(), N = B.rows(), K = A.cols();
  require(B.cols() == K, "mla gemm_nt: B.cols = {} violates B.cols == A.cols = {}", B.cols(), K);
  require(C.rows() == M && C.cols() == N, "mla gemm_nt: C is [{}, {}] where [{}, {}] is required", C.rows(),
          C.cols(), M, N);
  count_macs(M, N, K);
  const int64_t w = detail::chunk_cols(N), chunks = (N + w - 1) / w;
  detail::for_chunks(chunks, M * N * K >= detail::kGemmParallelMacs, [&](int64_t c) {
    const int64_t n0 = c * w, nb = std::min(w, N - n0);
    if (std::is_same_v<T, double> || fixed_order()) {  // the oracle and the rule's float32 baseline: fixed order
      gemm_fixed_order<T>(M, nb, K, T(1), A.data(), A.outerStride(), Op::N, B.data() + n0 * B.outerStride(),
                          B.outerStride(), Op::T, C.data() + n0, C.outerStride(), accumulate);
    } else if (accumulate) {
      C.middleCols(n0, nb).noalias() += A * B.middleRows(n0, nb).transpose();
    } else {
      C.middleCols(n0, nb).noalias() = A * B.middleRows(n0, nb).transpose();
    }
  });
}

// C = A B (+ C if accumulate). A [M, K]; B [K, N] row-major (e.g. attention weights times cache rows).
template <class T>
void gemm_nn(const ConstRef<T>& A, const ConstRef<T>& B, MutRef<T> C, bool accumulate = false) {
  const int64_t M = A.rows(), N = B.cols(), K = A.cols();
  require(B.rows() == K, "mla gemm_nn: B.rows = {} violates B.rows == A.cols = {}", B.rows(), K);
  require(C.rows() == M && C.cols() == N, "mla gemm_nn: C is [{}, {}] where [{}, {}] is required", C.rows(),
          C.cols(), M, N);
  count_macs(M, N, K);
  const int64_t w = detail::chunk_cols(N), chunks = (N + w - 1) / w;
  detail::for_chunks(chunks, M * N * K >= detail::kGemmParallelMacs, [&](int64_t c) {
    const int64_t n0 = c * w, nb = std::min(w, N - n0);
    if (std::is_same_v<T, double> || fixed_order()) {
      gemm_fixed_order<T>(M, nb, K, T(1), A.data(), A.outerStride(), Op::N, B.data() + n0, B.outerStride(), Op::N,
                          C.data() + n0, C.outerStride(), accumulate);
    } else if (accumulate) {
      C.middleCols(n0, nb).noalias() += A * B.middleCols(n0, nb);
    } else {
      C.middleCols(n0, nb).noalias() = A * B.middleCols(n0, nb);
    }
  });
}

}  // namespace ladder::mla
