// ladder/cuda/mla_kernels.hpp -- the stage-03 kernels' launch functions and the GEMM descriptor,
// unchecked and free of fmt (the .cu files include only this: nvcc 13 cannot compile fmt's consteval
// format strings). Call the checked API in ladder/cuda/mla.hpp instead.
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
  int tile = 0;  // 0: chosen by gemm_tile(); kGemmTile or kGemmSmallTile forces that kernel (the tests run both)
};

inline constexpr int kGemmTile = 128;         // the GEMM's output tile (kGemmTile x kGemmTile per block)
inline constexpr int kGemmK = 8;              // its K step through shared memory
inline constexpr int kGemmRegs = 8;           // outputs per thread along each side (an 8 x 8 register tile)
inline constexpr int kGemmThreads = (kGemmTile / kGemmRegs) * (kGemmTile / kGemmRegs);  // 256
static_assert(kGemmTile * kGemmK % kGemmThreads == 0, "gemm_batched: each thread copies whole elements of a tile");
inline constexpr int kGemmSmallTile = 16;     // gemm_small: 16 x 16 outputs per block, one per thread
// gemm_batched's 128 x 128 tiles when they give every SM of an H100/H200 (132) at least one block,
// else gemm_small's 16 x 16 (64 times the blocks): small-M projections with long K are latency-bound
// on a handful of SMs otherwise.
inline constexpr int64_t kGemmWideMinBlocks = 132;
inline int gemm_tile(const Gemm& g) {
  if (g.tile != 0) return g.tile;
  const int64_t blocks = ((g.M + kGemmTile - 1) / kGemmTile) * ((g.N + kGemmTile - 1) / kGemmTile) * g.batch;
  return blocks >= kGemmWideMinBlocks ? kGemmTile : kGemmSmallTile;
}
// flash_split (cuda/src/03_mla_flash.cu, whose header comment derives these): a block of kFlashThreads
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

// The launches behind ladder/cuda/mla.hpp; scratch is allocated by the caller (cuda/src/03_mla_host.cpp).
namespace detail {
void launch_gemm(const Gemm& g);
void launch_rms_norm(float* x, const float* gain, int64_t rows, int64_t n, int64_t ld, float eps);
void launch_rope(float* x, const float* rope, int64_t B, int64_t heads, int64_t d);
void launch_concat_heads(const float* a, int64_t da, const float* b, int64_t db, float* out, int64_t rows);
void launch_scale_softmax(float* scores, float* attn, int64_t rows, int64_t Lmax, const int64_t* seqlens,
                          int64_t rows_per_seq, float scale);
void launch_copy_rope_part(const float* kv, int64_t kv_dim, int64_t off, int64_t rope, float* K, int64_t dk,
                           int64_t nope, int64_t B, int64_t H, int64_t Lmax, const int64_t* seqlens);
void launch_replicate_rows(const float* kv, int64_t row_elems, float* out, int64_t B, int64_t H, int64_t Lmax,
                           const int64_t* seqlens);
void launch_flash_split(const float* Q, const float* blocks, const int32_t* block_table, int64_t max_blocks,
                        const int64_t* seqlens, int64_t B, int64_t H, int64_t R, int64_t D, int64_t split_blocks,
                        int64_t max_splits, float scale, float* o_parts, float* lse_parts);
void launch_flash_combine(const float* o_parts, const float* lse_parts, const int64_t* seqlens, int64_t B,
                          int64_t H, int64_t R, int64_t split_blocks, float* o_lat, float* lse);
}  // namespace detail

}  // namespace ladder::cuda::mla
