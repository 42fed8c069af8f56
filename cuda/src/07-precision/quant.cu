// cuda/src/07-precision/quant.cu -- stage 07: the quantisers on the device, and their dequantisations.
//
// The recipes are ladder/core/quant.hpp's, bit for bit: a tile's scale is s = fl(amax / qmax) in float32
// (qmax = 127 for int8, 448 for E4M3; s = 1 for an all-zero tile), each code is the element format's RNE
// rounding of fl(x / s) with saturation (ladder/core/formats.hpp, whose encoders are __host__ __device__
// integer code: the same bits under nvcc and g++). amax is a max of |x|, exact in any order, so the
// reductions below (warp shuffles, then shared memory) give the reference's scale whatever the schedule.
//   per token (int8)   one block of 256 threads per row: strided max, warp xor-shuffle max, one partial
//                      per warp in shared memory, barrier, every thread folds the 8 partials, quantises.
//   per channel (int8) one block of 32 x 8 threads per 32 columns: 8 threads walk down each column, their
//                      maxima meet in shared memory behind one barrier.
//   E4M3 1 x 128       one block of 128 threads per tile (row r, columns 128 b ..): one element per thread.
//   E4M3 128 x 128     one block of 256 threads per weight block: thread t walks column t % 128 of the block,
//                      rows t / 128, + 2, ...; the block max as above; then the same walk quantises.
//   E4M3 static        elementwise q = RNE(x / s) with the caller's one scale (fp8_block's x_scale), and
//                      every tile's scale set to s (fp8_quantize_x's layout).
// The dequantisations are elementwise: x = code * scale, one float32 multiplication (as quant::dequantize).
#include "ladder/core/formats.hpp"
#include "ladder/cuda/07-precision/precision_kernels.hpp"
#include "simt.hpp"

namespace ladder::cuda::precision {
namespace {

static_assert(kRowThreads % 32 == 0 && kE4m3Tile % 32 == 0 && kE4m3BlockThreads % kE4m3Tile == 0,
              "whole warps: the shuffles use a full mask");
static_assert(formats::kE4m3Max == 448.0f, "E4M3's largest finite value");

// The max of v over the block's threads (blockDim.x = threads, whole warps); `partial` holds threads / 32
// floats of shared memory. Every thread returns the block's max. One barrier: nothing writes `partial`
// after it in the calling kernels.
template <int threads>
__device__ float block_max(float v, float* partial) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();  // every warp's partial stored before any thread folds them
  float m = partial[0];
  for (int w = 1; w < threads / 32; ++w) m = fmaxf(m, partial[w]);
  return m;
}

__device__ float scale_of(float amax, float qmax) { return amax == 0.0f ? 1.0f : amax / qmax; }

__global__ void quantize_rows_int8_kernel(const float* x, int cols, int8_t* q, float* scales) {
  __shared__ float partial[kRowThreads / 32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kRowThreads) amax = fmaxf(amax, fabsf(xr[c]));
  const float s = scale_of(block_max<kRowThreads>(amax, partial), 127.0f);
  if (threadIdx.x == 0) scales[blockIdx.x] = s;
  int8_t* qr = q + static_cast<int64_t>(blockIdx.x) * cols;
  for (int c = threadIdx.x; c < cols; c += kRowThreads) qr[c] = formats::to_int8(xr[c] / s);
}

__global__ void quantize_cols_int8_kernel(const float* w, int rows, int cols, int8_t* q, float* scales) {
  __shared__ float partial[kColThreadsY][kColThreadsX];
  const int c = blockIdx.x * kColThreadsX + threadIdx.x;
  float amax = 0.0f;
  if (c < cols)
    for (int r = threadIdx.y; r < rows; r += kColThreadsY) amax = fmaxf(amax, fabsf(w[static_cast<int64_t>(r) * cols + c]));
  partial[threadIdx.y][threadIdx.x] = amax;
  __syncthreads();  // the column's 8 maxima stored before any of its threads folds them
  for (int y = 0; y < kColThreadsY; ++y) amax = fmaxf(amax, partial[y][threadIdx.x]);
  if (c >= cols) return;
  const float s = scale_of(amax, 127.0f);
  if (threadIdx.y == 0) scales[c] = s;
  for (int r = threadIdx.y; r < rows; r += kColThreadsY) {
    const int64_t i = static_cast<int64_t>(r) * cols + c;
    q[i] = formats::to_int8(w[i] / s);
  }
}

// grid (rows, tiles): block (r, b) quantises x[r, 128 b .. 128 b + 127] (the last tile of a row may be short).
__global__ void quantize_e4m3_1x128_kernel(const float* x, int cols, uint8_t* q, float* scales) {
  __shared__ float partial[kE4m3Tile / 32];
  const int c = blockIdx.y * kE4m3Tile + threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * cols + c;
  const float v = c < cols ? x[i] : 0.0f;
  const float s = scale_of(block_max<kE4m3Tile>(fabsf(v), partial), 448.0f);
  if (threadIdx.x == 0) scales[static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y] = s;
  if (c < cols) q[i] = formats::to_e4m3(v / s);
}

// grid (column blocks, row blocks): block (b, a) quantises w[128 a .., 128 b ..] (the last ones may be short);
// scales [ceil(rows / 128), ceil(cols / 128)].
__global__ void quantize_e4m3_128x128_kernel(const float* w, int rows, int cols, uint8_t* q, float* scales) {
  __shared__ float partial[kE4m3BlockThreads / 32];
  const int c = blockIdx.x * kE4m3Tile + threadIdx.x % kE4m3Tile, r0 = blockIdx.y * kE4m3Tile;
  const int r1 = r0 + kE4m3Tile < rows ? r0 + kE4m3Tile : rows;
  constexpr int kRowStep = kE4m3BlockThreads / kE4m3Tile;
  float amax = 0.0f;
  if (c < cols)
    for (int r = r0 + threadIdx.x / kE4m3Tile; r < r1; r += kRowStep)
      amax = fmaxf(amax, fabsf(w[static_cast<int64_t>(r) * cols + c]));
  const float s = scale_of(block_max<kE4m3BlockThreads>(amax, partial), 448.0f);
  if (threadIdx.x == 0) scales[static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x] = s;
  if (c < cols)
    for (int r = r0 + threadIdx.x / kE4m3Tile; r < r1; r += kRowStep) {
      const int64_t i = static_cast<int64_t>(r) * cols + c;
      q[i] = formats::to_e4m3(w[i] / s);
    }
}

// q = RNE(x / s) for n elements, and scales[0 .. tiles) = s.
__global__ void quantize_e4m3_static_kernel(const float* x, int64_t n, float s, uint8_t* q, float* scales,
                                            int64_t tiles) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n || i < tiles;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i < n) q[i] = formats::to_e4m3(x[i] / s);
    if (i < tiles) scales[i] = s;
  }
}

