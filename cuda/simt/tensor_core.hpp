// tensor_core.hpp -- warp-level tensor-core operations for ladder's CUDA kernels, in one header:
// inline PTX under nvcc (sm_80 and newer; the E4M3 mma needs sm_89), an emulation under SIMT.
// Include it after <simt.hpp>.
//
//   ldmatrix_x1 / _x2 / _x4 (d..., row)           ldmatrix.sync.aligned.m8n8.{x1,x2,x4}.shared.b16
//   ldmatrix_x1_trans / _x2_trans / _x4_trans      the same with .trans
//   mma_m16n8k16_bf16 (d, a, b, c)                 mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
//   mma_m16n8k16_f16  (d, a, b, c)                 mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
//   mma_m16n8k32_s8   (d, a, b, c)                 mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
//   mma_m16n8k32_e4m3 (d, a, b, c)                 mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 (sm_89+)
//   cp_async_ca<4|8|16>(smem, gmem[, src_bytes])   cp.async.ca.shared.global (bytes past src_bytes zero-filled)
//   cp_async_cg(smem, gmem[, src_bytes])           cp.async.cg.shared.global, 16 bytes
//   cp_async_commit_group(), cp_async_wait_group<N>(), cp_async_wait_all()
//
// Registers are `unsigned` (two 16-bit or four 8-bit elements, the lower index in the lower bits);
// fragment layouts are the PTX ISA's: "Warp-level matrix load instruction: ldmatrix", "Matrix
// Fragments for mma.m16n8k16 with floating point type", "Matrix Fragments for mma.m16n8k32".
// `d` may be the same array as `c`.
//
// Under SIMT (detail/tensor_core.hpp says how the arithmetic rounds):
// - ldmatrix and mma are warp collectives: all 32 lanes of the warp must call the same one at the same
//   line, else "simt: error" (a lane that exited, waits elsewhere, or a partial warp), as for shuffles.
// - cp.async stays per thread, as in PTX (a thread may skip its copy in a branch). The copy is
//   deferred to the cp_async_wait_group / wait_all of the issuing thread that covers it; until then
//   the destination holds 0xFF bytes (NaN for float / bf16 / fp16, -1 for integers), and an ldmatrix
//   that reads it stops with "simt: error" naming both lines. A missing wait_group therefore leaves
//   the data poisoned in every schedule; under TSan, the copy is a write of the issuing thread at its
//   wait, so another thread must be ordered after that wait by a barrier.
#pragma once

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tensor_core.hpp needs sm_80 or newer (mma.sync m16n8k16 bf16, cp.async)"
#endif

namespace simt {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x1(unsigned& d0, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(d0) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned& d0, unsigned& d1, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(d0), "=r"(d1)
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned& d0, unsigned& d1, unsigned& d2, unsigned& d3, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned& d0, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(d0) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned& d0, unsigned& d1, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(d0), "=r"(d1)
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& d0, unsigned& d1, unsigned& d2, unsigned& d3,
                                                  const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(shared_address(row)));
}

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                  const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                 const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k32_s8(int (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                const int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}
// Declared only where it can compile: a kernel that uses it guards the call for sm_89+ itself.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
__device__ __forceinline__ void mma_m16n8k32_e4m3(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                  const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
#endif

template <int Bytes>
__device__ __forceinline__ void cp_async_ca(void* smem, const void* gmem, int src_bytes = Bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_address(smem)), "l"(gmem), "n"(Bytes),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_cg(void* smem, const void* gmem, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative count");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace simt

#else

#include <source_location>

#include "detail/tensor_core.hpp"

namespace simt {

#define SIMT_AT std::source_location at = std::source_location::current()

inline void ldmatrix_x1(unsigned& d0, const void* row, SIMT_AT) {
  unsigned d[1];
  detail::ldmatrix<1, false>(d, row, "ldmatrix.x1", at);
  d0 = d[0];
}
inline void ldmatrix_x2(unsigned& d0, unsigned& d1, const void* row, SIMT_AT) {
  unsigned d[2];
  detail::ldmatrix<2, false>(d, row, "ldmatrix.x2", at);
  d0 = d[0], d1 = d[1];
}
inline void ldmatrix_x4(unsigned& d0, unsigned& d1, unsigned& d2, unsigned& d3, const void* row, SIMT_AT) {
  unsigned d[4];
  detail::ldmatrix<4, false>(d, row, "ldmatrix.x4", at);
  d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}
inline void ldmatrix_x1_trans(unsigned& d0, const void* row, SIMT_AT) {
  unsigned d[1];
  detail::ldmatrix<1, true>(d, row, "ldmatrix.x1.trans", at);
  d0 = d[0];
}
inline void ldmatrix_x2_trans(unsigned& d0, unsigned& d1, const void* row, SIMT_AT) {
  unsigned d[2];
  detail::ldmatrix<2, true>(d, row, "ldmatrix.x2.trans", at);
  d0 = d[0], d1 = d[1];
}
inline void ldmatrix_x4_trans(unsigned& d0, unsigned& d1, unsigned& d2, unsigned& d3, const void* row, SIMT_AT) {
  unsigned d[4];
  detail::ldmatrix<4, true>(d, row, "ldmatrix.x4.trans", at);
  d0 = d[0], d1 = d[1], d2 = d[2], d3 = d[3];
}

namespace detail {
template <Input In, class Acc>
void mma_call(Acc (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const Acc (&c)[4], const char* name,
              const std::source_location& at) {
  std::uint32_t cw[4], dw[4];
  for (int i = 0; i < 4; ++i) cw[i] = std::bit_cast<std::uint32_t>(c[i]);
  mma<In>(dw, a, b, cw, name, at);
  for (int i = 0; i < 4; ++i) d[i] = std::bit_cast<Acc>(dw[i]);
}
}  // namespace detail

inline void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                              SIMT_AT) {
  detail::mma_call<detail::Input::bf16>(d, a, b, c, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", at);
}
inline void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                             SIMT_AT) {
  detail::mma_call<detail::Input::fp16>(d, a, b, c, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", at);
}
inline void mma_m16n8k32_s8(int (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const int (&c)[4], SIMT_AT) {
  detail::mma_call<detail::Input::s8>(d, a, b, c, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", at);
}
inline void mma_m16n8k32_e4m3(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                              SIMT_AT) {
  detail::mma_call<detail::Input::e4m3>(d, a, b, c, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", at);
}

template <int Bytes>
void cp_async_ca(void* smem, const void* gmem, int src_bytes = Bytes, SIMT_AT) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  detail::cp_async(smem, gmem, Bytes, src_bytes, "cp.async.ca.shared.global", at);
}
inline void cp_async_cg(void* smem, const void* gmem, int src_bytes = 16, SIMT_AT) {
  detail::cp_async(smem, gmem, 16, src_bytes, "cp.async.cg.shared.global", at);
}
inline void cp_async_commit_group(SIMT_AT) { detail::cp_async_commit(at); }
template <int N>
void cp_async_wait_group(SIMT_AT) {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative count");
  detail::cp_async_wait(N, "cp.async.wait_group", at);
}
inline void cp_async_wait_all(SIMT_AT) {
  detail::cp_async_commit(at);
  detail::cp_async_wait(0, "cp.async.wait_all", at);
}

#undef SIMT_AT

}  // namespace simt

#endif
