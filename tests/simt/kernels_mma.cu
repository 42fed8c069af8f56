// tests/simt/kernels_mma.cu -- probe kernels for tensor_core.hpp: fragments loaded through the PTX
// ISA's tables (kernels_mma.hpp), ldmatrix against plain loads, cp.async with its waits, and the
// planted mistakes and broken rules the SIMT layer must catch. Compiled by nvcc for sm_80 / sm_89 /
// sm_90 too (the E4M3 mma only where __CUDA_ARCH__ >= 890).
#include <simt.hpp>
#include <tensor_core.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels_mma.hpp"
#include "ladder/core/formats.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {

using ladder::cuda::DeviceBuffer;

namespace {

// Registers of A and B for one lane through the tables; `a` and `b` hold one element per word.
__device__ void load_fragments(int k, int lane, const std::uint32_t* a, const std::uint32_t* b, unsigned (&ar)[4],
                               unsigned (&br)[2]) {
  for (int r = 0; r < 4; ++r) ar[r] = 0;
  br[0] = br[1] = 0;
  if (k == 16) {
    for (int i = 0; i < 8; ++i) {
      const Cell p = k16_a(lane, i);
      ar[i / 2] |= a[p.row * 16 + p.col] << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const Cell p = k16_b(lane, i);
      br[i / 2] |= b[p.row * 8 + p.col] << (16 * (i % 2));
    }
  } else {
    for (int i = 0; i < 16; ++i) {
      const Cell p = k32_a(lane, i);
      ar[i / 4] |= a[p.row * 32 + p.col] << (8 * (i % 4));
    }
    for (int i = 0; i < 8; ++i) {
      const Cell p = k32_b(lane, i);
      br[i / 4] |= b[p.row * 8 + p.col] << (8 * (i % 4));
    }
  }
}

__global__ void mma_tile_kernel(int kind, const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* c,
                                std::uint32_t* d, bool planted) {
  const int lane = threadIdx.x;
  unsigned ar[4], br[2];
  load_fragments(kind <= static_cast<int>(MmaKind::fp16) ? 16 : 32, lane, a, b, ar, br);
  if (planted) {  // the classic slip: a1 taken as the columns + 8, a2 as the rows + 8
    const unsigned t = ar[1];
    ar[1] = ar[2];
    ar[2] = t;
  }
  float cf[4], df[4] = {0, 0, 0, 0};
  int ci[4], di[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const Cell p = c16x8(lane, i);
    cf[i] = __uint_as_float(c[p.row * 8 + p.col]);
    ci[i] = static_cast<int>(c[p.row * 8 + p.col]);
  }
  if (kind == static_cast<int>(MmaKind::bf16)) simt::mma_m16n8k16_bf16(df, ar, br, cf);
  if (kind == static_cast<int>(MmaKind::fp16)) simt::mma_m16n8k16_f16(df, ar, br, cf);
  if (kind == static_cast<int>(MmaKind::s8)) simt::mma_m16n8k32_s8(di, ar, br, ci);
  if (kind == static_cast<int>(MmaKind::e4m3)) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
    simt::mma_m16n8k32_e4m3(df, ar, br, cf);
#else
    __trap();  // no E4M3 mma before sm_89
#endif
  }
  for (int i = 0; i < 4; ++i) {
    const Cell p = c16x8(lane, i);
    const bool integer = kind == static_cast<int>(MmaKind::s8);
    d[p.row * 8 + p.col] = integer ? static_cast<std::uint32_t>(di[i]) : __float_as_uint(df[i]);
  }
}

__global__ void ldmatrix_probe_kernel(int variant, std::uint32_t* out) {
  SIMT_DYNAMIC_SHARED(std::uint16_t, tile);
  const int lane = threadIdx.x;
  for (int e = 0; e < 8; ++e) tile[lane * 8 + e] = static_cast<std::uint16_t>(0x100 + lane * 8 + e);
  __syncwarp();
  const std::uint16_t* row = tile + (lane % 16) * 16 + (lane / 16) * 8;
  unsigned r[4] = {0, 0, 0, 0};
  switch (variant) {
    case 0: simt::ldmatrix_x1(r[0], row); break;
    case 1: simt::ldmatrix_x2(r[0], r[1], row); break;
    case 2: simt::ldmatrix_x4(r[0], r[1], r[2], r[3], row); break;
    case 3: simt::ldmatrix_x1_trans(r[0], row); break;
    case 4: simt::ldmatrix_x2_trans(r[0], r[1], row); break;
    default: simt::ldmatrix_x4_trans(r[0], r[1], r[2], r[3], row); break;
  }
  for (int m = 0; m < 4; ++m) out[lane * 4 + m] = r[m];
}

