// STARTER FILE of the lab (generated from the reference by `scripts/lab make`): fill in every TODO(lab: ...).
// cuda/src/01-softmax/softmax.cu -- stage 01 CUDA rungs: the same algorithms as ladder/01-softmax/softmax.hpp.
//
//   01 softmax     naive -> safe -> online                                  <== this file
//   02 attention   naive -> flash (one row, online) -> tiled (blocks, FA2 loop order) -> backward
//   03 mla         CD -> CC -> A_CC -> A_CC_ME -> AM
//   04 moe         gate -> sort -> ragged dot -> unsort + combine
//   05 eplb        balanced packing -> replicate -> hierarchical | global
//   06 disagg      step-time model -> event simulator -> KV-cache migration
//
// Versions: v1_naive (thread per row), v2_safe (block per row, notes Alg. 2 with block reductions),
// v3_online (block per row, notes Alg. 3 with per-thread (m, d) pairs merged), v4_online_warp (warp
// per row, for short rows). v2 and v3 read their row from DRAM once, into registers, and run every
// pass there (8 bytes per element, the floor; see "keeping the row on chip"). Compiled by nvcc for
// sm_80/sm_90, and by g++ through cuda/simt to run on the CPU in the tests (SIMT_SCHEDULE=forward|
// reverse|random:N and TSan catch a missing barrier).
//
// The (m, d) merge (Milakov & Gimelshein 2018, eq. 4): two partial states over disjoint parts of a row
//   (m_a, d_a) (+) (m_b, d_b) = (m, d_a e^{m_a - m} + d_b e^{m_b - m}),  m = max(m_a, m_b)
// is associative and commutative, so threads may fold their elements in any order and the block may
// combine the threads' states in a tree -- the reason the online softmax parallelises.
//
// NaN and inf, as ladder/01-softmax/softmax.hpp defines them: a row of -inf gives zeros, -inf beside a
// finite entry exactly 0, a NaN or +inf anywhere makes the row NaN. Each rung gets there with one check
// per row (on d, on m, or in md_merge's rare m = -inf branch), never a branch per element.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ladder/cuda/01-softmax/softmax.hpp"
#include "simt.hpp"

namespace ladder::cuda::softmax {
namespace {

struct MD {
  float m;  // running max
  float d;  // running denominator, sum of e^{x - m}
};

// An element x_j enters as MD{x_j, 1}. fmaxf drops a NaN, so a NaN element reaches d as e^{NaN - m} =
// NaN, which no later merge undoes (NaN * 0 is NaN): a state's d is NaN once it holds a NaN. A +inf
// element gives m = +inf and e^{inf - inf} = NaN in d: the row is NaN, as defined. m = -inf: both sides
// hold only -inf (where e^{-inf - (-inf)} would be NaN) or NaN: no mass, d = 0, or NaN if either side
// holds a NaN. So whenever m = -inf, d is 0 or NaN: exactly the value of every y_i of such a row.
__device__ __forceinline__ MD md_merge(MD a, MD b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return MD{-INFINITY, isnan(a.m) || isnan(b.m) || isnan(a.d) || isnan(b.d) ? NAN : 0.0f};
  return MD{m, a.d * expf(a.m - m) + b.d * expf(b.m - m)};
}

// Butterfly reductions over the 32 lanes of a warp: every lane ends with the warp's value.
__device__ __forceinline__ MD warp_merge(MD v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    MD other{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.d, offset)};
    v = md_merge(v, other);
  }
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A long row's sum in runs (chapter 01 "Long rows"; ladder/01-softmax/softmax.hpp, row_sum): summed in
// one run, the float normaliser of a 2^20-entry row is off by 1.9e-3 (one thread, v1) or 3e-5 (one run
// per lane of a warp, v4), which the tolerance rule fails; runs of kRun consecutive terms (v1) or of kRun
// elements per lane (v4, 32 kRun columns) added into an outer sum stay near 1e-6.
constexpr int kRun = 1024;

// v1: thread r owns row r: d = sum_j e^{x_j}; y_i = e^{x_i} / d.
__global__ void softmax_v1_naive(const float* x, float* y, int rows, int cols) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + (size_t)r * cols;
  float* yr = y + (size_t)r * cols;
  float d = 0.0f;
  for (int j0 = 0; j0 < cols; j0 += kRun) {
    float run = 0.0f;
    for (int j = j0; j < min(cols, j0 + kRun); ++j) run += expf(xr[j]);
    d += run;
  }
  if (!(d < INFINITY)) d = NAN;  // overflow or +inf (d = inf), or a NaN: the row is NaN
  for (int i = 0; i < cols; ++i) yr[i] = expf(xr[i]) / d;
}

