// ladder/04-moe/deepgemm.hpp -- stage 04's ragged dot in DeepGEMM's grouped-GEMM layouts: the layouts
// "04-moe/deepgemm_contiguous" and "04-moe/deepgemm_masked", case contracts (core/contract.hpp) that
// `ladder oracle|check|describe` and Python's ladder.check / ladder.deepgemm_check read like a stage's.
// Defined in ref/src/04-moe/deepgemm.cpp.
//
// The facts, from DeepGEMM's README ("Interfaces": Notices, Grouped GEMMs (contiguous layout), (masked layout)):
//   * NT: D = A @ B.T, A row-major [m, k], B [num_groups, n, k] (each expert's weight stored n by k);
//     DeepGEMM groups only M: every expert has the same n and k.
//   * contiguous (training forward, inference prefill): the experts' tokens concatenated along M, "each expert
//     segment must be aligned to the GEMM M block size" (get_mk_alignment_for_contiguous_layout); a per-row
//     int32 group index m_indices, -1 on the padding rows (DeepGEMM tests/test_core.py and generators.py build
//     it so, and zero the padding rows of d before they compare: d's padding rows are unspecified there).
//   * masked (decode, CUDA graphs, the CPU not knowing each expert's count): A [num_groups, max_m, k],
//     D [num_groups, max_m, n], a per-group valid row count masked_m (int32); "the kernel computes only the
//     valid portions"; expected_m is a performance hint.
//
// What ladder judges (the decision, written in chapters/04-moe/README.md "Checking a DeepGEMM port"):
//   * valid rows: the tolerance rule per row (one token's output row, its own scale), k = 2;
//   * contiguous padding rows, param padding_rows:
//       "zero" (default): the case's A has zero padding rows, so whatever expert a kernel applies there the
//         product is 0, and a kernel that skips them leaves a zero-initialised d (torch.zeros) as it was:
//         a padding row must be exactly 0. A nonzero one is a row written where no row belongs (a store one
//         row late, a segment shifted) and fails;
//       "unjudged": as DeepGEMM's own tests (d allocated with torch.empty): padding rows not judged;
//   * masked: rows at and past masked_m[g] are never judged (unspecified in DeepGEMM).
// Unjudged elements take the oracle's value before the rule runs (Contract::unjudged); the report counts them.
//
// No second oracle: the oracle computes each valid row i of expert e as sum_k a[i, k] b[e, :, k] at float64
// (k ascending, stage 04's gemm_fixed_order), the float32 baseline the same at float32; stage 04's ragged_dot rung, its rows
// gathered by expert and scattered back into the layout (deepgemm_run_ragged), is the candidate computed
// another way.
//
// DeepGEMM's own metric, reported beside the verdict, never part of it (DeepGEMM tests, calc_diff):
//   calc_diff = 1 - 2 sum(x y) / sum(x x + y y), in float64 (core layout_cos_diff; FlashMLA's cal_diff too).
// The k-grouped layout (weight gradient, groups along K): kDeepGemmKGrouped, below (deepgemm_k_grouped.cpp); its FP8
// form kDeepGemmKGroupedFp8 (deepgemm_k_grouped_fp8.cpp).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"