__global__ void fragments_both_ways_kernel(const std::uint32_t* a, const std::uint32_t* b, std::uint32_t* out) {
  SIMT_DYNAMIC_SHARED(std::uint16_t, sa);  // A: 16 x 16, then B: 16 x 8, both row-major
  std::uint16_t* sb = sa + 256;
  const int lane = threadIdx.x;
  for (int e = lane; e < 256; e += 32) sa[e] = static_cast<std::uint16_t>(a[e]);
  for (int e = lane; e < 128; e += 32) sb[e] = static_cast<std::uint16_t>(b[e]);
  __syncwarp();
  unsigned* o = out + lane * 12;
  simt::ldmatrix_x4(o[0], o[1], o[2], o[3], sa + (lane % 16) * 16 + (lane / 16) * 8);
  simt::ldmatrix_x2_trans(o[4], o[5], sb + (lane % 16) * 8);  // lanes 16-31: addresses unused
  unsigned ar[4], br[2];
  load_fragments(16, lane, a, b, ar, br);
  for (int r = 0; r < 4; ++r) o[6 + r] = ar[r];
  o[10] = br[0];
  o[11] = br[1];
}

__global__ void cp_async_probe_kernel(const int* src, int* out, bool read_in_flight) {
  SIMT_DYNAMIC_SHARED(int, s);
  const int t = threadIdx.x;
  int* o = out + t * cp_async_outputs;
  simt::cp_async_ca<16>(s + t * 4, src + t * 4);
  simt::cp_async_commit_group();
  simt::cp_async_ca<8>(s + 128 + t * 2, src + 128 + t * 2);
  simt::cp_async_cg(s + 192 + t * 4, src + 192 + t * 4, 8);
  simt::cp_async_ca<4>(s + 320 + t, src + 320 + t);
  simt::cp_async_commit_group();
  for (int i = 0; i < cp_async_outputs; ++i) o[i] = 0;
  if (read_in_flight)
    for (int i = 0; i < 4; ++i) o[i] = s[t * 4 + i];  // before any wait: still in flight
  simt::cp_async_wait_group<1>();
  for (int i = 0; i < 4; ++i) o[4 + i] = s[t * 4 + i];
  if (read_in_flight) {  // group 1 may still be in flight
    for (int i = 0; i < 4; ++i) o[8 + i] = s[192 + t * 4 + i];
    for (int i = 0; i < 2; ++i) o[12 + i] = s[128 + t * 2 + i];
  }
  simt::cp_async_wait_group<0>();
  for (int i = 0; i < 4; ++i) o[14 + i] = s[192 + t * 4 + i];
  for (int i = 0; i < 2; ++i) o[18 + i] = s[128 + t * 2 + i];
  o[20] = s[320 + t];
}

// Thread t copies row t (8 floats) of the tile; variant 0: correct, 1: no wait, 2: reads before its
// wait, 3: no __syncthreads between the waits and the neighbour's read.
__global__ void cp_async_rows_kernel(int variant, const float* src, float* out) {
  SIMT_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x, n = blockDim.x;
  simt::cp_async_cg(s + t * 8, src + t * 8);
  simt::cp_async_cg(s + t * 8 + 4, src + t * 8 + 4);
  simt::cp_async_commit_group();
  float own = 0.0f;
  if (variant == 2)
    for (int i = 0; i < 8; ++i) own += s[t * 8 + i];
  if (variant != 1) simt::cp_async_wait_group<0>();
  if (variant != 2)
    for (int i = 0; i < 8; ++i) own += s[t * 8 + i];
  if (variant != 3) __syncthreads();
  float next = 0.0f;
  for (int i = 0; i < 8; ++i) next += s[((t + 1) % n) * 8 + i];
  out[t] = own + next;
}

}  // namespace

