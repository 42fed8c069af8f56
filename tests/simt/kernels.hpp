// tests/simt/kernels.hpp -- host API of the SIMT self-test kernels (kernels_*.cu).
//
// Each function copies its inputs to device buffers, launches through simt::launch, copies the
// outputs back and returns them. The .cu files build with g++ (kernels run on the CPU, in the test)
// and with nvcc for sm_80/sm_90 (compile-only check that the same kernels are valid CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace simt_tests {

// ---- dynamic shared memory above 48 KiB (kernels_shared.cu): one block of 256 threads fills `bytes` of dynamic
// shared memory with word indices and returns their sum, words (words - 1) / 2. plain: a kernel that never opts
// in; optin: its twin, after cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin).
unsigned long long shared_sum_plain(std::size_t bytes);
unsigned long long shared_sum_optin(std::size_t bytes, int optin);

// ---- primitives (kernels_primitives.cu)

inline constexpr int shuffle_probe_outputs = 10;
// grid 2 x block 64: thread t (global id) writes shuffle_probe_outputs ints, see the kernel.
std::vector<int> shuffle_probe();

inline constexpr int vote_probe_outputs = 6;
// one warp of 32 lanes in two divergent halves, each with its own mask.
std::vector<int> vote_probe();

// __syncwarp orders a warp's shared-memory exchange: out[t] = in[t ^ 1] within each warp.
std::vector<int> syncwarp_exchange(const std::vector<int>& in);

struct AtomicTotals {
  int add_int, sub_int, max_int, min_int, cas_int;
  unsigned add_unsigned, max_unsigned, min_unsigned, or_unsigned, and_unsigned, xor_unsigned;
  unsigned long long add_ull, max_ull;
  long long min_ll;
  float add_float;
  double add_double;
  long long exch_sum;  // sum of the values atomicExch returned plus the final value
  int exch_final;
};
// blocks x threads threads hammer the same counters (from several OS workers).
AtomicTotals atomics(int blocks, int threads);

// block of 128 where threads >= 100 return before __syncthreads: out[t] = 99 - t for t < 100.
std::vector<int> early_exit();

// Bit patterns (as uint32) every thread reads from dynamic shared memory before writing it; 4 blocks.
std::vector<std::uint32_t> shared_poison(int threads, int floats_per_thread);

// Per thread of grid x block: threadIdx, blockIdx, blockDim, gridDim (12 values) at its linear id.
std::vector<unsigned> indices(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);

// Per thread: the linear thread id of lane 0 of its warp (via __shfl_sync), to check how warps form.
std::vector<int> warp_leaders(unsigned bx, unsigned by, unsigned bz);

// Per block sums of rows of x (rows x cols ints) by a tree reduction in shared memory and a final
// warp reduction; also atomically adds every element to total.
std::vector<long long> block_sums(const std::vector<int>& x, int rows, int cols, long long& total);

// out[t] = n + t: each thread modifies its own copy of the by-value parameter n.
std::vector<int> parameter_copies(int n, int threads);

// A kernel with a 256 KiB local array per thread (needs SIMT_STACK_KB above 256).
float big_locals();

// __dp4a, both overloads, 2 blocks of 64 threads striding over the elements: out_s[i] = __dp4a(int(a[i]), int(b[i]), int(c[i])) and
// out_u[i] = __dp4a(a[i], b[i], c[i]) (unsigned), with the results as uint32 bit patterns.
void dp4a_probe(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                const std::vector<std::uint32_t>& c, std::vector<std::uint32_t>& out_s, std::vector<std::uint32_t>& out_u);

// ---- planted bugs (kernels_planted.cu): each returns true when the output matches the reference.

// Block sum: lane 0 of each warp stores its warp's partial in shared memory; warp 0 adds them.
// planted: no __syncthreads between storing and reading the partials.
bool warp_partials(bool planted);

// Tiled C = A B with both tiles in dynamic shared memory.
// planted: no __syncthreads after the multiply, so the next tile overwrites one still being read.
bool tile_overwrite(bool planted);

// out[i] = s[i - 1] where s[i] was written by thread i. planted: no __syncthreads in between.
bool neighbour_read(bool planted);

// ---- diagnostics (kernels_diagnostics.cu): each must abort with "simt: error" and the line.

void divergent_barrier();
extern const int divergent_barrier_lines[2];
void partial_mask_shuffle();
extern const int partial_mask_shuffle_line;
void partial_warp_shuffle();
extern const int partial_warp_shuffle_line;
void deadlock();
extern const int deadlock_lines[2];

}  // namespace simt_tests
