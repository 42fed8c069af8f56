// cuda/src/02-attention/attention_host.cpp -- the checked host API of the stage-02 kernels
// (ladder/cuda/02-attention/attention.hpp). Shapes are validated here, with ladder::Error naming the parameter, then
// cuda/src/02-attention/*.cu launch. The registry entries are in registry.cpp.
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::cuda {
namespace attention {
namespace {

// The kernels' dims. d_v != d only where `takes_dv` (tiled_16).
Dims dims_of(const Problem& p, const char* rung, bool takes_dv = false) {
  Problem same_dv = p;  // check_problem refuses d_v != d for every rung but the reference naive; tiled_16 takes it
  if (takes_dv) same_dv.dv = 0;
  ladder::attention::check_problem(same_dv, rung);
  constexpr int64_t kIntMax = 0x7fffffff;
  require(p.heads() <= 65535, "cuda attention {}: B * H = {} violates B * H <= 65535 (grid.y)", rung, p.heads());
  require(p.Nq <= kIntMax && p.Nk <= kIntMax, "cuda attention {}: Nq = {}, Nk = {} violate Nq, Nk <= 2^31 - 1",
          rung, p.Nq, p.Nk);
  if (p.dim_v() == p.d)
    require(p.d <= kMaxHeadDim, "cuda attention {}: d = {} violates d <= kMaxHeadDim = {}", rung, p.d, kMaxHeadDim);
  else
    require(p.d <= kMaxQKHeadDim && p.dim_v() <= kMaxHeadDim, "cuda attention {}: d = {}, d_v = {} violate d <= "
            "kMaxQKHeadDim = {}, d_v <= kMaxHeadDim = {}", rung, p.d, p.dim_v(), kMaxQKHeadDim, kMaxHeadDim);
  return Dims{int(p.B), int(p.H), int(p.Nq), int(p.Nk), int(p.d), float(p.scale), p.causal, int(p.dim_v())};
}

}  // namespace

void naive(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const Dims k = dims_of(p, "cuda naive");
  ladder::attention::check_pointers("cuda naive", Q, K, V, O, L);
  const size_t n = static_cast<size_t>(p.heads() * p.Nq * p.Nk);
  DeviceBuffer<float> S(n), P(n);
  detail::launch_naive_scores(k, Q, K, S.data());
  detail::launch_naive_softmax(k, S.data(), P.data(), L, m);
  detail::launch_naive_pv(k, P.data(), V, O);
  sync();  // S and P are freed on return
}

void flash(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const Dims k = dims_of(p, "cuda flash");
  ladder::attention::check_pointers("cuda flash", Q, K, V, O, L);
  detail::launch_flash_row(k, Q, K, V, O, L, m);
}

namespace {
int forced_rows = 0;  // ForceTiled's choice (0: the default, tiled_wide)
}  // namespace

ForceTiled::ForceTiled(int rows) : previous_(forced_rows) {
  require(rows == kWideBr || rows == kBr, "cuda attention ForceTiled: rows = {} violates rows in {{{}, {}}}", rows,
          kWideBr, kBr);
  forced_rows = rows;
}
ForceTiled::~ForceTiled() { forced_rows = previous_; }

void tiled_wide(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const Dims k = dims_of(p, "cuda tiled");
  ladder::attention::check_pointers("cuda tiled", Q, K, V, O, L);
  detail::launch_tiled_wide(k, Q, K, V, O, L, m);
}

void tiled_16(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  const Dims k = dims_of(p, "cuda tiled_16", true);
  ladder::attention::check_pointers("cuda tiled", Q, K, V, O, L);
  detail::launch_tiled(k, Q, K, V, O, L, m);
}

void tiled(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  if (forced_rows == kBr) tiled_16(p, Q, K, V, O, L, m);
  else tiled_wide(p, Q, K, V, O, L, m);
}

void tiled_bf16(const Problem& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L) {
  require(p.d == 64 || p.d == 128,
          "cuda attention tiled_bf16: d = {} violates d in {{64, 128}} (one kernel per head dim)", p.d);
  const Dims k = dims_of(p, "cuda tiled_bf16");
  ladder::attention::check_pointers("cuda tiled_bf16", Q, K, V, O, L);
  for (const uint16_t* x : {Q, K, V})  // cp.async copies 16-byte chunks of the rows
    require(reinterpret_cast<std::uintptr_t>(x) % 16 == 0,
            "cuda attention tiled_bf16: an input at {} violates 16-byte alignment", static_cast<const void*>(x));
  detail::launch_tiled_bf16(k, Q, K, V, O, L);
}

void backward_recompute(const Problem& p, const float* Q, const float* K, const float* V, const float* O,
                        const float* dO, const float* L, float* dQ, float* dK, float* dV, float* D) {
  const Dims k = dims_of(p, "cuda backward_recompute");
  ladder::attention::check_pointers("cuda backward_recompute", Q, K, V, O, dO, L, dQ, dK, dV, D);
  detail::launch_backward_D(k, O, dO, D, dQ);
  detail::launch_backward_kv(k, Q, K, V, dO, L, D, dQ, dK, dV);
}

}  // namespace attention

}  // namespace ladder::cuda