// ---- broken rules (the *_line constants point at the lines the error must name: keep them next to
// the code they point at)

__global__ void mma_missing_lane_kernel(float* out) {
  const unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  const float c[4] = {0, 0, 0, 0};
  float d[4] = {0, 0, 0, 0};
  if (threadIdx.x != 7) simt::mma_m16n8k16_bf16(d, a, b, c);
  out[threadIdx.x] = d[0];
}
const int mma_missing_lane_line = __LINE__ - 3;

__global__ void ldmatrix_mixed_shapes_kernel(std::uint32_t* out) {
  SIMT_DYNAMIC_SHARED(std::uint16_t, tile);
  const int lane = threadIdx.x;
  for (int e = 0; e < 8; ++e) tile[lane * 8 + e] = 0;
  __syncwarp();
  unsigned r[4] = {0, 0, 0, 0};
  const std::uint16_t* row = tile + (lane % 16) * 16 + (lane / 16) * 8;
  if (lane < 16)
    simt::ldmatrix_x4(r[0], r[1], r[2], r[3], row);
  else
    simt::ldmatrix_x2(r[0], r[1], row);
  out[lane] = r[0];
}
const int ldmatrix_mixed_shapes_lines[2] = {__LINE__ - 5, __LINE__ - 3};

__global__ void ldmatrix_before_wait_kernel(const std::uint16_t* src, std::uint32_t* out) {
  SIMT_DYNAMIC_SHARED(std::uint16_t, tile);
  const int lane = threadIdx.x, offset = (lane % 16) * 16 + (lane / 16) * 8;
  simt::cp_async_cg(tile + offset, src + offset);
  simt::cp_async_commit_group();
  unsigned r[4];
  simt::ldmatrix_x4(r[0], r[1], r[2], r[3], tile + offset);
  simt::cp_async_wait_group<0>();
  out[lane] = r[0];
}
const int ldmatrix_before_wait_lines[2] = {__LINE__ - 4, __LINE__ - 7};  // the ldmatrix, the cp.async

__global__ void mma_partial_warp_kernel(int* out) {
  const unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  const int c[4] = {0, 0, 0, 0};
  int d[4];
  simt::mma_m16n8k32_s8(d, a, b, c);
  out[threadIdx.x] = d[0];
}
const int mma_partial_warp_line = __LINE__ - 3;

// Variant 0: a 16-byte cp.async to an address 8 bytes off; 1: src_bytes 20 for a 16-byte copy;
// 2: an ldmatrix row address 8 bytes off.
__global__ void bad_operands_kernel(int variant, const float* src, std::uint32_t* out) {
  SIMT_DYNAMIC_SHARED(float, s);
  const int lane = threadIdx.x;
  unsigned r = 0;
  if (variant == 0) simt::cp_async_cg(s + 2, src);
  if (variant == 1) simt::cp_async_cg(s, src, 20);
  if (variant == 2) simt::ldmatrix_x1(r, s + 4 * lane + 2);
  simt::cp_async_wait_all();
  out[lane] = r;
}
const int bad_operands_lines[3] = {__LINE__ - 6, __LINE__ - 5, __LINE__ - 4};

std::vector<std::uint32_t> mma_tile(MmaKind kind, const std::vector<std::uint32_t>& a,
                                    const std::vector<std::uint32_t>& b, const std::vector<std::uint32_t>& c,
                                    bool planted) {
  DeviceBuffer<std::uint32_t> da(a), db(b), dc(c), dd(128);
  simt::launch(mma_tile_kernel, dim3(1), dim3(32), 0, static_cast<int>(kind), da.data(), db.data(), dc.data(),
               dd.data(), planted);
  return dd.to_host();
}

