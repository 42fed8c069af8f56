// tests/simt/kernels_primitives.cu -- probe kernels for each SIMT primitive (expected values are in
// test_simt_primitives.cpp, derived from the CUDA programming guide's rules, not from this code).
#include <simt.hpp>

#include <cstdint>
#include <vector>

#include "kernels.hpp"
#include "ladder/cuda/device.hpp"

namespace simt_tests {
namespace {

using ladder::cuda::DeviceBuffer;

__global__ void shuffle_probe_kernel(int* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
  const unsigned full = 0xffffffffu;
  int* o = out + t * shuffle_probe_outputs;
  o[0] = __shfl_xor_sync(full, t * 10, 5, 8);
  o[1] = __shfl_down_sync(full, t * 10, 3, 16);
  o[2] = __shfl_up_sync(full, t * 10, 6);
  o[3] = __shfl_sync(full, t * 10, 31 - lane);
  o[4] = __shfl_sync(full, t * 10, lane + 37, 16);
  o[5] = __shfl_up_sync(full, t * 10, 2, 4);
  o[6] = __shfl_xor_sync(full, t * 10, 16, 8);
  o[7] = __shfl_down_sync(full, t * 10, 1);
  o[8] = __shfl_sync(full, t * 10, 3, 1);
  const double d = __shfl_xor_sync(full, t + 0.25, 1);  // 64-bit values move whole
  o[9] = static_cast<int>(d * 4);
}

__global__ void vote_probe_kernel(int* out) {
  const int lane = threadIdx.x;
  int* o = out + lane * vote_probe_outputs;
  o[0] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  if (lane < 16) {
    const unsigned low = 0x0000ffffu;
    o[1] = static_cast<int>(__ballot_sync(low, lane % 3 == 0));
    o[2] = __any_sync(low, lane == 5);
    o[3] = __all_sync(low, lane < 16);
    o[4] = __shfl_xor_sync(low, lane, 1);
    o[5] = __shfl_sync(low, lane, 20);  // lane 20 is not in the mask: undefined, poisoned to -1
  } else {
    const unsigned high = 0xffff0000u;
    o[1] = static_cast<int>(__ballot_sync(high, lane % 2));
    o[2] = __any_sync(high, 0);
    o[3] = __all_sync(high, lane != 20);
    o[4] = __shfl_down_sync(high, lane, 1);
    o[5] = __shfl_up_sync(high, lane, 16);
  }
}

__global__ void syncwarp_exchange_kernel(const int* in, int* out) {
  __shared__ int s[64];
  const int t = threadIdx.x;
  s[t] = in[t];
  __syncwarp();
  out[t] = s[t ^ 1];
}

__global__ void atomics_kernel(AtomicTotals* totals) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&totals->add_int, 1);
  atomicSub(&totals->sub_int, 2);
  atomicMax(&totals->max_int, t - 500);
  atomicMin(&totals->min_int, 500 - t);
  atomicAdd(&totals->add_unsigned, 3u);
  atomicMax(&totals->max_unsigned, static_cast<unsigned>(t) * 7u);
  atomicMin(&totals->min_unsigned, static_cast<unsigned>(t) + 11u);
  atomicOr(&totals->or_unsigned, 1u << (t % 32));
  atomicAnd(&totals->and_unsigned, ~(1u << (t % 32)));
  atomicXor(&totals->xor_unsigned, 1u << (t % 3));
  atomicAdd(&totals->add_ull, 1ull << 33);
  atomicMax(&totals->max_ull, static_cast<unsigned long long>(t) << 40);
  atomicMin(&totals->min_ll, -static_cast<long long>(t) * 3);
  atomicAdd(&totals->add_float, 1.0f);
  atomicAdd(&totals->add_double, 0.5);
  // The CAS loop for an operation without an atomic. It starts from a guess instead of the usual
  // plain read of the counter: that read races with the other threads' atomicCAS (TSan says so).
  int old = 0, assumed = 0;
  do {
    assumed = old;
    old = atomicCAS(&totals->cas_int, assumed, assumed + 2);
  } while (old != assumed);
  atomicAdd(reinterpret_cast<unsigned long long*>(&totals->exch_sum),
            static_cast<unsigned long long>(atomicExch(&totals->exch_final, t + 1)));
}

__global__ void early_exit_kernel(int* out) {
  __shared__ int s[128];
  if (threadIdx.x >= 100) return;
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[99 - threadIdx.x];
}

__global__ void shared_poison_kernel(std::uint32_t* out, int per_thread) {
  SIMT_DYNAMIC_SHARED(float, s);
  const int t = threadIdx.x, base = t * per_thread;
  std::uint32_t* o = out + (blockIdx.x * blockDim.x + t) * per_thread;
  for (int i = 0; i < per_thread; ++i) o[i] = __float_as_uint(s[base + i]);
  for (int i = 0; i < per_thread; ++i) s[base + i] = 1.0f;  // the next block must see poison again
}

__global__ void indices_kernel(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned* o = out + 12 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
  const unsigned v[12] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
                          blockDim.x,  blockDim.y,  blockDim.z,  gridDim.x,  gridDim.y,  gridDim.z};
  for (int i = 0; i < 12; ++i) o[i] = v[i];
}

__global__ void warp_leaders_kernel(int* out) {
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[thread] = __shfl_sync(0xffffffffu, thread, 0);
}