__global__ void dequantize_rows_int8_kernel(const int8_t* q, const float* scales, int64_t n, int cols, float* x) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = static_cast<float>(q[i]) * scales[i / cols];
}

__global__ void dequantize_e4m3_1x128_kernel(const uint8_t* q, const float* scales, int64_t n, int cols, float* x) {
  const int tiles = (cols + kE4m3Tile - 1) / kE4m3Tile;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    x[i] = formats::from_e4m3(q[i]) * scales[r * tiles + c / kE4m3Tile];
  }
}

unsigned elem_blocks(int64_t n) {
  const int64_t b = (n + kElemThreads - 1) / kElemThreads;
  return static_cast<unsigned>(b < 4096 ? b : 4096);  // grid-stride past 4096 blocks
}

}  // namespace

namespace detail {

void launch_quantize_rows_int8(const float* x, int rows, int cols, int8_t* q, float* scales) {
  simt::launch(quantize_rows_int8_kernel, dim3(static_cast<unsigned>(rows)), dim3(kRowThreads), 0, x, cols, q, scales);
}

void launch_quantize_cols_int8(const float* w, int rows, int cols, int8_t* q, float* scales) {
  simt::launch(quantize_cols_int8_kernel, dim3(static_cast<unsigned>((cols + kColThreadsX - 1) / kColThreadsX)),
               dim3(kColThreadsX, kColThreadsY), 0, w, rows, cols, q, scales);
}

void launch_quantize_e4m3_1x128(const float* x, int rows, int cols, uint8_t* q, float* scales) {
  simt::launch(quantize_e4m3_1x128_kernel,
               dim3(static_cast<unsigned>(rows), static_cast<unsigned>((cols + kE4m3Tile - 1) / kE4m3Tile)),
               dim3(kE4m3Tile), 0, x, cols, q, scales);
}

void launch_quantize_e4m3_128x128(const float* w, int rows, int cols, uint8_t* q, float* scales) {
  simt::launch(quantize_e4m3_128x128_kernel,
               dim3(static_cast<unsigned>((cols + kE4m3Tile - 1) / kE4m3Tile),
                    static_cast<unsigned>((rows + kE4m3Tile - 1) / kE4m3Tile)),
               dim3(kE4m3BlockThreads), 0, w, rows, cols, q, scales);
}

void launch_quantize_e4m3_static(const float* x, int rows, int cols, float s, uint8_t* q, float* scales) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  const int64_t t = static_cast<int64_t>(rows) * ((cols + kE4m3Tile - 1) / kE4m3Tile);  // the tiles' scales
  simt::launch(quantize_e4m3_static_kernel, dim3(elem_blocks(n)), dim3(kElemThreads), 0, x, n, s, q, scales, t);
}

void launch_dequantize_rows_int8(const int8_t* q, const float* scales, int rows, int cols, float* x) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  simt::launch(dequantize_rows_int8_kernel, dim3(elem_blocks(n)), dim3(kElemThreads), 0, q, scales, n, cols, x);
}

void launch_dequantize_e4m3_1x128(const uint8_t* q, const float* scales, int rows, int cols, float* x) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  simt::launch(dequantize_e4m3_1x128_kernel, dim3(elem_blocks(n)), dim3(kElemThreads), 0, q, scales, n, cols, x);
}

}  // namespace detail
}  // namespace ladder::cuda::precision
