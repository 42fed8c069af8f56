// simt/detail/atomics.hpp -- CUDA atomic functions on the CPU.
//
// The overload set is CUDA's own (no atomicMax on float, no atomicCAS on float), so code that builds
// here also builds with nvcc. Like the GPU's, these atomics are relaxed: they make a read-modify-write
// indivisible but order nothing else, and TSan treats them the same way.
#pragma once
#include <atomic>

namespace simt::detail {

template <class T>
std::atomic_ref<T> ref(T* address) {
  return std::atomic_ref<T>(*address);
}

template <class T>
T fetch_max(T* address, T v) {
  auto a = ref(address);
  T old = a.load(std::memory_order_relaxed);
  while (old < v && !a.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
  }
  return old;
}

template <class T>
T fetch_min(T* address, T v) {
  auto a = ref(address);
  T old = a.load(std::memory_order_relaxed);
  while (v < old && !a.compare_exchange_weak(old, v, std::memory_order_relaxed)) {
  }
  return old;
}

template <class T>
T compare_and_swap(T* address, T compare, T v) {
  ref(address).compare_exchange_strong(compare, v, std::memory_order_relaxed);
  return compare;  // the old value, whether or not the swap happened
}

}  // namespace simt::detail

#define SIMT_ATOMIC(name, T, expression) \
  inline T name(T* address, T val) { return expression; }
#define SIMT_ATOMIC_INTEGERS(name, expression)   \
  SIMT_ATOMIC(name, int, expression)             \
  SIMT_ATOMIC(name, unsigned int, expression)    \
  SIMT_ATOMIC(name, unsigned long long, expression)

SIMT_ATOMIC_INTEGERS(atomicAdd, simt::detail::ref(address).fetch_add(val, std::memory_order_relaxed))
SIMT_ATOMIC(atomicAdd, float, simt::detail::ref(address).fetch_add(val, std::memory_order_relaxed))
SIMT_ATOMIC(atomicAdd, double, simt::detail::ref(address).fetch_add(val, std::memory_order_relaxed))
SIMT_ATOMIC(atomicSub, int, simt::detail::ref(address).fetch_sub(val, std::memory_order_relaxed))
SIMT_ATOMIC(atomicSub, unsigned int, simt::detail::ref(address).fetch_sub(val, std::memory_order_relaxed))
SIMT_ATOMIC_INTEGERS(atomicExch, simt::detail::ref(address).exchange(val, std::memory_order_relaxed))
SIMT_ATOMIC(atomicExch, float, simt::detail::ref(address).exchange(val, std::memory_order_relaxed))
SIMT_ATOMIC_INTEGERS(atomicMax, simt::detail::fetch_max(address, val))
SIMT_ATOMIC(atomicMax, long long, simt::detail::fetch_max(address, val))
SIMT_ATOMIC_INTEGERS(atomicMin, simt::detail::fetch_min(address, val))
SIMT_ATOMIC(atomicMin, long long, simt::detail::fetch_min(address, val))
SIMT_ATOMIC_INTEGERS(atomicAnd, simt::detail::ref(address).fetch_and(val, std::memory_order_relaxed))
SIMT_ATOMIC_INTEGERS(atomicOr, simt::detail::ref(address).fetch_or(val, std::memory_order_relaxed))
SIMT_ATOMIC_INTEGERS(atomicXor, simt::detail::ref(address).fetch_xor(val, std::memory_order_relaxed))

#undef SIMT_ATOMIC_INTEGERS
#undef SIMT_ATOMIC

inline int atomicCAS(int* address, int compare, int val) {
  return simt::detail::compare_and_swap(address, compare, val);
}
inline unsigned int atomicCAS(unsigned int* address, unsigned int compare, unsigned int val) {
  return simt::detail::compare_and_swap(address, compare, val);
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare, unsigned long long val) {
  return simt::detail::compare_and_swap(address, compare, val);
}
