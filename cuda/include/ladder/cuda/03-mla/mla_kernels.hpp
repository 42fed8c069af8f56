// ladder/cuda/03-mla/mla_kernels.hpp -- the stage-03 kernels' launch functions and the GEMM descriptor,
// unchecked and free of fmt (the .cu files include only this: nvcc 13 cannot compile fmt's consteval
// format strings). Call the checked API in ladder/cuda/03-mla/mla.hpp instead.
#pragma once
#include <cstdint>

namespace ladder::cuda::mla {

// C(m, n) = alpha * sum_k A(m, k) B(n, k) (+ C(m, n) if accumulate), for every batch entry z in
// [0, batch), split as o = z / inner (the outer index, usually the sequence) and i = z % inner (the
// inner one, usually the head):
//   A(m, k) = A[o * a_o + i * a_i + m * a_m + k * a_k]
//   B(n, k) = B[o * b_o + i * b_i + n * b_n + k * b_k]
//   C(m, n) = C[o * c_o + i * c_i + m * c_m + n * c_n]
// So C = A B^T is b_n = ldb, b_k = 1, and C = A B with B [K, N] row-major is b_n = 1, b_k = ldb.
// lens (device, optional): entry z uses min(M | N | K, lens[o]) for the dims flagged -- sequences of
// different cache lengths in one launch, never reading a row past L_b; C outside the used M x N is
// left as it is.
struct Gemm {
  int64_t M = 0, N = 0, K = 0, batch = 1, inner = 1;
  const float* A = nullptr;
  int64_t a_o = 0, a_i = 0, a_m = 0, a_k = 1;
  const float* B = nullptr;
  int64_t b_o = 0, b_i = 0, b_n = 0, b_k = 1;
  float* C = nullptr;
  int64_t c_o = 0, c_i = 0, c_m = 0, c_n = 1;
  float alpha = 1.0f;
  bool accumulate = false;
  const int64_t* lens = nullptr;
  bool lens_on_m = false, lens_on_n = false, lens_on_k = false;
  int tile = 0;  // 0: chosen by gemm_tile(); kGemmTile or kGemmSmallTile forces that kernel (the tests run all three)
  int split_k = 0;  // 0: chosen by gemm_split(); S >= 1 forces gemm_batched over S slices of K (1: unsplit)
  // gemm_batched's K-loop schedule (gemm_small ignores it): -1 the default, which is 1; 1 pipelined (the next
  // step's tiles loaded into registers during this step's FMAs, two shared buffers, one barrier per step);
  // 0 the schedule before issue 13 (copy, barrier, FMAs, barrier), kept so bench_gpu can time both in one
  // run. Same bits either way (cuda/src/03-mla/mla_gemm.cu).
  int pipeline = -1;
};

inline constexpr int kGemmTile = 128;         // the GEMM's output tile (kGemmTile x kGemmTile per block)
inline constexpr int kGemmK = 8;              // its K step through shared memory (two buffers when pipelined)
inline constexpr int kGemmRegs = 8;           // outputs per thread along each side (an 8 x 8 register tile)
inline constexpr int kGemmThreads = (kGemmTile / kGemmRegs) * (kGemmTile / kGemmRegs);  // 256
static_assert(kGemmTile * kGemmK % kGemmThreads == 0, "gemm_batched: each thread copies whole elements of a tile");
inline constexpr int kGemmSmallTile = 16;     // gemm_small: 16 x 16 outputs per block, one per thread
// The kernel choice (cuda/src/03-mla/mla_gemm.cu), from the shapes only -- never from a device query, so a
// product's bits do not depend on the device it ran on:
//   1. gemm_batched's 128 x 128 tiles when they give every SM of an H100/H200 (132) at least one block;
//   2. else gemm_batched split-K: K cut into S contiguous slices, S = ceil(132 / tiles) so tiles * S
//      >= 132, each slice at least kGemmSplitMinK deep, and only if that still gives half the SMs a
//      block (tiles * S >= 66) -- the step's projections have M = B = 64 rows and long K (W_O at
//      DeepSeek-V2: 40 tiles, K = 16384 -> S = 4, 160 blocks of K = 4096);
//   3. else gemm_small's 16 x 16 (64 times the blocks of 1.): short K, or few outputs and little K.
// gemm_small needs 2 shared-memory loads per FMA, gemm_batched 0.25 (6.3 vs 16.1 TFLOP/s on an H200
// at 4096^3, gemm_batched in its old two-barrier schedule; the pipelined default is not yet timed), so
// below half the SMs busy the many small blocks are taken to win.
inline constexpr int64_t kGemmWideMinBlocks = 132;
// A slice of >= 256 k does >= 128 x 128 x 256 FMAs per 64 KiB partial tile written (and read once by
// gemm_split_sum): >= 64 FMAs per byte of extra traffic, well above an H200's ~7 (67 TFLOP/s fp32 /
// 4.8 TB/s), and 32 K steps amortise the block's start and its 64 stores per thread.
inline constexpr int64_t kGemmSplitMinK = 256;
inline int64_t gemm_tiles(const Gemm& g) {  // gemm_batched's blocks without split-K
  return ((g.M + kGemmTile - 1) / kGemmTile) * ((g.N + kGemmTile - 1) / kGemmTile) * g.batch;
}
// k per slice for S slices: ceil(K / S) rounded up to the K step, so every slice but the last starts and
// ends on a step (a forced S larger than K / kGemmK leaves trailing slices empty: their partials are 0).
inline int64_t gemm_split_slice(int64_t K, int64_t S) {
  const int64_t per = (K + S - 1) / S;
  return (per + kGemmK - 1) / kGemmK * kGemmK;
}
// The automatic split: 1 (no split) unless rule 2 above applies; then the S >= 2 of whole slices.
inline int64_t gemm_auto_split(const Gemm& g) {
  const int64_t tiles = gemm_tiles(g);
  if (tiles == 0 || tiles >= kGemmWideMinBlocks) return 1;
  const int64_t want = (kGemmWideMinBlocks + tiles - 1) / tiles, most = g.K / kGemmSplitMinK;
  const int64_t S = want < most ? want : most;
  if (S < 2 || 2 * tiles * S < kGemmWideMinBlocks) return 1;
  return (g.K + gemm_split_slice(g.K, S) - 1) / gemm_split_slice(g.K, S);  // no empty slice after rounding
}
inline int gemm_tile(const Gemm& g) {
  if (g.tile != 0) return g.tile;
  if (g.split_k != 0 || gemm_tiles(g) >= kGemmWideMinBlocks) return kGemmTile;
  return gemm_auto_split(g) > 1 ? kGemmTile : kGemmSmallTile;
}
// Slices of K gemm_batched runs (1: unsplit, the kernel writes C itself); 1 for gemm_small.
inline int64_t gemm_split(const Gemm& g) {
  if (g.split_k != 0) return g.split_k;
  if (g.tile != 0) return 1;
  return gemm_auto_split(g);
}
// Floats of scratch launch_gemm needs: the S partial tiles [S, batch, M, N] when it splits K, else none.
inline int64_t gemm_workspace(const Gemm& g) {
  const int64_t S = gemm_tile(g) == kGemmTile ? gemm_split(g) : 1;
  return S > 1 ? S * g.batch * g.M * g.N : 0;
}
// flash_split (cuda/src/03-mla/mla_flash.cu, whose header comment derives these): a block of kFlashThreads
// threads per (head group of kFlashHeads heads, split, sequence); tiles of one 64-token page; the score
// tile S [G, T] = Q_g tile^T takes D in chunks of kFlashK dims through shared memory, each thread a
// 4 x 4 sub-tile of S over half of every chunk; o [G, kv_lora] stays in registers, 8 heads x 8 columns
// per thread, updated from V rows kFlashVTokens at a time.
inline constexpr int kFlashHeads = 32;        // heads per flash_split block (the head group G)
inline constexpr int kFlashTileTokens = 64;   // cache rows per tile: one page, so a tile never crosses one
inline constexpr int kFlashThreads = 256;
inline constexpr int kFlashK = 32;            // dims of q and of the tile per shared-memory chunk (scores)
inline constexpr int kFlashVTokens = 8;       // V rows per shared-memory chunk (o += P V)
inline constexpr int kFlashMaxR = 512;        // kv_lora_rank limit: o [G, 512] is 64 registers per thread
inline constexpr int kFlashQStride = kFlashHeads + 4;       // Qs [kFlashK][G + 4], k-major; also P [T][G + 4]
inline constexpr int kFlashKStride = kFlashTileTokens + 4;  // Ks [kFlashK][T + 4], k-major
static_assert(kFlashTileTokens == 64 && kFlashThreads == 256 && kFlashHeads == 32 && kFlashK == 32,
              "flash_split's thread maps (4 x 4 scores over two k halves, 8 x 8 of o) assume these");
static_assert(kFlashMaxR == 2 * 4 * (kFlashThreads / 4) && kFlashTileTokens % kFlashVTokens == 0,
              "flash_split: a thread's columns of o are two quads, 4 tc and 256 + 4 tc (tc < 64)");

// Row stride (floats) of flash_split's shared V chunk: kv_lora rounded up to 4, so rows start 16-byte aligned.
inline constexpr int64_t flash_v_stride(int64_t R) { return (R + 3) / 4 * 4; }
// The region the phases of a tile take in turn (floats): two score chunks (Ks, Qs), or two V chunks,
// or V chunk 0 plus the partial scores S0 [T][G + 4] of the first k half in V chunk 1's place.
inline constexpr int64_t flash_union_floats(int64_t R) {
  const int64_t score = 2 * int64_t{kFlashK} * (kFlashKStride + kFlashQStride);
  const int64_t v = 2 * kFlashVTokens * flash_v_stride(R);
  const int64_t v_s0 = kFlashVTokens * flash_v_stride(R) + int64_t{kFlashTileTokens} * kFlashQStride;
  return score > v ? (score > v_s0 ? score : v_s0) : (v > v_s0 ? v : v_s0);
}
// flash_split's dynamic shared memory: the union above, P [T][G + 4], alpha and l [G]. 42,240 bytes
// at kv_lora = 512 (any D: the score step streams D), so the launch needs no opt-in beyond 48 KiB.
inline constexpr int64_t flash_split_smem_bytes(int64_t R) {
  return 4 * (flash_union_floats(R) + int64_t{kFlashTileTokens} * kFlashQStride + 2 * kFlashHeads);
}

// The launches behind ladder/cuda/03-mla/mla.hpp; scratch is allocated by the caller (cuda/src/03-mla/mla_host.cpp).
namespace detail {
void launch_gemm(const Gemm& g, float* workspace);  // workspace: gemm_workspace(g) floats (none: nullptr)
void launch_rms_norm(float* x, const float* gain, int64_t rows, int64_t n, int64_t ld, float eps);
void launch_rope(float* x, const float* rope, int64_t B, int64_t heads, int64_t d);
void launch_concat_heads(const float* a, int64_t da, const float* b, int64_t db, float* out, int64_t rows);
// lse (optional): each row's log-sum-exp of its scaled scores, [rows].
void launch_scale_softmax(float* scores, float* attn, int64_t rows, int64_t Lmax, const int64_t* seqlens,
                          int64_t rows_per_seq, float scale, float* lse = nullptr);
void launch_copy_rope_part(const float* kv, int64_t kv_dim, int64_t off, int64_t rope, float* K, int64_t dk,
                           int64_t nope, int64_t B, int64_t H, int64_t Lmax, const int64_t* seqlens);
void launch_replicate_rows(const float* kv, int64_t row_elems, float* out, int64_t B, int64_t H, int64_t Lmax,
                           const int64_t* seqlens);
void launch_flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                        const int64_t* seqlens, int64_t B, int64_t H, int64_t R, int64_t D, int64_t split_blocks,
                        int64_t max_splits, float scale, float* o_parts, float* lse_parts);
// out [B, A, d] = in [A, B, d] with the first two axes swapped (mla_prefill.cu: token-major <-> head-major).
void launch_swap_axes01(const float* in, int64_t A, int64_t B, int64_t d, float* out);
void launch_flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t B,
                          int64_t H, int64_t R, int64_t split_blocks, float* o_lat, float* lse);
}  // namespace detail

}  // namespace ladder::cuda::mla
