// cuda/src/02-attention/registry.cpp -- the stage-02 CUDA rungs in the registry (backend "cuda"). Each entry's
// f32 function copies the inputs to device buffers, runs the kernels and copies the outputs back, so tests,
// the CLI and notebooks call a CUDA rung exactly like a reference rung (attention::ForwardFns /
// BackwardFns). f64 is empty: fp32 kernels.
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/cuda/02-attention/attention.hpp"
#include "ladder/cuda/device.hpp"

namespace ladder::cuda {

namespace {

namespace ref = ladder::attention;
using Forward = void (*)(const ref::Problem&, const float*, const float*, const float*, float*, float*, float*);

ref::ForwardFns forward_wrapper(Forward f) {
  return {[f](const ref::Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m) {
            ref::Problem same_dv = p;  // d_v != d: the host API says which kernel takes it (tiled_16)
            same_dv.dv = 0;
            ref::check_problem(same_dv, "cuda");
            ref::check_pointers("cuda", Q, K, V, O, L);
            const size_t nq = size_t(p.heads() * p.Nq), nk = size_t(p.heads() * p.Nk), d = size_t(p.d);
            const size_t dv = size_t(p.dim_v());
            DeviceBuffer<float> dQ(Q, nq * d), dK(K, nk * d), dV(V, nk * dv), dO(nq * dv), dL(nq), dm(nq);
            f(p, dQ.data(), dK.data(), dV.data(), dO.data(), dL.data(), m ? dm.data() : nullptr);
            sync();
            dO.copy_to_host(O, nq * dv);
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

// Called by the list CMake generates from the folders cuda/src/NN-stage/ (cuda/CMakeLists.txt).
void rungs_02_attention(Registry& r) {
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
