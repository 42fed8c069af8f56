// ladder/06-disagg/deploy/sharding.hpp -- stage 06, part 2: sharding rungs in one process, P simulated ranks.
//
//   06 disagg   step-time model -> event simulator -> KV-cache migration -> [deployment: layouts, memory,
//               traffic, overlap, MTP; SHARDING: TP FFN (all-reduce | reduce-scatter), MLA-style attention
//               DP -> TP -> DP, MoE dispatch]
//
// Each rank's data is its own matrix; collectives move chunks between them and COUNT the bytes every
// rank sends, split into intra- and inter-node by the rank -> node map (rank / per_node):
//   ring reduce-scatter   P - 1 steps, each rank sends one chunk to rank + 1 and adds what it receives
//   ring all-gather       P - 1 steps, each rank forwards the chunk it last received
//   all-reduce            reduce-scatter then all-gather: 2 (P - 1) / P of the tensor per rank, against
//                         (P - 1) / P for reduce-scatter alone (the JAX DeepSeek-R1 README: 2 units vs 1)
//   all-to-all            rank r sends block [r][d] to rank d
// A dense SwiGLU FFN y = (silu(x W1) * (x W3)) W2 runs tensor-parallel: W1, W3 split by columns, W2 by
// rows (column- then row-parallel); rank r's partial y_r sums to y, by all-reduce (every rank gets
// all of y) or reduce-scatter (rank r gets its block of token rows: sequence parallel). The sums run in
// a fixed order (loops here, not Eigen's cache-dependent GEMM).
#pragma once
#include <cstdint>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/math.hpp"
#include "ladder/core/tensor.hpp"
#include "ladder/02-attention/naive.hpp"

