// ladder/core/recycle.hpp -- a per-thread bin of the large buffers that dropped results leave behind, so
// that a function returning a fresh result every call reuses the pages of the previous call's result.
//
// Why: glibc serves a block above its mmap threshold (at most 32 MiB on 64-bit: mallopt(3),
// M_MMAP_THRESHOLD) with a new mapping and unmaps it on free, so a result that large costs the kernel's
// zero-fill of every page on first touch, on every call. mla::decode's scores and attn are [B, H, L]
// each (64 MiB apiece at B = 32, L = 4096): on a 2-core Zen 5 VM, where a page fault traps to the
// hypervisor, the faults made decode 1.7-3.6x slower than decode_into (chapter 03 §5). A result type that
// gives its large vectors here when it dies (mla::Output) and takes them back when it is sized lets a
// loop of `out = decode(...)` or `{ auto o = decode(...); }` reuse storage with no help from the caller.
//
// The bin is per thread and per element type (thread_local: no locks; a buffer given on one thread is
// taken only there), holds at most kMaxBuffers buffers of at least kMinBytes each (smaller blocks come
// from malloc's own heap anyway) and, when full, frees the smallest. A taken buffer's contents are
// whatever the last owner left: the taker overwrites what it reads. recycle_release<T>() frees the
// calling thread's bin (the memory a long-lived thread would otherwise keep after its last result).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ladder {

// An uninitialised buffer of n elements (no value-initialisation pass: the owner writes what it reads).
template <class T>
struct RawBuffer {
  std::unique_ptr<T[]> data;
  int64_t size = 0;
};

template <class T>
class Recycler {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;
  static constexpr size_t kMaxBuffers = 8;

  // The calling thread's bin; nullptr once the thread's bin has been destroyed (a static result dies
  // after the main thread's thread_locals at exit: its buffers are then simply freed).
  static Recycler* local() {
    thread_local bool gone = false;  // trivially destructible: readable after r's destructor ran
    thread_local Recycler r(&gone);
    return gone ? nullptr : &r;
  }
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;
  ~Recycler() { *gone_ = true; }

  // Gives b's storage (a std::vector or a RawBuffer) to the calling thread's bin, if any; b is left empty.
  static void recycle(std::vector<T>& v) {
    if (Recycler* r = local()) r->give(std::move(v));
    std::vector<T>().swap(v);
  }
  static void recycle(RawBuffer<T>& b) {
    if (Recycler* r = local()) r->give(std::move(b));
    b = RawBuffer<T>();
  }
  // Takes a buffer of >= n elements from the calling thread's bin into b; false if there is none.
  static bool reuse(std::vector<T>& v, int64_t n) {
    Recycler* r = local();
    return r != nullptr && r->take(v, n);
  }
  static bool reuse(RawBuffer<T>& b, int64_t n) {
    Recycler* r = local();
    return r != nullptr && r->take(b, n);
  }

  // Keeps v's storage (if large enough) and leaves v empty.
  void give(std::vector<T>&& v) {
    if (v.capacity() * sizeof(T) < kMinBytes) return;
    keep(vectors_, std::move(v));
  }
  void give(RawBuffer<T>&& b) {
    if (static_cast<size_t>(b.size) * sizeof(T) < kMinBytes) return;
    keep(raws_, std::move(b));
  }
  // The smallest kept buffer of >= n elements (a vector's capacity; its size is the last owner's) into
  // v, whose own storage is freed; false if none.
  bool take(std::vector<T>& v, int64_t n) { return fetch(vectors_, v, n); }
  bool take(RawBuffer<T>& b, int64_t n) { return fetch(raws_, b, n); }

  size_t buffers() const { return vectors_.size() + raws_.size(); }
  void release() {
    vectors_.clear();
    raws_.clear();
  }

 private:
  static int64_t elems(const std::vector<T>& v) { return static_cast<int64_t>(v.capacity()); }
  static int64_t elems(const RawBuffer<T>& b) { return b.size; }

  template <class B>
  void keep(std::vector<B>& list, B&& buf) {
    list.push_back(std::move(buf));
    if (buffers() <= kMaxBuffers) return;
    auto smallest = std::min_element(list.begin(), list.end(), [](const B& a, const B& b) { return elems(a) < elems(b); });
    list.erase(smallest);
  }
  template <class B>
  static bool fetch(std::vector<B>& list, B& out, int64_t n) {
    auto best = list.end();
    for (auto it = list.begin(); it != list.end(); ++it)
      if (elems(*it) >= n && (best == list.end() || elems(*it) < elems(*best))) best = it;
    if (best == list.end()) return false;
    out = std::move(*best);
    list.erase(best);
    return true;
  }

  explicit Recycler(bool* gone) : gone_(gone) {}

  bool* gone_;
  std::vector<std::vector<T>> vectors_;
  std::vector<RawBuffer<T>> raws_;
};

// Frees the calling thread's bin of T buffers.
template <class T>
void recycle_release() {
  if (Recycler<T>* r = Recycler<T>::local()) r->release();
}

}  // namespace ladder