// ---- keeping the row on chip (v2, v3) ----------------------------------------------------------
// Softmax does a few flops per element and moves 4 bytes in and 4 bytes out, so it is memory-bound
// and its floor is 8 bytes of DRAM traffic per element. Alg. 2 as written reads x three times (max,
// sum, normalise) and Alg. 3 twice ((m, d), normalise): a block whose passes re-read its row from
// global memory moves 16 or 12 bytes per element (an H200 measured v2 and v3 written that way at 2.0x
// the floor on 16384 x 4096). So v2 and v3 read the row from DRAM ONCE, into registers, and run the
// rung's passes over that on-chip copy: 4 + 4 = 8 bytes per element, the floor (same H200, 16384 x
// 4096: v2 0.133 ms, v3 0.160 ms against 0.129 ms for a device-to-device copy of x; v3 does two exps
// per element in its fold, which the passes over registers can no longer hide). A thread keeps kPer
// floats (a compile-time bound, so the array is registers, not local memory) in chunks of kW
// consecutive columns, chunk c starting at column (threadIdx.x + c * blockDim.x) * kW: kW = 4 is one
// 16-byte float4 load per chunk (row 16-byte aligned and cols % 4 == 0), kW = 1 the scalar strided
// slice otherwise. Either way a warp touches consecutive addresses (coalesced). The launch picks the
// smallest kPer in {4, 8, 16, 32} with which the block holds the row, and only as many warps as that
// needs (launch_rows); a row too wide for kMaxThreads threads (over 32768 floats; 16384 unvectorised)
// falls back to RowSlice<kW, 0>, which holds nothing and re-reads x from global memory in every pass
// (the strided loops: 16 or 12 bytes per element again, less what L2 catches).
inline constexpr int kMaxThreads = 1024;  // largest block v2/v3 launch (rows of up to 32768 floats on chip)
inline constexpr int kMaxWarps = kMaxThreads / 32;

#if defined(__CUDACC__)
#define LADDER_UNROLL _Pragma("unroll")  // register arrays need constant indices: unroll every chunk loop
using Float4 = float4;
#else
#define LADDER_UNROLL
struct alignas(16) Float4 {
  float x, y, z, w;
};
#endif

__device__ __forceinline__ Float4 load4(const float* p) {
#if defined(__CUDACC__)
  return *reinterpret_cast<const float4*>(p);  // one 16-byte load (p is 16-byte aligned)
#else
  Float4 q;
  memcpy(&q, p, sizeof q);
  return q;
#endif
}
__device__ __forceinline__ void store4(float* p, Float4 q) {
#if defined(__CUDACC__)
  *reinterpret_cast<float4*>(p) = q;  // one 16-byte store
#else
  memcpy(p, &q, sizeof q);
#endif
}

// A thread's share of one row, held in registers. load() is the row's only read of x; for_each(f)
// calls f(x_j) for every element the thread holds (in its slice's column order); store(y, f) writes
// y_j = f(x_j) for the same elements.
template <int kW, int kPer>
struct RowSlice {
  static constexpr int kChunks = kPer / kW;
  static_assert((kW == 1 || kW == 4) && kChunks >= 1 && kChunks * kW == kPer);
  float v[kChunks][kW];
  int cols;

  __device__ __forceinline__ static int col(int c) { return (int(threadIdx.x) + c * int(blockDim.x)) * kW; }