namespace ladder::deploy {

struct Comm {
  int64_t ranks = 1, per_node = 1;
  std::vector<double> intra, inter;  // bytes sent per rank
  Comm(int64_t p, int64_t c) : ranks(p), per_node(c), intra(static_cast<size_t>(p)), inter(static_cast<size_t>(p)) {
    require(p >= 1 && c >= 1, "Comm: ranks = {}, per_node = {} violate >= 1", p, c);
  }
  void send(int64_t from, int64_t to, double bytes) {
    if (from == to) return;
    (from / per_node == to / per_node ? intra : inter)[static_cast<size_t>(from)] += bytes;
  }
  double sent(int64_t r) const { return intra[static_cast<size_t>(r)] + inter[static_cast<size_t>(r)]; }
};

// Row range [lo, hi) of chunk c when n rows are cut into p chunks (the first n % p one row longer).
inline std::pair<int64_t, int64_t> chunk(int64_t n, int64_t p, int64_t c) {
  const int64_t base = n / p, extra = n % p;
  const int64_t lo = c * base + std::min(c, extra);
  return {lo, lo + base + (c < extra ? 1 : 0)};
}

// Ring reduce-scatter over the rows of x[r] (all the same shape): afterwards rank r holds the sum of
// every rank's chunk (r + 1) % P ... in the standard ring order; we return each rank's owned chunk c = r.
template <class T>
std::vector<Mat<T>> reduce_scatter_ring(std::vector<Mat<T>> x, Comm& comm) {
  const int64_t P = static_cast<int64_t>(x.size()), n = x[0].rows(), cols = x[0].cols();
  require(P == comm.ranks, "reduce_scatter: {} inputs for {} ranks", P, comm.ranks);
  // Step s: rank r sends its running sum of chunk (r - s - 1) mod P to rank r + 1, which adds it.
  for (int64_t s = 0; s < P - 1; ++s) {
    std::vector<Mat<T>> msg(static_cast<size_t>(P));
    for (int64_t r = 0; r < P; ++r) {
      const auto [lo, hi] = chunk(n, P, ((r - s - 1) % P + P) % P);
      msg[static_cast<size_t>(r)] = x[static_cast<size_t>(r)].middleRows(lo, hi - lo);
      comm.send(r, (r + 1) % P, static_cast<double>((hi - lo) * cols) * sizeof(T));
    }
    for (int64_t r = 0; r < P; ++r) {
      const int64_t from = (r - 1 + P) % P;
      const auto [lo, hi] = chunk(n, P, ((from - s - 1) % P + P) % P);
      x[static_cast<size_t>(r)].middleRows(lo, hi - lo) += msg[static_cast<size_t>(from)];
    }
  }
  // After P - 1 steps rank r holds the full sum of chunk (r - P) mod P = r.
  std::vector<Mat<T>> out(static_cast<size_t>(P));
  for (int64_t r = 0; r < P; ++r) {
    const auto [lo, hi] = chunk(n, P, r);
    out[static_cast<size_t>(r)] = x[static_cast<size_t>(r)].middleRows(lo, hi - lo);
  }
  return out;
}

// Ring all-gather of rank r's chunk r (rows) into the whole matrix on every rank.
template <class T>
std::vector<Mat<T>> all_gather_ring(const std::vector<Mat<T>>& part, int64_t n, Comm& comm) {
  const int64_t P = static_cast<int64_t>(part.size()), cols = part[0].cols();
  std::vector<Mat<T>> full(static_cast<size_t>(P), Mat<T>::Zero(n, cols));
  for (int64_t r = 0; r < P; ++r) {
    const auto [lo, hi] = chunk(n, P, r);
    full[static_cast<size_t>(r)].middleRows(lo, hi - lo) = part[static_cast<size_t>(r)];
  }
  // Step s: rank r forwards chunk (r - s) mod P to rank r + 1.
  for (int64_t s = 0; s < P - 1; ++s) {
    std::vector<Mat<T>> msg(static_cast<size_t>(P));
    for (int64_t r = 0; r < P; ++r) {
      const auto [lo, hi] = chunk(n, P, ((r - s) % P + P) % P);
      msg[static_cast<size_t>(r)] = full[static_cast<size_t>(r)].middleRows(lo, hi - lo);
      comm.send(r, (r + 1) % P, static_cast<double>((hi - lo) * cols) * sizeof(T));
    }
    for (int64_t r = 0; r < P; ++r) {
      const int64_t from = (r - 1 + P) % P;
      const auto [lo, hi] = chunk(n, P, ((from - s) % P + P) % P);
      full[static_cast<size_t>(r)].middleRows(lo, hi - lo) = msg[static_cast<size_t>(from)];
    }
  }
  return full;
}

template <class T>
std::vector<Mat<T>> all_reduce_ring(const std::vector<Mat<T>>& x, Comm& comm) {
  return all_gather_ring(reduce_scatter_ring(x, comm), x[0].rows(), comm);
}

// C = A B with the k-sum in index order (the same bits for any Eigen build or CPU).
template <class T>
Mat<T> matmul_ordered(const Mat<T>& A, const Mat<T>& B) {
  require(A.cols() == B.rows(), "matmul: A.cols = {} violates == B.rows = {}", A.cols(), B.rows());
  Mat<T> C = Mat<T>::Zero(A.rows(), B.cols());
  for (int64_t i = 0; i < A.rows(); ++i)
    for (int64_t k = 0; k < A.cols(); ++k)
      for (int64_t j = 0; j < B.cols(); ++j) C(i, j) += A(i, k) * B(k, j);
  return C;
}

// SwiGLU FFN: x [T, h], W1 and W3 [h, F], W2 [F, h] -> [T, h].
template <class T>
Mat<T> ffn_swiglu(const Mat<T>& x, const Mat<T>& W1, const Mat<T>& W3, const Mat<T>& W2) {
  Mat<T> a = matmul_ordered(x, W1);
  const Mat<T> b = matmul_ordered(x, W3);
  for (int64_t i = 0; i < a.rows(); ++i)
    for (int64_t j = 0; j < a.cols(); ++j) a(i, j) = a(i, j) / (T(1) + math::exp(-a(i, j))) * b(i, j);
  return matmul_ordered(a, W2);
}

// Rank r's partial output of the TP FFN: columns [lo, hi) of W1 and W3, the same rows of W2.
template <class T>
Mat<T> ffn_tp_partial(const Mat<T>& x, const Mat<T>& W1, const Mat<T>& W3, const Mat<T>& W2, int64_t P, int64_t r) {
  require(W1.cols() >= P, "ffn_tp: F = {} violates F >= P = {}", W1.cols(), P);
  const auto [lo, hi] = chunk(W1.cols(), P, r);
  return ffn_swiglu<T>(x, W1.middleCols(lo, hi - lo), W3.middleCols(lo, hi - lo), W2.middleRows(lo, hi - lo));
}

// TP FFN, all-reduce form: every rank ends with all of y.
template <class T>
std::vector<Mat<T>> ffn_tp_all_reduce(const Mat<T>& x, const Mat<T>& W1, const Mat<T>& W3, const Mat<T>& W2,
                                      Comm& comm) {
  std::vector<Mat<T>> part;
  for (int64_t r = 0; r < comm.ranks; ++r) part.push_back(ffn_tp_partial(x, W1, W3, W2, comm.ranks, r));
  return all_reduce_ring(part, comm);
}

// TP FFN, reduce-scatter form: rank r ends with token rows chunk(T, P, r) of y.
template <class T>
std::vector<Mat<T>> ffn_tp_reduce_scatter(const Mat<T>& x, const Mat<T>& W1, const Mat<T>& W3, const Mat<T>& W2,
                                          Comm& comm) {
  std::vector<Mat<T>> part;
  for (int64_t r = 0; r < comm.ranks; ++r) part.push_back(ffn_tp_partial(x, W1, W3, W2, comm.ranks, r));
  return reduce_scatter_ring(part, comm);
}

// Attention with low-rank projections, the MLA prefill shape of the Huawei report Sec. 3.2.1 (Fig. 5b)
// without RoPE and norms (the sharding is what is tested): down projections c = x W_down [T, r]; per head h
// q_h = c W_q[h], k_h = c W_k[h], v_h = c W_v[h] (head dim d); causal softmax attention per head
// (stage 02's naive_forward); y = concat_h(o_h) W_o. Weights: W_down [h_model, r], W_q, W_k, W_v
// [r, H d] (head h = columns h d .. h d + d), W_o [H d, h_model].
template <class T>
struct LowRankAttention {
  Mat<T> W_down, W_q, W_k, W_v, W_o;
  int64_t heads = 1, d = 1;
};

// The heads [h0, h1) of every token: o [T, (h1 - h0) d] from the compressed rows c [T, r].
template <class T>
Mat<T> attention_heads(const LowRankAttention<T>& w, const Mat<T>& c, int64_t h0, int64_t h1) {
  const int64_t T_ = c.rows(), d = w.d, nh = h1 - h0;
  const Mat<T> q = matmul_ordered<T>(c, w.W_q.middleCols(h0 * d, nh * d));
  const Mat<T> k = matmul_ordered<T>(c, w.W_k.middleCols(h0 * d, nh * d));
  const Mat<T> v = matmul_ordered<T>(c, w.W_v.middleCols(h0 * d, nh * d));
  // [T, nh d] -> [1, nh, T, d] for stage 02's layout, and back.
  std::vector<T> Q(static_cast<size_t>(nh * T_ * d)), K(Q.size()), V(Q.size()), O(Q.size()), L(static_cast<size_t>(nh * T_));
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t j = 0; j < d; ++j) {
        const size_t at = static_cast<size_t>((h * T_ + t) * d + j);
        Q[at] = q(t, h * d + j), K[at] = k(t, h * d + j), V[at] = v(t, h * d + j);
      }
  attention::naive_forward<T>(attention::Problem::make(1, nh, T_, T_, d, true), Q.data(), K.data(), V.data(), O.data(),
                              L.data(), nullptr);
  Mat<T> o(T_, nh * d);
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t j = 0; j < d; ++j) o(t, h * d + j) = O[static_cast<size_t>((h * T_ + t) * d + j)];
  return o;
}

