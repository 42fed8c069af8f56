// cuda/src/02_attention_host.cpp -- the checked host API of the stage-02 kernels (ladder/cuda/attention.hpp)
// and their registry entries. Shapes are validated here, with ladder::Error naming the parameter, then
// cuda/src/02_attention*.cu launch. Each registry entry's f32 function copies the inputs to device
// buffers, runs the kernels and copies the outputs back, so tests, the CLI and notebooks call a CUDA
// rung exactly like a reference rung (attention::ForwardFns / BackwardFns). f64 is empty: fp32 kernels.
#include "ladder/attention.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/attention.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::cuda {
namespace attention {
namespace {

Dims dims_of(const Problem& p, const char* rung) {
  ladder::attention::check_problem(p, rung);
  constexpr int64_t kIntMax = 0x7fffffff;
  require(p.heads() <= 65535, "cuda attention {}: B * H = {} violates B * H <= 65535 (grid.y)", rung, p.heads());
  require(p.Nq <= kIntMax && p.Nk <= kIntMax, "cuda attention {}: Nq = {}, Nk = {} violate Nq, Nk <= 2^31 - 1",
          rung, p.Nq, p.Nk);
  require(p.d <= kMaxHeadDim, "cuda attention {}: d = {} violates d <= kMaxHeadDim = {}", rung, p.d, kMaxHeadDim);
  return Dims{int(p.B), int(p.H), int(p.Nq), int(p.Nk), int(p.d), float(p.scale), p.causal};
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
  const Dims k = dims_of(p, "cuda tiled");
  ladder::attention::check_pointers("cuda tiled", Q, K, V, O, L);
  detail::launch_tiled(k, Q, K, V, O, L, m);
}

void tiled(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
  if (forced_rows == kBr) tiled_16(p, Q, K, V, O, L, m);
  else tiled_wide(p, Q, K, V, O, L, m);
}

void backward_recompute(const Problem& p, const float* Q, const float* K, const float* V, const float* O,
                        const float* dO, const float* L, float* dQ, float* dK, float* dV, float* D) {
  const Dims k = dims_of(p, "cuda backward_recompute");
  ladder::attention::check_pointers("cuda backward_recompute", Q, K, V, O, dO, L, dQ, dK, dV, D);
  detail::launch_backward_D(k, O, dO, D, dQ);
  detail::launch_backward_kv(k, Q, K, V, dO, L, D, dQ, dK, dV);
}

}  // namespace attention

namespace {

namespace ref = ladder::attention;
using Forward = void (*)(const ref::Problem&, const float*, const float*, const float*, float*, float*, float*);

ref::ForwardFns forward_wrapper(Forward f) {
  return {[f](const ref::Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
            ref::check_problem(p, "cuda");
            ref::check_pointers("cuda", Q, K, V, O, L);
            const size_t nq = size_t(p.heads() * p.Nq), nk = size_t(p.heads() * p.Nk), d = size_t(p.d);
            DeviceBuffer<float> dQ(Q, nq * d), dK(K, nk * d), dV(V, nk * d), dO(nq * d), dL(nq), dm(nq);
            f(p, dQ.data(), dK.data(), dV.data(), dO.data(), dL.data(), m ? dm.data() : nullptr);
            sync();
            dO.copy_to_host(O, nq * d);
            dL.copy_to_host(L, nq);
            if (m) dm.copy_to_host(m, nq);
          },
          nullptr};
}

ref::BackwardFns backward_wrapper() {
  return {[](const ref::Problem& p, const float* Q, const float* K, const float* V, const float* O, const float* dO,
             const float* L, float* dQ, float* dK, float* dV, float* D) {
            ref::check_problem(p, "cuda");
            ref::check_pointers("cuda", Q, K, V, O, dO, L, dQ, dK, dV, D);
            const size_t nq = size_t(p.heads() * p.Nq), nk = size_t(p.heads() * p.Nk), d = size_t(p.d);
            DeviceBuffer<float> bQ(Q, nq * d), bK(K, nk * d), bV(V, nk * d), bO(O, nq * d), bdO(dO, nq * d),
                bL(L, nq), bdQ(nq * d), bdK(nk * d), bdV(nk * d), bD(nq);
            attention::backward_recompute(p, bQ.data(), bK.data(), bV.data(), bO.data(), bdO.data(), bL.data(),
                                          bdQ.data(), bdK.data(), bdV.data(), bD.data());
            sync();
            bdQ.copy_to_host(dQ, nq * d);
            bdK.copy_to_host(dK, nk * d);
            bdV.copy_to_host(dV, nk * d);
            bD.copy_to_host(D, nq);
          },
          nullptr};
}

}  // namespace

void register_attention_cuda(Registry& r) {
  using namespace ladder::attention;
  const Tiles tiles{attention::kBr, attention::kBc};  // the backward's tile sizes, for the counted formulas
  const Tiles wide{attention::kWideBr, attention::kWideBc};  // the default forward kernel's (tiled_wide)
  auto cost_of = [](auto f) { return [f](const Shape& s) { return f(problem_from_shape(s)); }; };
  r.add({kStage, "naive", "naive: scores, softmax, PV kernels", "S and P in device memory; warp-per-row softmax",
         "cuda", forward_wrapper(&attention::naive), cost_of([](const Problem& p) { return naive_forward_cost(p); }),
         "as ref naive: S, P round-trip device memory"});
  r.add({kStage, "flash", "flash row: one warp per query row (Fig. 8)",
         "lanes split d; x_j by warp sum; m, d', o' carried in registers", "cuda", forward_wrapper(&attention::flash),
         cost_of([](const Problem& p) { return flash_forward_cost(p); }), "as ref flash: K, V re-read per row"});
  r.add({kStage, "tiled", "tiled FA2 forward: block per (head, Q tile)",
         "64-key K/V tiles streamed through shared memory, S and O_i in registers, deferred normalisation", "cuda",
         forward_wrapper(&attention::tiled),
         cost_of([wide](const Problem& p) { return tiled_forward_cost(p, wide); }),
         "as ref tiled with Br = Bc = 64 (tiled_wide; tiled_16: 16): K, V read once per Q tile"});
  r.add({kStage, "backward_recompute", "backward with recomputation: block per (head, KV tile)",
         "P rebuilt from Q, K, L per tile; dK, dV in registers; dQ by atomicAdd", "cuda", backward_wrapper(),
         cost_of([tiles](const Problem& p) { return recompute_backward_cost(p, tiles); }),
         "as ref recompute with Br = Bc = 16; dQ updates are atomics"});
}

}  // namespace ladder::cuda
