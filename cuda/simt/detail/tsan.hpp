// simt/detail/tsan.hpp -- happens-before annotations for ThreadSanitizer (the SIMT_TSAN build).
//
// In the TSan build every CUDA thread is its own TSan fiber, and switching between fibers creates no
// ordering. The layer adds ordering only where CUDA guarantees it: __syncthreads, __syncwarp, the start
// of a block (after the host's writes) and its end. A missing barrier therefore shows up as a
// "ThreadSanitizer: data race" at the kernel's source line, whatever order the threads ran in.
// The layer's own bookkeeping (thread states, warp records) is shared by all fibers of a worker
// without ordering by design, so it runs inside runtime_begin()/runtime_end() and is not checked.
// Outside the TSan build every function here is an empty inline and compiles away.
#pragma once

#if defined(SIMT_TSAN) && !defined(__SANITIZE_THREAD__)
#error "SIMT_TSAN needs -fsanitize=thread"
#endif
#if defined(__SANITIZE_THREAD__) && !defined(SIMT_TSAN)
#error "under -fsanitize=thread define SIMT_TSAN, or TSan cannot follow the fibers of the SIMT layer"
#endif

#if defined(SIMT_TSAN)
#include <sanitizer/tsan_interface.h>
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace simt::detail::tsan {

#if defined(SIMT_TSAN)
inline void* current_fiber() { return __tsan_get_current_fiber(); }
inline void* create_fiber() { return __tsan_create_fiber(0); }
inline void destroy_fiber(void* fiber) { __tsan_destroy_fiber(fiber); }
// Called immediately before the real stack switch; no_sync: a switch is not an ordering point.
inline void switch_to(void* fiber) { __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync); }
inline void release(void* sync_object) { __tsan_release(sync_object); }
inline void acquire(void* sync_object) { __tsan_acquire(sync_object); }
inline void runtime_begin() { __tsan_ignore_thread_begin(); }
inline void runtime_end() { __tsan_ignore_thread_end(); }
#else
inline void* current_fiber() { return nullptr; }
inline void* create_fiber() { return nullptr; }
inline void destroy_fiber(void*) {}
inline void switch_to(void*) {}
inline void release(void*) {}
inline void acquire(void*) {}
inline void runtime_begin() {}
inline void runtime_end() {}
#endif

}  // namespace simt::detail::tsan
