// ladder/mpi/tp_shard.hpp -- tensor parallelism of an MLA layer's heads (Megatron-LM, Shoeybi et al. 2019,
// §3), the part without MPI: the head shards and the sum of their partial outputs in rank order. The
// all-reduce over ranks is ladder/mpi/tp.hpp; ladder/mpi/kv_pipeline.hpp's one-process reference uses
// this part to emulate it.
//
// Rank q of T holds heads [q H/T, (q + 1) H/T): its rows of W_UQ, W_QR and kv_b (W_UK, W_UV) and its
// columns of W_O; W_DQ, W_DKV and the norms are replicated, and so is the compressed cache (MLA's c^KV and
// k^R rows serve every head; chapter 06 §10). A shard is itself an MLA layer of H/T heads, so every
// stage-03 rung decodes it unchanged, and its u_q = W_O[:, its heads] o_q is one partial sum of u. The
// all-reduce is an all-gather of the partials followed by their sum in rank order on every rank
// (u_0 + u_1 + ...): the bits do not depend on the MPI library's reduction tree, and the same sum in one
// process (the emulation the programs check against) gives the same bits.
#pragma once
#include <cstdint>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/03-mla/mla.hpp"

namespace ladder::tp {

// The layer restricted to heads [h0, h1): an MLA layer of h1 - h0 heads on the same compressed cache.
// W_O's columns come from heads [w0, w0 + h1 - h0) (w0 = h0 unless a test plants a shift).
template <class T>
mla::Weights<T> head_shard(const mla::Weights<T>& W, int64_t h0, int64_t h1, int64_t w0) {
  const mla::Config& c = W.cfg;
  const int64_t n = h1 - h0;
  require(0 <= h0 && h0 < h1 && h1 <= c.n_heads && 0 <= w0 && w0 + n <= c.n_heads,
          "tp: head shard [{}, {}) with W_O columns from head {} violates 0 <= h0 < h1 <= {} heads", h0, h1, w0,
          c.n_heads);
  mla::Weights<T> s = W;
  s.cfg.n_heads = n;
  s.W_UQ = W.W_UQ.middleRows(h0 * c.qk_nope, n * c.qk_nope);
  s.W_QR = W.W_QR.middleRows(h0 * c.qk_rope, n * c.qk_rope);
  s.kv_b = W.kv_b.middleRows(h0 * c.kv_b_rows(), n * c.kv_b_rows());
  s.W_O = W.W_O.middleCols(w0 * c.v_head, n * c.v_head);
  mla::check_weights(s, "tp head_shard");
  return s;
}

// Shard q of T (heads [q H/T, (q + 1) H/T)).
template <class T>
mla::Weights<T> shard_of(const mla::Weights<T>& W, int64_t q, int64_t tp) {
  require(tp >= 1 && W.cfg.n_heads % tp == 0 && 0 <= q && q < tp,
          "tp: shard {} of {} violates a divisor of the {} heads", q, tp, W.cfg.n_heads);
  const int64_t h = W.cfg.n_heads / tp;
  return head_shard(W, q * h, (q + 1) * h, q * h);
}

// u = the partials [n][rows * cols] (rank order, each a column-major [rows, cols]) summed in rank order
// from zero, or in reverse order (a test's planted bug: a different rounding, so not the same bits).
inline Mat<float> sum_in_rank_order(const std::vector<float>& parts, int n, int64_t rows, int64_t cols,
                                    bool reverse = false) {
  require(static_cast<int64_t>(parts.size()) == n * rows * cols, "tp: {} partial values for {} x [{}, {}]",
          parts.size(), n, rows, cols);
  Mat<float> u = Mat<float>::Zero(rows, cols);
  for (int i = 0; i < n; ++i) {
    const int q = reverse ? n - 1 - i : i;
    u += ConstMatMap<float>(parts.data() + static_cast<size_t>(q) * rows * cols, rows, cols);
  }
  return u;
}

// The same in one process: the partials of shards 0 .. T-1, summed in rank order.
inline Mat<float> emulate_in_rank_order(const std::vector<Mat<float>>& partials) {
  require(!partials.empty(), "tp: no partials to sum");
  const int64_t rows = partials[0].rows(), cols = partials[0].cols();
  std::vector<float> parts;
  for (const Mat<float>& p : partials) {
    require(p.rows() == rows && p.cols() == cols, "tp: partials of different shapes");
    parts.insert(parts.end(), p.data(), p.data() + p.size());
  }
  return sum_in_rank_order(parts, static_cast<int>(partials.size()), rows, cols);
}

}  // namespace ladder::tp