namespace ladder::moe {

inline constexpr const char* kDeepGemmContiguous = "04-moe/deepgemm_contiguous";
inline constexpr const char* kDeepGemmMasked = "04-moe/deepgemm_masked";
// The same layouts with FP8 (E4M3) values and DeepSeek-V3's block scales (deepgemm_fp8.cpp; the facts below).
inline constexpr const char* kDeepGemmContiguousFp8 = "04-moe/deepgemm_contiguous_fp8";
inline constexpr const char* kDeepGemmMaskedFp8 = "04-moe/deepgemm_masked_fp8";

// A synthetic case: group_m[g] valid rows for expert g (zero-token experts and one past a block on purpose).
struct DeepGemmSpec {
  std::vector<int64_t> group_m = {0, 97, 1, 130, 40};
  int64_t n = 72, k = 200;
  int64_t block_m = 128;  // contiguous: the M alignment of every expert segment
  int64_t max_m = 0;      // masked: rows per group buffer (0: the largest group_m + 5)
  std::string padding_rows = "zero";  // contiguous: "zero" | "unjudged" (header comment)
  std::string scales = "fp32";        // FP8 layouts: "fp32" (SM90) | "ue8m0" (powers of two, SM100's values) |
                                      // "ue8m0_packed" (the same, packed four to an int32 as SM100 takes them)
  uint64_t seed = 4104;
};
// Contiguous: a [m_sum, k] (padding rows zero), b [G, n, k], m_indices <i4 [m_sum] (-1 on padding rows).
Tensors deepgemm_contiguous_inputs(const DeepGemmSpec& spec);
// Masked: a [G, max_m, k] (every row random, as DeepGEMM's generator), b [G, n, k], masked_m <i4 [G].
Tensors deepgemm_masked_inputs(const DeepGemmSpec& spec);
nlohmann::json deepgemm_params(const DeepGemmSpec& spec, bool masked);

// FP8 (the layouts kDeepGemm*Fp8; the header of deepgemm_fp8.cpp derives the rule). DeepGEMM's README: "the LHS
// scaling factor is required to have a TMA-aligned and transposed layout"; SM90 takes FP32 scales, SM100 UE8M0 ones
// (packed four to an int32 there; here unpacked, as the fp32 powers of two they encode). DeepSeek-V3's granularity
// (technical report §3.3; DeepGEMM's tests' per_token_cast_to_fp8 / per_block_cast_to_fp8):
//   a  <f4 [rows, k]        the E4M3 values (exact in float32), one scale per 1 x 128 tile
//   sa <f4 [ceil(k/128), align4(m_sum)]  (masked: [G, ceil(k/128), align4(max_m)]) the activation scales
//         transposed (MN-major: sa[kb, i] scales row i's tile kb), each scale row padded to a multiple of 4
//         floats (TMA's 16-byte stride); the padding entries are not read
//   b  <f4 [G, n, k]        E4M3 values, sb <f4 [G, ceil(n/128), ceil(k/128)] one scale per 128 x 128 block.
// The case: the f32 case's values (each 128-column block of k at its own magnitude), quantised by stage 07's
// quantisers (core/quant.hpp; scales amax / 448, or the power of two above it for ue8m0).
Tensors deepgemm_fp8_inputs(const DeepGemmSpec& spec, bool masked);
nlohmann::json deepgemm_fp8_params(const DeepGemmSpec& spec, bool masked);
// SM100's packed UE8M0 scales (DeepGEMM's get_mn_major_tma_aligned_packed_ue8m0_tensor; its tests' torch reference,
// _get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl): each float32 power of two becomes its exponent byte
// (bits >> 23, UE8M0: value 2^(byte - 127)); the scale's k dimension is packed, four k blocks to an int32, k block
// 4 j + b in bits 8 b .. 8 b + 7 (the uint8 array [mn, align4(sf_k)] viewed as int32: little-endian); the result is
// MN-major and TMA-aligned, stored [ceil(sf_k / 4), align4(mn)]; padding bytes 0. scales = "ue8m0_packed" takes sa
// <i4 [ceil(k/128 / 4), align4(m_sum)] (masked: [num_groups, .., align4(max_m)]) and sb <i4 [num_groups,
// ceil(k/128 / 4), align4(n)]: SM100 reads weight scales per row (1 x 128, the 128 x 128 block's scale repeated on its
// rows, as DeepGEMM's transform_sf_into_required_layout expands them); ladder's recipe needs them equal per block.
// pack: sf [B, mn, sf_k] (powers of two, refused otherwise) -> <i4 [B, ceil(sf_k/4), align4(mn)];
// unpack: the inverse, exact -> [B, align4(mn), sf_k] (byte 0xFF, UE8M0's NaN, refused naming `what`).
Array<int32_t> pack_ue8m0(const Array<float>& sf);
Array<float> unpack_ue8m0(const Array<int32_t>& packed, int64_t sf_k, const std::string& what);

// Stage 07's fp8_block rung (fp8_block_product: DeepSeek-V3's recipe, a limited accumulator of acc_bits promoted
// to float32 every 128) per expert on an FP8 case, written into the layout: {"d" <f4}.
Tensors deepgemm_run_fp8(const std::string& layout, const Tensors& inputs, const nlohmann::json& params,
                         int acc_bits = 14);

// Stage 04's ragged_dot rung at float32 on the case's valid rows (gathered by expert, group_sizes counted),
// scattered back into the layout `layout` (kDeepGemmContiguous | kDeepGemmMasked): {"d" <f4}; rows it has no
// result for are 0.
Tensors deepgemm_run_ragged(const std::string& layout, const Tensors& inputs, const nlohmann::json& params);
// For tests and the mutation catalogue: that rung's d as float32; inputs with `name` replaced by an <i4 vector.
Array<float> deepgemm_ragged_d(const std::string& layout, const Tensors& inputs, const nlohmann::json& params);
Tensors deepgemm_with_ints(Tensors inputs, const std::string& name, const std::vector<int64_t>& values);

// The scale tensors' MN extent padded to a multiple of 4 floats (16 bytes, TMA's alignment; DeepGEMM's
// get_mn_major_tma_aligned_tensor).
inline int64_t align4(int64_t mn) { return (mn + 3) / 4 * 4; }

// The k-grouped layout "04-moe/deepgemm_k_grouped" (MoE weight gradient; the facts in deepgemm_k_grouped.cpp's
// header): a [sum(ks), m], b [sum(ks), n], ks <i4 [num_groups], optional c [num_groups, m, n];
// d[g] = c[g] + a[K_g]^T b[K_g] over group g's rows. float32 values (FP8: kDeepGemmKGroupedFp8 below).
inline constexpr const char* kDeepGemmKGrouped = "04-moe/deepgemm_k_grouped";
struct DeepGemmKSpec {
  std::vector<int64_t> ks = {256, 0, 128, 384};  // an empty group, as DeepGEMM's tests draw
  int64_t m = 24, n = 40, k_alignment = 128;
  bool accumulate = true;  // input c (DeepGEMM's tests: randn x 32)
  std::string scales = "fp32";  // the FP8 layout: "fp32" | "ue8m0" | "ue8m0_packed" (as DeepGemmSpec::scales)
  uint64_t seed = 4105;
};
Tensors deepgemm_k_grouped_inputs(const DeepGemmKSpec& spec);
nlohmann::json deepgemm_k_grouped_params(const DeepGemmKSpec& spec);
// A float32 candidate summing each group's rows in descending order: {"d" <f4}. boundary_shift != 0 plants the
// bug of a group boundary off by that many rows (between the first two non-empty groups).
Tensors deepgemm_k_grouped_run(const Tensors& inputs, const nlohmann::json& params, int boundary_shift = 0);

// The same layout with FP8 values, "04-moe/deepgemm_k_grouped_fp8" (deepgemm_k_grouped_fp8.cpp: the facts from
// DeepGEMM's sources and the derived rule): a, b E4M3 values as float32, every ks a multiple of 128; DeepGEMM's
// per_channel_cast_to_fp8 scales, one per 128 rows of K per column (recipe 1, 1, 128), MN-major and TMA-aligned:
//   sa <f4 [sum(ks)/128, align4(m)], sb <f4 [sum(ks)/128, align4(n)]  (scales "fp32" | "ue8m0": powers of two);
//   scales "ue8m0_packed" (SM100): <i4 [sum_g ceil(ks[g]/512), align4(m)] (n), each group's K blocks packed four to
//   an int32 on their own (pack_ue8m0), the groups' rows stacked in the order of ks.
// The case: the float32 case's values with each 128-row K block at its own magnitude, quantised by core/quant.hpp.
inline constexpr const char* kDeepGemmKGroupedFp8 = "04-moe/deepgemm_k_grouped_fp8";
Tensors deepgemm_k_grouped_fp8_inputs(const DeepGemmKSpec& spec);
nlohmann::json deepgemm_k_grouped_fp8_params(const DeepGemmKSpec& spec);
// Stage 07's fp8_block_dot per element (an acc_bits accumulator promoted to float32 every 128), plus c: {"d" <f4}.
Tensors deepgemm_k_grouped_fp8_rung(const Tensors& inputs, const nlohmann::json& params, int acc_bits = 14);
// A candidate computed another way: the dequantised values in float32, each group's rows summed in descending order,
// plus c: {"d" <f4}; `bug` plants a port's bug: the scale of the neighbouring K block (blocks 0 <-> 1, 2 <-> 3, ..),
// the boundary between the first two non-empty groups one row late, or the scales read untransposed ([mn, KB]).
enum class KFp8Bug { none, neighbour_block_scale, boundary_shift, scales_untransposed };
Tensors deepgemm_k_grouped_fp8_run(const Tensors& inputs, const nlohmann::json& params, KFp8Bug bug = KFp8Bug::none);

}  // namespace ladder::moe

namespace ladder::stage_records {
Contract contract_04_moe_deepgemm_k_grouped();
Contract contract_04_moe_deepgemm_k_grouped_fp8();
Contract contract_04_moe_deepgemm_contiguous();
Contract contract_04_moe_deepgemm_masked();
Contract contract_04_moe_deepgemm_contiguous_fp8();
Contract contract_04_moe_deepgemm_masked_fp8();
}  // namespace ladder::stage_records