  __device__ __forceinline__ void load(const float* xr, int n) {
    cols = n;
    LADDER_UNROLL
    for (int c = 0; c < kChunks; ++c) {  // all kChunks loads are issued before any value is used
      const int j = col(c);              // kW = 4: cols % 4 == 0, so a chunk is wholly in or out
      if constexpr (kW == 4) {
        const Float4 q = j < cols ? load4(xr + j) : Float4{0.0f, 0.0f, 0.0f, 0.0f};
        v[c][0] = q.x, v[c][1] = q.y, v[c][2] = q.z, v[c][3] = q.w;
      } else {
        v[c][0] = j < cols ? xr[j] : 0.0f;  // past the row: never used (for_each/store skip it)
      }
    }
  }
  template <class F>
  __device__ __forceinline__ void for_each(F f) const {
    LADDER_UNROLL
    for (int c = 0; c < kChunks; ++c)
      if (col(c) < cols) {
        LADDER_UNROLL
        for (int k = 0; k < kW; ++k) f(v[c][k]);
      }
  }
  template <class F>
  __device__ __forceinline__ void store(float* yr, F f) const {
    LADDER_UNROLL
    for (int c = 0; c < kChunks; ++c) {
      const int j = col(c);
      if (j >= cols) continue;
      if constexpr (kW == 4)
        store4(yr + j, Float4{f(v[c][0]), f(v[c][1]), f(v[c][2]), f(v[c][3])});
      else
        yr[j] = f(v[c][0]);
    }
  }
};

// The fallback for rows too wide to keep on chip: nothing is held, every pass re-reads x (strided).
template <int kW>
struct RowSlice<kW, 0> {
  const float* xr;
  int cols;
  __device__ __forceinline__ void load(const float* x_row, int n) { xr = x_row, cols = n; }
  template <class F>
  __device__ __forceinline__ void for_each(F f) const {
    for (int j = threadIdx.x; j < cols; j += blockDim.x) f(xr[j]);
  }
  template <class F>
  __device__ __forceinline__ void store(float* yr, F f) const {
    for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = f(xr[i]);
  }
};

// v2: block per row. Alg. 2 lines 1-4 (max) and 5-8 (sum) are block reductions: each thread folds its
// slice, warps reduce by shuffles, warp 0 reduces the warps' partials from shared memory. All three
// passes run over the row slice the block loaded once (see "keeping the row on chip" above).
template <int kW, int kPer>
__global__ void __launch_bounds__(kMaxThreads) softmax_v2_safe(const float* x, float* y, int cols) {
  __shared__ float s_part[kMaxWarps];
  __shared__ float s_max, s_sum;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  RowSlice<kW, kPer> row;
  row.load(xr, cols);  // the one DRAM read of the row (kPer > 0)

  // TODO(lab: v2_safe): Alg. 2 as a block over row.for_each: the max reduction, the sum-of-exp reduction (both through warp shuffles and shared memory, with the barriers they need), then the normalise pass with row.store; an all -inf row gives zeros, a NaN anywhere (also among -inf: fmaxf drops it from m) or a +inf makes the row NaN.
}

// v3: block per row, Alg. 3: each thread runs the online recurrence over its slice, the (m, d) states
// merge through shuffles and shared memory, then one normalise pass -- both passes over the row slice
// the block loaded once.
template <int kW, int kPer>
__global__ void __launch_bounds__(kMaxThreads) softmax_v3_online(const float* x, float* y, int cols) {
  __shared__ MD s_part[kMaxWarps];
  __shared__ MD s_row;
  const float* xr = x + (size_t)blockIdx.x * cols;
  float* yr = y + (size_t)blockIdx.x * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  RowSlice<kW, kPer> row;
  row.load(xr, cols);  // the one DRAM read of the row (kPer > 0)

  // TODO(lab: v3_online): Alg. 3 as a block: each thread folds its elements (row.for_each) into an (m, d) pair with the online recurrence, the pairs merge with md_merge through warp shuffles and shared memory (with the barriers they need), then the normalise pass with row.store; md_merge's comment says what (m, d) is for a row of -inf, NaN or +inf.
}