// Tree reduction in shared memory down to one warp, then shuffles: the usual block-sum pattern.
__global__ void block_sums_kernel(const int* x, int cols, long long* sums, unsigned long long* total) {
  __shared__ long long partial[256];
  const int t = threadIdx.x;
  const int* row = x + static_cast<long long>(blockIdx.x) * cols;
  long long acc = 0;
  for (int c = t; c < cols; c += blockDim.x) acc += row[c];
  partial[t] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t < 32) {
    long long v = partial[t];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (t == 0) {
      sums[blockIdx.x] = v;
      atomicAdd(total, static_cast<unsigned long long>(v));
    }
  }
}

__global__ void parameter_copies_kernel(int* out, int n) {
  n += threadIdx.x;
  __syncthreads();  // every thread has changed "its" n before any thread stores it
  out[threadIdx.x] = n;
}

__global__ void big_locals_kernel(float* out) {
  volatile float local[65536];
  for (int i = 0; i < 65536; ++i) local[i] = static_cast<float>(i % 7);
  float sum = 0.0f;
  for (int i = 0; i < 65536; ++i) sum += local[i];
  out[threadIdx.x] = sum;
}

__global__ void dp4a_probe_kernel(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* out_s,
                                  unsigned* out_u, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out_s[i] = static_cast<unsigned>(__dp4a(static_cast<int>(a[i]), static_cast<int>(b[i]), static_cast<int>(c[i])));
    out_u[i] = __dp4a(a[i], b[i], c[i]);
  }
}

}  // namespace

std::vector<int> shuffle_probe() {
  DeviceBuffer<int> out(2 * 64 * shuffle_probe_outputs);
  simt::launch(shuffle_probe_kernel, dim3(2), dim3(64), 0, out.data());
  return out.to_host();
}

std::vector<int> vote_probe() {
  DeviceBuffer<int> out(32 * vote_probe_outputs);
  simt::launch(vote_probe_kernel, dim3(1), dim3(32), 0, out.data());
  return out.to_host();
}

std::vector<int> syncwarp_exchange(const std::vector<int>& in) {
  DeviceBuffer<int> d_in(in), out(64);
  simt::launch(syncwarp_exchange_kernel, dim3(1), dim3(64), 0, d_in.data(), out.data());
  return out.to_host();
}

AtomicTotals atomics(int blocks, int threads) {
  AtomicTotals init{};
  init.max_int = -1000000;
  init.min_int = 1000000;
  init.min_unsigned = 0xffffffffu;
  init.and_unsigned = 0xffffffffu;
  init.exch_final = 0;
  DeviceBuffer<AtomicTotals> totals(&init, 1);
  simt::launch(atomics_kernel, dim3(blocks), dim3(threads), 0, totals.data());
  AtomicTotals result{};
  totals.copy_to_host(&result, 1);
  return result;
}

std::vector<int> early_exit() {
  DeviceBuffer<int> out(128);
  out.fill_zero();
  simt::launch(early_exit_kernel, dim3(1), dim3(128), 0, out.data());
  return out.to_host();
}

std::vector<std::uint32_t> shared_poison(int threads, int floats_per_thread) {
  DeviceBuffer<std::uint32_t> out(static_cast<std::size_t>(4 * threads * floats_per_thread));
  simt::launch(shared_poison_kernel, dim3(4), dim3(threads), sizeof(float) * threads * floats_per_thread,
               out.data(), floats_per_thread);
  return out.to_host();
}

std::vector<unsigned> indices(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
  DeviceBuffer<unsigned> out(12ull * gx * gy * gz * bx * by * bz);
  simt::launch(indices_kernel, dim3(gx, gy, gz), dim3(bx, by, bz), 0, out.data());
  return out.to_host();
}

std::vector<int> warp_leaders(unsigned bx, unsigned by, unsigned bz) {
  DeviceBuffer<int> out(bx * by * bz);
  simt::launch(warp_leaders_kernel, dim3(1), dim3(bx, by, bz), 0, out.data());
  return out.to_host();
}

std::vector<long long> block_sums(const std::vector<int>& x, int rows, int cols, long long& total) {
  DeviceBuffer<int> d_x(x);
  DeviceBuffer<long long> sums(static_cast<std::size_t>(rows));
  DeviceBuffer<unsigned long long> d_total(1);
  d_total.fill_zero();
  simt::launch(block_sums_kernel, dim3(rows), dim3(256), 0, d_x.data(), cols, sums.data(), d_total.data());
  unsigned long long t = 0;
  d_total.copy_to_host(&t, 1);
  total = static_cast<long long>(t);
  return sums.to_host();
}

std::vector<int> parameter_copies(int n, int threads) {
  DeviceBuffer<int> out(static_cast<std::size_t>(threads));
  simt::launch(parameter_copies_kernel, dim3(1), dim3(threads), 0, out.data(), n);
  return out.to_host();
}

void dp4a_probe(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                const std::vector<std::uint32_t>& c, std::vector<std::uint32_t>& out_s, std::vector<std::uint32_t>& out_u) {
  const int n = static_cast<int>(a.size());
  DeviceBuffer<unsigned> da(a), db(b), dc(c), ds(a.size()), du(a.size());
  simt::launch(dp4a_probe_kernel, dim3(2), dim3(64), 0, da.data(), db.data(), dc.data(), ds.data(), du.data(), n);
  out_s = ds.to_host();
  out_u = du.to_host();
}

float big_locals() {
  DeviceBuffer<float> out(32);
  simt::launch(big_locals_kernel, dim3(1), dim3(32), 0, out.data());
  return out.to_host()[31];
}

}  // namespace simt_tests
