// ladder/core/huge_pages.hpp -- large arrays that a kernel streams, backed by 2 MiB pages where Linux allows it.
//
// Why: a rung that streams gigabytes (mla CD's decompressed cache: 2.7 GB per step at B = 1, L = 16384) pays
// one TLB miss per 4 KiB page it reads. Under a hypervisor that keeps shadow page tables (the 2-core Zen 5
// VM of the bench history runs under PVM, dmesg "Hypervisor detected: PVM", with transparent huge pages in
// `madvise` mode) those misses, and the page faults that first touch each page, cost far more than on bare
// metal: on that VM a memcpy ran 1.9-3.9x faster from 2 MiB pages than from 4 KiB pages, CD's step 1.7x
// (bench/reports/cpu-history.md, 2026-11-29). The kernel backs a range with transparent huge pages when
// it is advised before its first touch (madvise(2), MADV_HUGEPAGE; Documentation/admin-guide/mm/transhuge.rst)
// -- where THP is `always` that is already the default and the advice changes nothing; where it is `never`,
// or off Linux, the advice is ignored. Contents and bits never depend on it.
//
// assign_advised(v, n, fill) sizes a std::vector the way v.assign(n, fill) does, with its storage advised
// before the fill touches it (reserve allocates without touching; glibc serves a block this large from a
// fresh mapping). advise_huge_pages(p, bytes) advises the whole 2 MiB pages inside [p, p + bytes) of memory
// not yet touched (Eigen matrices: allocated uninitialised). Blocks under kHugeAdviceBytes are left alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ladder {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugeAdviceBytes = size_t{4} << 20;  // smaller blocks: at most one whole huge page inside

// Advises [p, p + bytes)'s whole 2 MiB pages for transparent huge pages; true if the kernel took the advice.
inline bool advise_huge_pages(const void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == nullptr || bytes < kHugeAdviceBytes) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (a + kHugePageBytes - 1) & ~uintptr_t{kHugePageBytes - 1};
  const uintptr_t hi = (a + bytes) & ~uintptr_t{kHugePageBytes - 1};
  if (hi <= lo) return false;
  return madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

// v = n copies of fill (as v.assign(n, fill)), in new storage advised for huge pages before the fill.
template <class T>
void assign_advised(std::vector<T>& v, size_t n, const T& fill) {
  std::vector<T>().swap(v);  // the old storage goes; reserve then maps fresh, untouched memory
  v.reserve(n);
  advise_huge_pages(v.data(), n * sizeof(T));
  v.assign(n, fill);
}

}  // namespace ladder
