// ladder/99-rowsum/rowsum.hpp -- the template stage (examples/stage-template/README.md): row sums,
// sequential -> pairwise. Small on purpose: it shows every part a stage declares, not an algorithm.
#pragma once
#include <cstdint>

#include "ladder/core/cost.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::rowsum {

// s[r] = sum_j x[r, j], left to right. x: [rows, cols] row-major, s: [rows].
template <class T>
void sequential_rows(const T* x, T* s, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    T acc = 0;
    for (int64_t j = 0; j < cols; ++j) acc += x[r * cols + j];
    s[r] = acc;
  }
}

// The same sums by halves (a fixed tree: the error grows as log2(cols), not cols).
template <class T>
T pairwise_sum(const T* x, int64_t n) {
  if (n <= 8) {
    T acc = 0;
    for (int64_t j = 0; j < n; ++j) acc += x[j];
    return acc;
  }
  const int64_t h = n / 2;
  return pairwise_sum(x, h) + pairwise_sum(x + h, n - h);
}

template <class T>
void pairwise_rows(const T* x, T* s, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) s[r] = pairwise_sum(x + r * cols, cols);
}

// What the registry stores for each rung (Rung::fn<RowsFns>()).
struct RowsFns {
  void (*f32)(const float*, float*, int64_t, int64_t);
  void (*f64)(const double*, double*, int64_t, int64_t);
};

// Cost of shape {rows, cols}: one read per element, one write per row, cols - 1 adds per row.
inline Cost cost(const Shape& s) {
  require(s.size() == 2, "99-rowsum: cost shape has rank {}, violates [rows, cols]", s.size());
  Cost c;
  c.flops = static_cast<double>(s[0]) * static_cast<double>(s[1] - 1);
  c.bytes_read = 4.0 * static_cast<double>(s[0]) * static_cast<double>(s[1]);
  c.bytes_written = 4.0 * static_cast<double>(s[0]);
  return c;
}

}  // namespace ladder::rowsum
