// ladder/core/timing.hpp -- wall-clock medians for `ladder reproduce` tables (never used in tests).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace ladder {

// Median wall time in seconds of `reps` calls of f (after one warm-up call).
template <class F>
double median_seconds(F&& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

// Measured copy bandwidth in bytes/s (bytes read + bytes written per second), OpenMP over chunks,
// the memory bound the stage tables compare against. At most 2^25 floats (128 MB) per buffer: far past
// any last-level cache, so the rate is DRAM's, and a caller holding its own 2^26-float arrays stays
// under `ladder reproduce`'s 1 GB (01-softmax's 2^26-element rows: 512 MB + 256 MB here).
inline constexpr size_t kCopyBandwidthMaxFloats = size_t{1} << 25;
inline double copy_bandwidth(size_t n_floats, int reps) {
  n_floats = n_floats < kCopyBandwidthMaxFloats ? n_floats : kCopyBandwidthMaxFloats;
  std::vector<float> a(n_floats, 1.0f), b(n_floats);
  const long chunks = 64;
  const double s = median_seconds(
      [&] {
#pragma omp parallel for schedule(static)
        for (long c = 0; c < chunks; ++c) {
          const size_t lo = n_floats * c / chunks, hi = n_floats * (c + 1) / chunks;
          std::memcpy(b.data() + lo, a.data() + lo, (hi - lo) * sizeof(float));
        }
      },
      reps);
  return 2.0 * n_floats * sizeof(float) / s;
}

}  // namespace ladder
