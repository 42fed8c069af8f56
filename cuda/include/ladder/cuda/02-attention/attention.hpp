// ladder/cuda/02-attention/attention.hpp -- host API of the stage-02 CUDA rungs (cuda/src/02-attention/*.cu).
//
// Every function takes DEVICE pointers (ladder::cuda::DeviceBuffer<float>::data()) in the layouts of
// ladder/02-attention/problem.hpp (Q, O, dO, dQ [B,H,Nq,d]; K, V, dK, dV [B,H,Nk,d]; L, m, D [B,H,Nq]),
// float32, launches its kernel(s) and returns; call ladder::cuda::sync() before reading the outputs on
// a GPU (under SIMT the launches have finished when the function returns). Same semantics as the
// references: causal masks aligned bottom-right, a fully masked row has O = 0, L = m = -inf and zero
// gradients. m may be null. Bad shapes throw ladder::Error naming the parameter; head dims up to
// kMaxHeadDim (128) are supported (registers and 48 KiB of shared memory per block).
#pragma once
#include <cstdint>

#include "ladder/02-attention/problem.hpp"
#include "ladder/cuda/02-attention/attention_kernels.hpp"

namespace ladder::cuda::attention {

using ladder::attention::Problem;

// naive (notes Alg. 0): three kernels -- scores, softmax (warp per row), PV -- with S and P as
// [B,H,Nq,Nk] scratch in device memory (allocated and freed here).
void naive(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
// flash (notes Fig. 8): one warp per query row, one pass over its visible keys carrying m, d', o'.
void flash(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
// tiled (FA2 Alg. 1): one block per (batch x head, Q tile), K/V tiles in shared memory, deferred
// normalisation; stores L. Two kernels: tiled_wide (64 x 64 tiles, 256 threads, register-tiled S and
// P V, pipelined; the default since issue 13) and tiled_16 (16 x 16 tiles, 128 threads, the kernel
// before it, kept for side-by-side timing). tiled() runs tiled_wide unless a ForceTiled says otherwise.
void tiled(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
void tiled_wide(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
void tiled_16(const Problem& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
// tiled_16 alone also takes p.dv != d (V [B,H,Nk,d_v], O [B,H,Nq,d_v]; d <= kMaxQKHeadDim = 256, d_v <= 128): MLA's
// prefill per head, d = nope + rope = 192, d_v = v = 128 (ladder/cuda/03-mla/mla.hpp, prefill). The others refuse it.
// For tests: while a ForceTiled is alive, tiled() (and so the registered `tiled` rung) runs the kernel
// with `rows` query rows per tile: kWideBr (tiled_wide) or kBr (tiled_16). Not thread-safe; nests.
class ForceTiled {
 public:
  explicit ForceTiled(int rows);
  ~ForceTiled();
  ForceTiled(const ForceTiled&) = delete;
  ForceTiled& operator=(const ForceTiled&) = delete;

 private:
  int previous_;
};
// tiled_bf16 (issue 42): the same FA2 forward in bf16 on tensor cores (mma.sync m16n8k16, ldmatrix, cp.async;
// cuda/src/02-attention/attention_bf16.cuh). Q, K, V are bf16 bit patterns (ladder::formats::to_bf16) in the
// layouts above; O and L are fp32 as in tiled(). S and P V accumulate in fp32, the softmax is fp32, P is rounded
// to bf16 before P V. 1 <= d <= 128; no m output. A kernel per head dim, 64 and 128: d in {64, 128} with 16-byte
// aligned Q, K, V runs it directly; any other call pads Q, K, V with zero columns to D = 64 (d <= 64) or 128 in
// scratch buffers first and copies O's first d columns back (exact: the zeros add nothing to Q K^T).
void tiled_bf16(const Problem& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L);
// backward with recomputation (FA2 Alg. 2): a D = rowsum(dO o O) kernel, then one block per
// (batch x head, KV tile) accumulating dK_j, dV_j; dQ by atomicAdd from every KV block (not a second
// pass: one pass over the tiles instead of recomputing S, P and dP per Q tile; the price is a dQ
// summation order that depends on timing). dQ is overwritten (zeroed by the D kernel first).
void backward_recompute(const Problem& p, const float* Q, const float* K, const float* V, const float* O,
                        const float* dO, const float* L, float* dQ, float* dK, float* dV, float* D);

}  // namespace ladder::cuda::attention
