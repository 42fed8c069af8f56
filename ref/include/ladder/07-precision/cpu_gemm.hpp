// ladder/07-precision/cpu_gemm.hpp -- the CPU fast paths of stage 07's two low-precision GEMMs, chosen at run
// time (issue 40 deliverable 5). No -march is needed: each fast kernel is compiled for its instruction set
// with a function attribute and called only where the CPU reports the feature (__builtin_cpu_supports; AMX:
// CPUID, XGETBV and Linux's arch_prctl grant), so one binary runs on any x86-64 and gives the same bits on every
// CPU.
//
// int8: c = a b, a [m x k] int8, b [k x n] int8 row-major, c [m x n] int32 -- the same exact integers as
//   gemm_s8s8s32 (a8w8.hpp), on every path. Paths: amx = AMX-INT8 (TDPBSSD on tiles, signed x signed: no
//   offset; cpu_gemm_int8_amx.cpp), avx512 = AVX512-VNNI (VPDPBUSD on zmm), avx = AVX-VNNI
//   (VPDPBUSD on ymm), avx2 = AVX2 (VPMADDWD on int16 operands sign-extended from int8; no offset, see
//   cpu_gemm_int8.cpp for why it cannot saturate), portable = plain C++. VPDPBUSD multiplies UNSIGNED bytes
//   by signed bytes, so the VNNI kernels feed a + 128 (a XOR 0x80, in 0..255) and subtract 128 sum_k b_kj
//   once per output:
//     sum_k a_ik b_kj = sum_k (a_ik + 128) b_kj - 128 colsum_j(b).
//   Every step is int32 addition modulo 2^32 (VPDPBUSD does not saturate; the products (a+128) b fit
//   int16), and the true result fits int32 for k <= kA8W8MaxK, so the wrapped intermediate sums still
//   give the exact result: integer addition is associative, the order and blocking do not matter.
//
// bf16: c = a b, a [m x k] and b [k x n] bf16 codes (uint16_t, core/formats.hpp), c [m x n] float32, with
//   VDPBF16PS's arithmetic (Intel SDM, VDPBF16PS "Operation"; checked on the machine by the tests) as the
//   contract, so the portable path gives the same bits as the instruction:
//     c_ij = 0 (+0); for p = 0, 1, ..., ceil(k/2) - 1 (k odd: a zero pair element k pads the last pair):
//       c_ij = step(c_ij, a_i,2p+1, b_2p+1,j);  c_ij = step(c_ij, a_i,2p, b_2p,j)   (the odd element first)
//     step(acc, x, y) = FTZ(fma32(DAZ(x), DAZ(y), acc))
//   DAZ: a bf16 subnormal input counts as a zero of its sign. fma32: one float32 rounding, to nearest even
//   (the product of two bf16 is exact in float32; the instruction ignores MXCSR). FTZ: a result that is
//   tiny -- below 2^-126 in magnitude after rounding to 24 bits with an unbounded exponent (x86 detects
//   tininess after rounding) -- becomes the zero of its sign. Each c_ij is one fixed chain of steps, so
//   register and cache blocking cannot change it. NaN payloads are not part of the contract (a NaN input
//   gives a NaN); everything else, infinities and signed zeros included, is bit for bit. Paths: avx512 =
//   AVX512_BF16 (VDPBF16PS), avx2 = AVX2 + FMA (two VFMADD231PS per pair, odd element first; DAZ applied
//   when packing, FTZ and round-to-nearest-even by MXCSR, set for the kernel's duration), portable = C++.
#pragma once
#include <cstdint>

namespace ladder::precision {

enum class CpuPath { automatic, avx512, avx, avx2, portable, amx };

// "automatic", "amx", "avx512", "avx", "avx2", "portable".
const char* cpu_path_name(CpuPath p);

// Whether this CPU can run path p for the int8 (AMX-TILE + AMX-INT8 with the OS's tile state and Linux's
// grant, and AVX512-VNNI + AVX512BW for its packing / AVX512-VNNI + AVX512BW / AVX-VNNI / AVX2) or bf16
// (AVX512_BF16 / AVX2 + FMA) GEMM; portable and automatic always can. The bf16 GEMM has no amx or avx path (false).
bool int8_path_available(CpuPath p);
bool bf16_path_available(CpuPath p);

// What `automatic` runs on this CPU: the widest available path no wider than the environment variable
// LADDER_CPU_PATH allows when it is set (amx: any; avx512: no AMX path; avx: no AMX or AVX-512 path; avx2:
// none of AMX, AVX-512, AVX-VNNI; portable: none), to run the narrower paths on a wide machine; a value not among
// those five is an Error naming LADDER_CPU_PATH. (No AMX here or no grant: amx runs the next path down.)
CpuPath int8_path();
CpuPath bf16_path();

// c = a b exactly (see above); k <= kA8W8MaxK (a8w8.hpp) or an Error naming K; an unavailable path is an
// Error naming it. m, n, k >= 0. Runs on the OpenMP threads. The AMX and AVX-512 paths read a in place and pack
// b per thread, a column chunk at a time; the other fast paths pack a and b. Each keeps its buffers for the
// thread's next call (no fresh pages to fault in per call).
void gemm_s8s8s32_cpu(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n,
                      CpuPath path = CpuPath::automatic);

// c = a b in the bf16 contract above; every path gives the same bits. Runs on the OpenMP threads.
void gemm_bf16_cpu(const uint16_t* a, const uint16_t* b, float* c, int64_t m, int64_t k, int64_t n,
                   CpuPath path = CpuPath::automatic);

// One step of the bf16 contract, portable: FTZ(fma32(DAZ(x), DAZ(y), acc)) for bf16 codes x, y.
float bf16_dot_step(float acc, uint16_t x, uint16_t y);

}  // namespace ladder::precision
