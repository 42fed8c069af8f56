// cuda/src/04-moe/moe_host.cpp -- the checked host API of the stage-04 kernels (ladder/cuda/04-moe/moe.hpp): sizes
// validated with ladder::Error, scratch allocated, the grouped GEMM's tile list scheduled, then the
// launches of moe.cu and moe_gemm.cu.
#include <algorithm>

#include "ladder/core/error.hpp"
#include "ladder/cuda/device.hpp"
#include "ladder/cuda/04-moe/moe.hpp"

namespace ladder::cuda::moe {

void gate(const GateParams& p, const float* x, const float* W_gate, const float* bias, int64_t* topk_idx,
          float* topk_weight) {
  ladder::moe::Config c;
  c.hidden = p.hidden, c.inter = 1, c.n_experts = p.n_experts, c.top_k = p.top_k, c.n_group = p.n_group;
  c.topk_group = p.topk_group, c.route_scale = p.route_scale;
  ladder::moe::check_config(c);
  require(p.tokens >= 0, "cuda::moe::gate: tokens = {} violates tokens >= 0", p.tokens);
  require(p.tokens == 0 || (x && W_gate && bias && topk_idx && topk_weight), "cuda::moe::gate: a pointer is nullptr");
  detail::launch_gate(p, x, W_gate, bias, topk_idx, topk_weight);
}

void permute(const int64_t* keys, int64_t n, int64_t G, int64_t* sort_idx, int64_t* inverse, int64_t* group_sizes) {
  require(n >= 0, "cuda::moe::permute: n = {} violates n >= 0", n);
  require(G >= 1 && G < 12288, "cuda::moe::permute: G = {} violates 1 <= G < 12288 (shared histogram)", G);
  const int64_t chunks = n == 0 ? 1 : (n + kSortChunk - 1) / kSortChunk;
  DeviceBuffer<int64_t> counts(static_cast<size_t>(chunks * (G + 1))), offsets(static_cast<size_t>(chunks * (G + 1)));
  detail::launch_permute(keys, n, G, counts.data(), offsets.data(), group_sizes, sort_idx, inverse);
  sync();
}

std::vector<Tile> make_tiles(const std::vector<int64_t>& group_sizes, int64_t N) {
  std::vector<Tile> tiles;
  for (size_t g = 0; g < group_sizes.size(); ++g)
    for (int64_t r = 0; r < group_sizes[g]; r += kGemmTile)
      for (int64_t c = 0; c < N; c += kGemmTile)
        tiles.push_back(Tile{int64_t(g), r, std::min<int64_t>(kGemmTile, group_sizes[g] - r), c});
  return tiles;
}

void ragged_dot(const float* lhs, int64_t m, int64_t K, const float* rhs, int64_t G, int64_t N,
                const int64_t* group_sizes, float* out) {
  require(m >= 0 && K >= 1 && G >= 1 && N >= 1, "cuda::moe::ragged_dot: m = {}, K = {}, G = {}, N = {} violate "
          "m >= 0, K, G, N >= 1", m, K, G, N);
  std::vector<int64_t> gs(static_cast<size_t>(G));
  sync();
  std::vector<int64_t> offsets(static_cast<size_t>(G + 1), 0);
  copy_to_host(group_sizes, gs.data(), gs.size());  // device memory: never read it directly on the host
  for (int64_t g = 0; g < G; ++g) {
    require(gs[static_cast<size_t>(g)] >= 0, "cuda::moe::ragged_dot: group_sizes[{}] = {} violates >= 0", g, gs[static_cast<size_t>(g)]);
    offsets[static_cast<size_t>(g + 1)] = offsets[static_cast<size_t>(g)] + gs[static_cast<size_t>(g)];
  }
  require(offsets.back() <= m, "cuda::moe::ragged_dot: sum(group_sizes) = {} violates <= m = {}", offsets.back(), m);
  const std::vector<Tile> tiles = make_tiles(gs, N);
  DeviceBuffer<Tile> d_tiles(tiles);
  DeviceBuffer<int64_t> d_offsets(offsets);
  detail::launch_grouped_gemm(d_tiles.data(), int64_t(tiles.size()), lhs, K, rhs, N, d_offsets.data(), out,
                              offsets.back(), m);
  sync();
}

void dropless(const ladder::moe::Weights<float>& w, const float* x, int64_t T, const int64_t* topk_idx,
              const float* topk_weight, float* y, int64_t* sort_idx, int64_t* group_sizes) {
  ladder::moe::check_weights(w);
  const int64_t D = w.cfg.hidden, F = w.cfg.inter, E = w.cfg.n_experts, k = w.cfg.top_k, n = T * k;
  const int64_t Fs = w.cfg.shared_inter;
  DeviceBuffer<float> w1(w.w1), w3(w.w3), w2(w.w2);
  DeviceBuffer<int64_t> inverse(static_cast<size_t>(n));
  DeviceBuffer<float> xs(static_cast<size_t>(n * D)), h1(static_cast<size_t>(n * F)), h3(static_cast<size_t>(n * F)),
      o(static_cast<size_t>(n * D));
  permute(topk_idx, n, E, sort_idx, inverse.data(), group_sizes);
  detail::launch_gather(x, D, sort_idx, k, n, xs.data());
  ragged_dot(xs.data(), n, D, w1.data(), E, F, group_sizes, h1.data());
  ragged_dot(xs.data(), n, D, w3.data(), E, F, group_sizes, h3.data());
  detail::launch_swiglu(h1.data(), h3.data(), n * F);
  ragged_dot(h1.data(), n, F, w2.data(), E, D, group_sizes, o.data());
  bool accumulate = false;
  if (Fs > 0 && T > 0) {  // the shared expert: one group of all T tokens through the same grouped GEMM
    DeviceBuffer<float> s1(w.s1.data(), static_cast<size_t>(D * Fs)), s3(w.s3.data(), static_cast<size_t>(D * Fs)), s2(w.s2.data(), static_cast<size_t>(Fs * D));
    DeviceBuffer<int64_t> all(std::vector<int64_t>{T});
    DeviceBuffer<float> g1(static_cast<size_t>(T * Fs)), g3(static_cast<size_t>(T * Fs));
    ragged_dot(x, T, D, s1.data(), 1, Fs, all.data(), g1.data());
    ragged_dot(x, T, D, s3.data(), 1, Fs, all.data(), g3.data());
    detail::launch_swiglu(g1.data(), g3.data(), T * Fs);
    ragged_dot(g1.data(), T, Fs, s2.data(), 1, D, all.data(), y);
    accumulate = true;
  }
  detail::launch_combine(o.data(), inverse.data(), topk_weight, T, k, D, y, accumulate);
  sync();
}

}  // namespace ladder::cuda::moe
