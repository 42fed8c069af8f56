// ladder/cuda/device.hpp -- device memory for host code, in one place for both builds.
//
// The build decides, through one project macro seen by every translation unit (never __CUDACC__,
// which g++-compiled host files, tests and registry wrappers do not see):
//   LADDER_GPU (LADDER_CUDA=GPU, cmake/ladder_gpu.cmake): stream-ordered allocation (cudaMallocAsync /
//     cudaFreeAsync on the default stream, from the device's default memory pool, which keeps freed
//     memory for the next allocation instead of returning it at every synchronisation), cudaMemcpy,
//     every CUDA error thrown as ladder::Error; sync() surfaces asynchronous launch errors. A host API
//     call's scratch buffers therefore cost what a framework's caching allocator costs (no cudaMalloc,
//     and no cudaFree, which waits for the whole device, per call); where the device has no memory
//     pools (cudaDevAttrMemoryPoolsSupported = 0) it falls back to cudaMalloc / cudaFree.
//   otherwise (SIMT): ordinary host memory; kernels run on the CPU and read it directly.
// A fresh DeviceBuffer is poisoned with 0xFF bytes in both (NaN floats, -1 integers; cudaMemsetAsync on
// the GPU), so a kernel that reads memory nobody wrote -- an accumulator never zeroed -- fails loudly
// instead of finding the zeros an allocator often happens to return (or a pool's previous contents).
// Call fill_zero() when zeros are meant.
// Host API functions (ladder::cuda::<stage>::<rung>) take device pointers (DeviceBuffer::data()).
#pragma once
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "ladder/core/error.hpp"

#if defined(LADDER_GPU)
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#endif

namespace ladder::cuda {

#if defined(LADDER_GPU)
// Throws ladder::Error naming the call and CUDA's description of the error.
inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    throw Error(fmt::format("{}: {} ({})", call, cudaGetErrorName(status), cudaGetErrorString(status)));
}

namespace detail {
// Whether the current device has stream-ordered memory pools; the first call for a device also sets its
// default pool's release threshold to "never", so memory freed with cudaFreeAsync stays in the pool
// (the default threshold, 0, hands it back to the driver at every synchronisation and the next
// cudaMallocAsync maps it again). Decided once per device and process: a program that switches
// devices with cudaSetDevice gets each device's own answer.
inline bool memory_pools() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mutex;
  static std::map<int, bool> known;  // device -> pools supported (and its threshold set)
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(device); it != known.end()) return it->second;
  int supported = 0;
  check(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
        "cudaDeviceGetAttribute(cudaDevAttrMemoryPoolsSupported)");
  if (supported) {
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    unsigned long long keep = ~0ull;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
          "cudaMemPoolSetAttribute(cudaMemPoolAttrReleaseThreshold)");
  }
  known.emplace(device, supported != 0);
  return supported != 0;
}
}  // namespace detail
#endif