template <class T>
Mat<T> low_rank_attention(const LowRankAttention<T>& w, const Mat<T>& x) {
  return matmul_ordered<T>(attention_heads(w, matmul_ordered<T>(x, w.W_down), 0, w.heads), w.W_o);
}

// DP -> TP -> DP on P ranks: rank r holds token rows chunk(T, P, r) (DP). Each projects its own rows
// down (DP16 in the report: small weights, replicated), the compressed rows are all-gathered (the
// conversion after the down projections, where rows are narrowest), rank r computes heads
// chunk(H, P, r) for every token (TP), an all-to-all returns each token's heads to the rank that owns
// the token, which applies W_o (DP). Returns each rank's output rows.
template <class T>
std::vector<Mat<T>> low_rank_attention_dp_tp(const LowRankAttention<T>& w, const std::vector<Mat<T>>& x_rows,
                                             Comm& comm) {
  const int64_t P = comm.ranks;
  require(static_cast<int64_t>(x_rows.size()) == P && w.heads >= P, "dp_tp: {} row blocks, {} heads for {} ranks",
          x_rows.size(), w.heads, P);
  int64_t T_ = 0;
  for (const auto& x : x_rows) T_ += x.rows();
  std::vector<Mat<T>> c_rows;
  for (const auto& x : x_rows) c_rows.push_back(matmul_ordered<T>(x, w.W_down));
  const std::vector<Mat<T>> c_all = all_gather_ring(c_rows, T_, comm);
  std::vector<Mat<T>> o_heads;  // rank r: [T, its heads x d]
  for (int64_t r = 0; r < P; ++r) {
    const auto [h0, h1] = chunk(w.heads, P, r);
    o_heads.push_back(attention_heads(w, c_all[static_cast<size_t>(r)], h0, h1));
  }
  std::vector<Mat<T>> out;
  for (int64_t dst = 0; dst < P; ++dst) {  // all-to-all: rank src sends rows of dst's tokens, its heads
    const auto [t0, t1] = chunk(T_, P, dst);
    Mat<T> o(t1 - t0, w.heads * w.d);
    for (int64_t src = 0; src < P; ++src) {
      const auto [h0, h1] = chunk(w.heads, P, src);
      o.middleCols(h0 * w.d, (h1 - h0) * w.d) = o_heads[static_cast<size_t>(src)].middleRows(t0, t1 - t0);
      comm.send(src, dst, static_cast<double>((t1 - t0) * (h1 - h0) * w.d) * sizeof(T));
    }
    out.push_back(matmul_ordered<T>(o, w.W_o));
  }
  return out;
}

