// ref/src/07-precision/cpu_gemm_util.hpp -- what the int8 and bf16 CPU GEMMs share (private to the library):
// resolving `automatic` to the widest path the CPU has, or to the path LADDER_CPU_PATH names.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "ladder/07-precision/cpu_gemm.hpp"
#include "ladder/core/error.hpp"

namespace ladder::precision::detail {

// The AVX-512 paths, each in its own unit (cpu_gemm_int8_avx512.cpp, cpu_gemm_bf16_avx512.cpp): the same
// contract as gemm_s8s8s32_cpu / gemm_bf16_cpu; the caller has checked the arguments and the CPU.
void gemm_s8s8s32_avx512(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n);
void gemm_bf16_avx512(const uint16_t* a, const uint16_t* b, float* c, int64_t m, int64_t k, int64_t n);
// The AMX path (cpu_gemm_int8_amx.cpp), and whether this CPU, OS and process can use the tiles: AMX-TILE,
// AMX-INT8, XCR0's tile state, Linux's grant of the tile data (the caller checks AVX-512 for the packing).
void gemm_s8s8s32_amx(const int8_t* a, const int8_t* b, int32_t* c, int64_t m, int64_t k, int64_t n);
bool amx_int8_available();

namespace vnni512 {
// b's rows [4 g0, 4 (g0 + gl)) x columns [j0, j0 + 64) into dst [gl][64][4] (zero past k and n); corr[64] =
// -128 the columns' sums (cpu_gemm_int8_avx512.cpp; the AMX path packs with it too and ignores corr).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void pack_b(const int8_t* b, int64_t k, int64_t n, int64_t g0,
                                                                    int64_t gl, int64_t j0, int8_t* dst,
                                                                    int32_t* corr);
}  // namespace vnni512

// The widest of `widest_first` (amx, avx512, avx, avx2 in that order) that the CPU has and that LADDER_CPU_PATH
// allows: the variable caps the width (amx: no cap; avx512: no AMX path; avx: no AMX or AVX-512 path; avx2: no
// AMX, AVX-512 or AVX-VNNI path; portable: no fast path), to run the other paths on a wide machine. An unknown
// value is an Error naming LADDER_CPU_PATH.
inline CpuPath best_path(bool (*available)(CpuPath), std::initializer_list<CpuPath> widest_first) {
  auto rank = [](CpuPath p) {
    return p == CpuPath::amx ? 4 : p == CpuPath::avx512 ? 3 : p == CpuPath::avx ? 2 : p == CpuPath::avx2 ? 1 : 0;
  };
  int cap = 4;
  if (const char* env = std::getenv("LADDER_CPU_PATH"); env && *env) {
    const std::string s = env;
    cap = -1;
    for (CpuPath p : {CpuPath::amx, CpuPath::avx512, CpuPath::avx, CpuPath::avx2, CpuPath::portable})
      if (s == cpu_path_name(p)) cap = rank(p);
    require(cap >= 0, "LADDER_CPU_PATH = {} is not one of amx, avx512, avx, avx2, portable", s);
  }
  for (CpuPath p : widest_first)
    if (rank(p) <= cap && available(p)) return p;
  return CpuPath::portable;
}

}  // namespace ladder::precision::detail
