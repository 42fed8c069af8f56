// ladder/cuda/02-attention/attention_kernels.hpp -- the stage-02 kernels' launch functions, unchecked and free of fmt
// (the .cu files include only this: nvcc 13 cannot compile fmt's consteval format strings). Call the
// checked API in ladder/cuda/02-attention/attention.hpp instead.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace ladder::cuda::attention {

// The shape of one call, as the kernels see it (ladder::attention::Problem with int sizes, float scale).
struct Dims {
  int B = 1, H = 1, Nq = 1, Nk = 1, d = 1;
  float scale = 1.0f;
  bool causal = false;
  int dv = 0;  // the value head dim d_v (0: = d); V [B,H,Nk,d_v], O [B,H,Nq,d_v]. Only tiled_16 takes d_v != d.
};

inline constexpr int kMaxHeadDim = 128;  // flash: 4 columns per lane; tiled/backward: smem and registers
// tiled_16's query/key head dim when d_v != d (MLA's prefill: d = nope + rope = 192, d_v = 128): Q_i, K_j only sit
// in shared memory (the S loop walks d), so d is bounded by the 48 KiB of a block, d_v by the O registers.
inline constexpr int kMaxQKHeadDim = 256;
inline constexpr int kBr = 16;           // query rows per tile (tiled, backward)
inline constexpr int kBc = 16;           // key rows per tile
inline constexpr int kTileThreads = 128;  // threads per tiled/backward block
inline constexpr int kRowWarps = 4;       // warps (query rows) per flash block
// The wide forward kernel (tiled_forward_wide, the `tiled` rung's default since issue 13): its own
// tiles, so the backward's kBr/kBc above stay as they are.
inline constexpr int kWideBr = 64;        // query rows per block
inline constexpr int kWideBc = 64;        // keys per KV tile
inline constexpr int kWideThreads = 256;  // 16 x 16 threads, a 4 x 4 block of S each
inline constexpr int kWideK = 16;         // head-dim columns of Q_i, K_j (keys of V_j) per pipeline stage

// Row stride (floats) of the tiled/backward kernels' shared Q, K, V, dO tiles: d rounded up to an odd
// number, so a warp reading 16 rows at one column hits 16 different banks (cuda/src/02-attention/attention_tiled.cu).
inline constexpr int tile_row_stride(int d) { return d | 1; }

// The launches behind ladder/cuda/02-attention/attention.hpp; scratch is allocated by the caller
// (cuda/src/02-attention/attention_host.cpp). Pointers are device pointers in the layouts of problem.hpp.
namespace detail {
void launch_naive_scores(const Dims& p, const float* Q, const float* K, float* S);
void launch_naive_softmax(const Dims& p, const float* S, float* P, float* L, float* m);
void launch_naive_pv(const Dims& p, const float* P, const float* V, float* O);
void launch_flash_row(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
void launch_tiled(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
void launch_tiled_wide(const Dims& p, const float* Q, const float* K, const float* V, float* O, float* L, float* m);
// tiled_bf16: Q, K, V bf16 bit patterns, d in {64, 128}, 16-byte aligned (cuda/src/02-attention/attention_bf16.cuh).
void launch_tiled_bf16(const Dims& p, const uint16_t* Q, const uint16_t* K, const uint16_t* V, float* O, float* L);
// Its padding (cuda/src/02-attention/attention_bf16_pad.cuh): dst [rows, D] = src [rows, d] with zero columns
// d .. D - 1; and back, dst [rows, d] = the first d columns of src [rows, D].
void launch_bf16_pad(const uint16_t* src, uint16_t* dst, size_t rows, int d, int D);
void launch_bf16_unpad(const float* src, float* dst, size_t rows, int d, int D);
void launch_backward_D(const Dims& p, const float* O, const float* dO, float* D, float* dQ);
void launch_backward_kv(const Dims& p, const float* Q, const float* K, const float* V, const float* dO,
                        const float* L, const float* D, float* dQ, float* dK, float* dV);
}  // namespace detail

}  // namespace ladder::cuda::attention
