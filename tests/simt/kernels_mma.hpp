// tests/simt/kernels_mma.hpp -- host API of the tensor-core test kernels (kernels_mma.cu) and the
// PTX ISA's fragment tables, written in the ISA's element form (element i of a thread's fragment,
// registers holding consecutive elements, the lower index in the lower bits). The emulation
// (cuda/simt/detail/tensor_core.hpp) uses a register form of its own; the tests compare the two.
#pragma once
#include <cstdint>
#include <vector>

#if defined(__host__) && defined(__device__)  // nvcc, or the SIMT layer (where they are empty)
#define TC_TABLE __host__ __device__ constexpr
#else
#define TC_TABLE constexpr
#endif

namespace simt_tests {

struct Cell {
  int row, col;
};

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" (groupID = lane >> 2,
// threadID_in_group = lane % 4). A: a0..a7, 16 x 16.
TC_TABLE Cell k16_a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const bool upper = (i >= 2 && i < 4) || i >= 6;
  return {upper ? g + 8 : g, i < 4 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8};
}
// B: b0..b3, 16 x 8.
TC_TABLE Cell k16_b(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8, g};
}
// C, D: c0..c3, 16 x 8 (the same table for m16n8k32).
TC_TABLE Cell c16x8(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}
// PTX ISA, "Matrix Fragments for mma.m16n8k32" (.s8 / .u8 / .e4m3 / .e5m2). A: a0..a15, 16 x 32.
TC_TABLE Cell k32_a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const bool upper = (i >= 4 && i < 8) || i >= 12;
  return {upper ? g + 8 : g, i < 8 ? t * 4 + (i & 3) : t * 4 + (i & 3) + 16};
}
// B: b0..b7, 32 x 8.
TC_TABLE Cell k32_b(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 4 ? t * 4 + (i & 3) : t * 4 + (i & 3) + 16, g};
}

enum class MmaKind : int { bf16, fp16, s8, e4m3 };

// One warp computes D = A B + C for one tile: A is 16 x K and B is K x 8 (K = 16 for bf16 / fp16,
// 32 for s8 / e4m3), row-major element bits (uint16 for bf16 / fp16, uint8 for s8 / e4m3, one per
// entry here); C and D are 16 x 8 row-major, float or int32 bits. Fragments are loaded with the
// tables above; planted: the A registers 1 and 2 swapped (rows + 8 taken for columns + 8).
std::vector<std::uint32_t> mma_tile(MmaKind kind, const std::vector<std::uint32_t>& a,
                                    const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                    bool planted = false);

// A bf16 tile of small integers (exact sums) through mma_tile; true when D = A B exactly.
bool mma_lane_map(bool planted);

inline constexpr int ldmatrix_variants = 6;  // x1, x2, x4, x1.trans, x2.trans, x4.trans
// A 16 x 16 b16 tile with element (r, c) = 0x100 + 16 r + c in shared memory; lane l addresses row
// l % 16 at column 8 (l / 16) (matrix m = l / 8 is the 8 x 8 block at rows 8 (m % 2), columns
// 8 (m / 2)). Returns 4 registers per lane (unused ones 0).
std::vector<std::uint32_t> ldmatrix_probe(int variant);

// For a bf16 16 x 16 A and 16 x 8 B (bits as above): per lane, the registers from ldmatrix_x4 (A)
// and ldmatrix_x2_trans (B, stored K x 8 row-major), then those from plain loads through the
// tables: 12 words per lane.
std::vector<std::uint32_t> fragments_both_ways(const std::vector<std::uint32_t>& a,
                                               const std::vector<std::uint32_t>& b);

inline constexpr int cp_async_outputs = 21;
// Block of 32; src[i] = 1000 + i. Thread t copies 16 bytes (ca) in group 0, then 8 bytes (ca), 16
// bytes with src_bytes 8 (cg: the upper 8 zero-filled) and 4 bytes (ca) in group 1. Per thread, as
// int32: [0, 4) group 0's 16 bytes before any wait, [4, 8) after wait_group<1>; [8, 12) the cg copy
// and [12, 14) the 8-byte copy after wait_group<1>; after wait_group<0>: [14, 18) the cg copy,
// [18, 20) the 8-byte copy, [20] the 4-byte copy. Without read_in_flight the reads before the waits
// ([0, 4) and [8, 14)) are skipped and left 0: on a GPU they race with the copies (compute-sanitizer's
// racecheck says so), where the emulator defines them (poisoned).
std::vector<std::int32_t> cp_async_probe(bool read_in_flight);

// ---- planted (true when the result is right): a block of 64 copies a 64 x 8 float tile with
// cp.async and each thread sums the row of its neighbour after a __syncthreads.
bool cp_async_missing_wait(bool planted);  // planted: no wait_group before the barrier
bool cp_async_early_read(bool planted);    // planted: the thread reads its own row before its wait
// planted: every thread waits for its own copies, but no __syncthreads before reading the neighbour's
// row (which that thread's wait wrote): schedule-dependent, and a data race under TSan.
bool cp_async_missing_barrier(bool planted);

// ---- diagnostics: each must abort with "simt: error" and the line(s).
void mma_missing_lane();  // lane 7 skips the mma
extern const int mma_missing_lane_line;
void ldmatrix_mixed_shapes();  // lanes 0-15 call ldmatrix_x4, lanes 16-31 ldmatrix_x2
extern const int ldmatrix_mixed_shapes_lines[2];
void ldmatrix_before_wait();  // ldmatrix of a tile whose cp.async has not been waited for
extern const int ldmatrix_before_wait_lines[2];  // the ldmatrix, the cp.async
// 0: a misaligned cp.async destination, 1: src_bytes above the copy size, 2: a misaligned ldmatrix row.
void bad_operands(int variant);
extern const int bad_operands_lines[3];
void mma_partial_warp();  // block of 48 threads: the second warp has 16 lanes
extern const int mma_partial_warp_line;

}  // namespace simt_tests
