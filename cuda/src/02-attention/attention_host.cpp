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
  require(p.d >= 1 && p.d <= 128,
          "cuda attention tiled_bf16: d = {} violates 1 <= d <= 128 (padded to a kernel's head dim, 64 or 128)", p.d);
  const Dims k = dims_of(p, "cuda tiled_bf16");
  ladder::attention::check_pointers("cuda tiled_bf16", Q, K, V, O, L);
  const auto aligned = [](const uint16_t* x) { return reinterpret_cast<std::uintptr_t>(x) % 16 == 0; };
  if ((p.d == 64 || p.d == 128) && aligned(Q) && aligned(K) && aligned(V)) {  // the kernel as it is, no copies
    detail::launch_tiled_bf16(k, Q, K, V, O, L);
    return;
  }
  // Any other d (or rows not 16-byte aligned for cp.async): Q, K, V copied into zero-padded [B,H,N,D] buffers,
  // the D kernel run on them with the caller's scale (k.scale, not 1/sqrt(D)), O's first d columns copied back;
  // L is written in place. The zero columns add exact zeros to every q_i . k_j and give O columns that are zero
  // and unused (attention_bf16_pad.cuh).
  const int D = p.d <= 64 ? 64 : 128;
  const size_t q_rows = static_cast<size_t>(p.heads() * p.Nq), k_rows = static_cast<size_t>(p.heads() * p.Nk);
  DeviceBuffer<uint16_t> Qp(q_rows * D), Kp(k_rows * D), Vp(k_rows * D);
  DeviceBuffer<float> Op(q_rows * D);
  detail::launch_bf16_pad(Q, Qp.data(), q_rows, k.d, D);
  detail::launch_bf16_pad(K, Kp.data(), k_rows, k.d, D);
  detail::launch_bf16_pad(V, Vp.data(), k_rows, k.d, D);
  Dims padded = k;
  padded.d = D;
  padded.dv = 0;  // O's rows are D wide too (a fully masked block zeroes rows of d_v = d entries otherwise)
  detail::launch_tiled_bf16(padded, Qp.data(), Kp.data(), Vp.data(), Op.data(), L);
  detail::launch_bf16_unpad(Op.data(), O, q_rows, k.d, D);
  sync();  // the padded buffers are freed on return
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