// MoE dispatch volume, counted: `tokens` rows of `h` elements of `bytes` on each of P ranks; token t of
// rank r goes to the ranks in route(r, t) (its experts' ranks, with repeats for two experts on one
// rank). AllGather: every rank receives every token once (hierarchical: one copy per remote node
// crosses the node boundary, then spreads inside the node). All2All: one copy per chosen expert.
struct DispatchCount {
  double allgather_inter_per_rank = 0, all2all_inter_per_rank = 0;
};

template <class Route>
DispatchCount count_dispatch(int64_t P, int64_t per_node, int64_t tokens, int64_t h, double bytes, Route route) {
  Comm ag(P, per_node), a2a(P, per_node);
  const int64_t nodes = P / per_node;
  const double row = static_cast<double>(h) * bytes;
  for (int64_t r = 0; r < P; ++r) {
    // Hierarchical AllGather, inter-node stage: rank r sends its rows to its counterpart on each other node.
    for (int64_t k = 1; k < nodes; ++k) ag.send(r, (r + k * per_node) % P, static_cast<double>(tokens) * row);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t dst : route(r, t)) a2a.send(r, dst, row);
  }
  DispatchCount c;
  for (int64_t r = 0; r < P; ++r) c.allgather_inter_per_rank += ag.inter[static_cast<size_t>(r)] / static_cast<double>(P);
  for (int64_t r = 0; r < P; ++r) c.all2all_inter_per_rank += a2a.inter[static_cast<size_t>(r)] / static_cast<double>(P);
  return c;
}

}  // namespace ladder::deploy