// Waits for every launched kernel; surfaces errors of asynchronous launches. No-op under SIMT,
// where simt::launch returns after the grid has finished.
inline void sync() {
#if defined(LADDER_GPU)
  check(cudaGetLastError(), "kernel launch");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

// Copies n values from device memory the caller does not own (a host API's device-pointer argument)
// to host[0, n); waits for running kernels first. A g++-compiled host file must use this, never read
// the pointer directly: that works under SIMT, where "device" memory is host memory, and is a
// segmentation fault in the GPU build.
template <class T>
void copy_to_host(const T* device, T* host, std::size_t n) {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values only");
  if (n == 0) return;
  require(device != nullptr && host != nullptr, "cuda::copy_to_host: n = {} with a null pointer", n);
#if defined(LADDER_GPU)
  check(cudaMemcpy(host, device, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
#else
  std::memcpy(static_cast<void*>(host), device, n * sizeof(T));
#endif
}

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values only");

 public:
  DeviceBuffer() = default;

  // n elements, uninitialised (poisoned: 0xFF bytes).
  explicit DeviceBuffer(std::size_t n) : size_(n) {
    if (n == 0) return;
#if defined(LADDER_GPU)
    void* p = nullptr;
    pooled_ = detail::memory_pools();
    if (pooled_)
      check(cudaMallocAsync(&p, bytes(), cudaStreamLegacy), "cudaMallocAsync");
    else
      check(cudaMalloc(&p, bytes()), "cudaMalloc");
    data_ = static_cast<T*>(p);
    if (const cudaError_t status = cudaMemsetAsync(p, 0xFF, bytes(), cudaStreamLegacy); status != cudaSuccess) {
      free();  // the destructor does not run when the constructor throws
      check(status, "cudaMemsetAsync (poison)");
    }
#else
    data_ = static_cast<T*>(::operator new(bytes(), alignment));
    std::memset(static_cast<void*>(data_), 0xFF, bytes());
#endif
  }

  // n elements copied from host memory.
  DeviceBuffer(const T* host, std::size_t n) : DeviceBuffer(n) { copy_from_host(host, n); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.data(), host.size()) {}

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), pooled_(other.pooled_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      free();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      pooled_ = other.pooled_;
    }
    return *this;
  }
  ~DeviceBuffer() { free(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  // Copies host[0, n) into elements [0, n).
  void copy_from_host(const T* host, std::size_t n) {
    check_count("copy_from_host", host, n);
    if (n == 0) return;
#if defined(LADDER_GPU)
    check(cudaMemcpy(data_, host, n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy host to device");
#else
    std::memcpy(static_cast<void*>(data_), host, n * sizeof(T));
#endif
  }

  // Copies elements [0, n) to host[0, n); waits for running kernels first (cudaMemcpy does).
  void copy_to_host(T* host, std::size_t n) const {
    check_count("copy_to_host", host, n);
    if (n == 0) return;
#if defined(LADDER_GPU)
    check(cudaMemcpy(host, data_, n * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
#else
    std::memcpy(static_cast<void*>(host), data_, n * sizeof(T));
#endif
  }

  std::vector<T> to_host() const {
    std::vector<T> host(size_);
    copy_to_host(host.data(), size_);
    return host;
  }

  // All bytes zero (cudaMemsetAsync, ordered with the kernels on the default stream).
  void fill_zero() {
    if (size_ == 0) return;
#if defined(LADDER_GPU)
    check(cudaMemsetAsync(data_, 0, bytes(), cudaStreamLegacy), "cudaMemsetAsync");
#else
    std::memset(static_cast<void*>(data_), 0, bytes());
#endif
  }

 private:
  // cudaMalloc returns 256-byte aligned memory; SIMT matches it so vectorised loads behave alike.
  static constexpr std::align_val_t alignment{256};

  void check_count(const char* what, const void* host, std::size_t n) const {
    require(n <= size_, "DeviceBuffer::{}: n = {} violates n <= size() = {}", what, n, size_);
    require(host != nullptr || n == 0, "DeviceBuffer::{}: n = {} with host = nullptr violates host != nullptr",
            what, n);
  }

  void free() noexcept {
    if (!data_) return;
#if defined(LADDER_GPU)
    // Cannot throw from a destructor; a failed free is reported by later calls. cudaFreeAsync on the
    // stream every kernel and copy of the project uses: the memory is reused only after the work
    // launched before it has finished. pooled_ is how this buffer was allocated (not how the device
    // current now allocates: the program may have switched devices since).
    if (pooled_)
      cudaFreeAsync(data_, cudaStreamLegacy);
    else
      cudaFree(data_);
#else
    ::operator delete(static_cast<void*>(data_), alignment);
#endif
    data_ = nullptr;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  bool pooled_ = false;  // GPU build: allocated by cudaMallocAsync (freed by cudaFreeAsync), else cudaMalloc
};

}  // namespace ladder::cuda