// v4: warp per row. Lane l folds elements l, l+32, ...; the warp merges by shuffles, and every lane
// already holds the row's (m_V, d_V): no shared memory, no __syncthreads.
__global__ void softmax_v4_online_warp(const float* x, float* y, int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps exit together, so the full-mask shuffles below stay legal
  const float* xr = x + (size_t)r * cols;
  float* yr = y + (size_t)r * cols;
  MD md{-INFINITY, 0.0f};
  for (int j0 = 0; j0 < cols; j0 += 32 * kRun) {  // runs of kRun per lane, merged into md (see kRun)
    MD run{-INFINITY, 0.0f};
    for (int j = j0 + lane; j < min(cols, j0 + 32 * kRun); j += 32) run = md_merge(run, MD{xr[j], 1.0f});
    md = md_merge(md, run);
  }
  md = warp_merge(md);
  for (int i = lane; i < cols; i += 32) yr[i] = md.m == -INFINITY ? md.d : expf(xr[i] - md.m) / md.d;
}

// v2/v3 launch shape for a row of `cols` floats (see "keeping the row on chip"): the smallest kPer in
// {4, 8, 16, 32} with which kBlockThreads threads hold the row, and the block shrunk to the warps it
// needs (a 97-float row gets one warp, not eight mostly idle ones); past kBlockThreads x kPer floats
// the block grows up to kMaxThreads; past that, kPer = 0: kBlockThreads threads and the strided
// fallback. The scalar slice stops at 16 floats a thread (32 scalar chunks spilled to local memory
// under the 64 registers a 1024-thread block allows), so rows on chip: up to 32768 floats with float4,
// 16384 without.
// 16384 x 4096: 256 threads x 16 floats (4 float4 loads) per row, one block per row.
using RowKernel = void (*)(const float*, float*, int);

template <template <int, int> class Rung>
void launch_rows(const float* x, float* y, int rows, int cols) {
  const bool vec =  // float4 only where every row starts 16-byte aligned, in x and in y
      cols % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const int max_per = vec ? 32 : 16;
  int per = 0;
  for (int p = 4; p <= max_per && per == 0; p *= 2)
    if (cols <= p * kBlockThreads) per = p;
  if (per == 0 && cols <= max_per * kMaxThreads) per = max_per;
  const int threads = per == 0 ? kBlockThreads : (cols + per * 32 - 1) / (per * 32) * 32;
  RowKernel k = Rung<1, 0>::kernel;
  switch (per) {
    case 4: k = vec ? Rung<4, 4>::kernel : Rung<1, 4>::kernel; break;
    case 8: k = vec ? Rung<4, 8>::kernel : Rung<1, 8>::kernel; break;
    case 16: k = vec ? Rung<4, 16>::kernel : Rung<1, 16>::kernel; break;
    case 32: k = Rung<4, 32>::kernel; break;  // vec only
    default: break;
  }
  simt::launch(k, dim3(static_cast<unsigned>(rows)), dim3(static_cast<unsigned>(threads)), 0, x, y, cols);
}
template <int kW, int kPer>
struct V2Safe {
  static constexpr RowKernel kernel = softmax_v2_safe<kW, kPer>;
};
template <int kW, int kPer>
struct V3Online {
  static constexpr RowKernel kernel = softmax_v3_online<kW, kPer>;
};

}  // namespace

namespace detail {

void launch_v1_naive(const float* x, float* y, int rows, int cols) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlockV1 - 1) / kRowsPerBlockV1);
  simt::launch(softmax_v1_naive, dim3(blocks), dim3(kRowsPerBlockV1), 0, x, y, rows, cols);
}

void launch_v2_safe(const float* x, float* y, int rows, int cols) { launch_rows<V2Safe>(x, y, rows, cols); }

void launch_v3_online(const float* x, float* y, int rows, int cols) { launch_rows<V3Online>(x, y, rows, cols); }

void launch_v4_online_warp(const float* x, float* y, int rows, int cols) {
  const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlockV4 - 1) / kWarpsPerBlockV4);
  simt::launch(softmax_v4_online_warp, dim3(blocks), dim3(32 * kWarpsPerBlockV4), 0, x, y, rows, cols);
}

}  // namespace detail
}  // namespace ladder::cuda::softmax
