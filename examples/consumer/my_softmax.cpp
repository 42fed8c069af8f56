// my_softmax.cpp -- "your" kernel: a float softmax over rows, two passes (max, then sum of exp).
// Define BROKEN_SOFTMAX to plant a bug (no max subtraction) and watch the check fail.
#include <cmath>
#include <cstdint>
#include <limits>

void my_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -std::numeric_limits<float>::infinity();
#ifndef BROKEN_SOFTMAX
    for (int64_t j = 0; j < cols; ++j) m = std::fmax(m, xr[j]);
#else
    m = 0;
#endif
    if (m == -std::numeric_limits<float>::infinity()) {  // fully masked row: all zeros (ladder's definition)
      for (int64_t j = 0; j < cols; ++j) yr[j] = 0;
      continue;
    }
    float d = 0;
    for (int64_t j = 0; j < cols; ++j) d += std::exp(xr[j] - m);
    for (int64_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j] - m) / d;
  }
}
