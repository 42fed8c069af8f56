// simt/detail/func_attributes.hpp -- cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// bytes) under g++, spelled as the CUDA runtime spells it, so the same call compiles with nvcc (where it is the
// runtime's) and here. The only attribute emulated is the dynamic shared memory limit of a kernel:
//
//   without the attribute   a launch may ask for at most 48 KiB (49152 bytes), as on every GPU since sm_20;
//   with it                 at most `bytes`, which may be at most the emulated device's opt-in limit per block.
//
// The emulated device is an sm_80 (A100): 163 KiB = 166912 bytes per block with the opt-in (CUDA C++
// Programming Guide, "Compute Capabilities", Table "Technical Specifications per Compute Capability": maximum
// shared memory per thread block, 163 KB for 8.0, 227 KB for 9.0; its §"Shared Memory" of compute capability
// 8.x / 9.0: "Kernels relying on shared memory allocations over 48 KB per block are architecture-specific, as
// such they must use dynamic shared memory (rather than statically sized arrays) and require an explicit opt-in
// using cudaFuncSetAttribute()"). sm_80 is the smaller of the two architectures ladder compiles for (sm_80,
// sm_90: 232448 bytes), so a launch that passes here also launches there.
//
// A value past the limit, or a launch past a kernel's limit, throws std::invalid_argument naming the kernel
// (its name, and where it was launched or set), the sizes and the limit; the GPU returns cudaErrorInvalidValue
// instead, which code that does not check sees only as a launch that did nothing. Not emulated: static
// __shared__ arrays count against the same limit on a GPU (static + dynamic <= the opt-in), and SIMT does not
// measure them; the carveout attribute (cudaFuncAttributePreferredSharedMemoryCarveout) and the others.
#pragma once
#include <cstddef>
#include <map>
#include <mutex>
#include <source_location>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "config.hpp"
#include "symbol.hpp"

// The runtime's names (cuda_runtime_api.h / driver_types.h values), declared only when nvcc does not compile.
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

namespace simt::detail {

inline constexpr std::size_t default_dynamic_shared_bytes = 48 * 1024;  // without the opt-in
inline constexpr std::size_t optin_dynamic_shared_bytes = 166912;       // sm_80's opt-in limit per block
inline constexpr const char* emulated_arch = "sm_80";

// Each kernel's MaxDynamicSharedMemorySize, by its address (one per process, like the attribute of a function
// in a CUDA context).
struct FuncAttributes {
  std::mutex mutex;
  std::map<const void*, std::size_t> max_dynamic_shared;
};
inline FuncAttributes& func_attributes() {
  static FuncAttributes a;
  return a;
}

// A kernel's dynamic shared memory limit, and whether cudaFuncSetAttribute set it.
struct SharedLimit {
  std::size_t bytes = default_dynamic_shared_bytes;
  bool opted_in = false;
};
inline SharedLimit max_dynamic_shared_bytes(const void* kernel) {
  FuncAttributes& a = func_attributes();
  const std::lock_guard<std::mutex> lock(a.mutex);
  const auto it = a.max_dynamic_shared.find(kernel);
  return it == a.max_dynamic_shared.end() ? SharedLimit{} : SharedLimit{it->second, true};
}

// "kernel ns::name<T>(int*), launched at file:line": its name from the symbol table (symbol.hpp), or in a
// stripped binary its type and address ("kernel void (int*) at 0x...").
template <class... P>
std::string kernel_text(void (*kernel)(P...), const char* verb, const std::source_location& at) {
  const void* address = reinterpret_cast<const void*>(kernel);
  const std::string name = function_name(address);
  return name.empty() ? cat("kernel ", demangle(typeid(void(P...)).name()), " at ", address, ", ", verb, " at ",
                            where(at))
                      : cat("kernel ", name, ", ", verb, " at ", where(at));
}

}  // namespace simt::detail

template <class... P>
cudaError_t cudaFuncSetAttribute(void (*kernel)(P...), cudaFuncAttribute attr, int value,
                                 std::source_location at = std::source_location::current()) {
  using namespace simt::detail;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    throw std::invalid_argument(cat("cudaFuncSetAttribute: attribute ", int(attr), " is not emulated (only "
                                    "cudaFuncAttributeMaxDynamicSharedMemorySize)"));
  if (value < 0 || std::size_t(value) > optin_dynamic_shared_bytes)
    throw std::invalid_argument(cat("cudaFuncSetAttribute: cudaFuncAttributeMaxDynamicSharedMemorySize = ", value,
                                    " bytes violates 0 <= bytes <= ", optin_dynamic_shared_bytes, " (the emulated ",
                                    emulated_arch, "'s opt-in limit per block) for ", kernel_text(kernel, "set", at)));
  FuncAttributes& a = func_attributes();
  const std::lock_guard<std::mutex> lock(a.mutex);
  a.max_dynamic_shared[reinterpret_cast<const void*>(kernel)] = std::size_t(value);
  return cudaSuccess;
}