bool mma_lane_map(bool planted) {
  std::vector<std::uint32_t> a(256), b(128), c(128, 0);  // 0.0f bits
  const auto bf16 = [](int v) -> std::uint32_t { return ladder::formats::to_bf16(static_cast<float>(v)); };  // exact
  for (int i = 0; i < 256; ++i) a[i] = bf16((i / 16 * 3 + i % 16 * 5) % 7 - 3);
  for (int i = 0; i < 128; ++i) b[i] = bf16((i / 8 * 2 + i % 8 * 7) % 5 - 2);
  const std::vector<std::uint32_t> d = mma_tile(MmaKind::bf16, a, b, c, planted);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += ((i * 3 + k * 5) % 7 - 3) * ((k * 2 + j * 7) % 5 - 2);
      if (std::bit_cast<float>(d[i * 8 + j]) != static_cast<float>(sum)) return false;
    }
  return true;
}

std::vector<std::uint32_t> ldmatrix_probe(int variant) {
  DeviceBuffer<std::uint32_t> out(32 * 4);
  simt::launch(ldmatrix_probe_kernel, dim3(1), dim3(32), 512, variant, out.data());
  return out.to_host();
}

std::vector<std::uint32_t> fragments_both_ways(const std::vector<std::uint32_t>& a,
                                               const std::vector<std::uint32_t>& b) {
  DeviceBuffer<std::uint32_t> da(a), db(b), out(32 * 12);
  simt::launch(fragments_both_ways_kernel, dim3(1), dim3(32), 768, da.data(), db.data(), out.data());
  return out.to_host();
}

std::vector<std::int32_t> cp_async_probe(bool read_in_flight) {
  std::vector<int> src(352);
  for (int i = 0; i < 352; ++i) src[i] = 1000 + i;
  DeviceBuffer<int> dsrc(src), out(32 * cp_async_outputs);
  simt::launch(cp_async_probe_kernel, dim3(1), dim3(32), 352 * sizeof(int), dsrc.data(), out.data(),
               read_in_flight);
  return out.to_host();
}

namespace {
bool cp_async_rows(int variant) {
  constexpr int n = 64;
  std::vector<float> src(n * 8);
  for (int i = 0; i < n * 8; ++i) src[i] = static_cast<float>(i % 13);
  DeviceBuffer<float> dsrc(src), out(n);
  simt::launch(cp_async_rows_kernel, dim3(1), dim3(n), n * 8 * sizeof(float), variant, dsrc.data(), out.data());
  const std::vector<float> got = out.to_host();
  for (int t = 0; t < n; ++t) {
    float expect = 0.0f;
    for (int i = 0; i < 8; ++i) expect += src[t * 8 + i] + src[((t + 1) % n) * 8 + i];
    if (!(std::fabs(got[t] - expect) <= 1e-3f)) return false;
  }
  return true;
}
}  // namespace

bool cp_async_missing_wait(bool planted) { return cp_async_rows(planted ? 1 : 0); }
bool cp_async_early_read(bool planted) { return cp_async_rows(planted ? 2 : 0); }
bool cp_async_missing_barrier(bool planted) { return cp_async_rows(planted ? 3 : 0); }

void mma_missing_lane() {
  DeviceBuffer<float> out(32);
  simt::launch(mma_missing_lane_kernel, dim3(1), dim3(32), 0, out.data());
}

void ldmatrix_mixed_shapes() {
  DeviceBuffer<std::uint32_t> out(32);
  simt::launch(ldmatrix_mixed_shapes_kernel, dim3(1), dim3(32), 512, out.data());
}

void ldmatrix_before_wait() {
  DeviceBuffer<std::uint16_t> src(256);
  src.fill_zero();
  DeviceBuffer<std::uint32_t> out(32);
  simt::launch(ldmatrix_before_wait_kernel, dim3(1), dim3(32), 512, src.data(), out.data());
}

void bad_operands(int variant) {
  DeviceBuffer<float> src(64);
  DeviceBuffer<std::uint32_t> out(32);
  simt::launch(bad_operands_kernel, dim3(1), dim3(32), 1024, variant, src.data(), out.data());
}

void mma_partial_warp() {
  DeviceBuffer<int> out(48);
  simt::launch(mma_partial_warp_kernel, dim3(1), dim3(48), 0, out.data());
}

}  // namespace simt_tests
