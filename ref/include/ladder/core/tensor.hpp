// ladder/core/tensor.hpp -- row-major Eigen aliases and a small N-d array.
//
// Matrices are row-major (a row of a softmax batch, a query row of attention, a token of a cache is
// contiguous), matching the C-order .npy files and the CUDA kernels' indexing.
#pragma once
#include "ladder/core/eigen.hpp"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"

namespace ladder {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowVec = Eigen::Matrix<T, 1, Eigen::Dynamic>;
template <class T>
using MatMap = Eigen::Map<Mat<T>>;
template <class T>
using ConstMatMap = Eigen::Map<const Mat<T>>;

using Shape = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}
inline std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    // appended piece by piece: `const char* + std::string` (an insert at position 0) drew a false
    // -Wstringop-overflow from GCC 12 in the Python module's LTO link (a bound "between 2^63 + 1 and 2^64 - 1")
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

// Array<T>: a dense C-order N-d array (what .npy files hold). data.size() == numel(shape).
template <class T>
struct Array {
  Shape shape;
  std::vector<T> data;

  Array() = default;
  explicit Array(Shape s, T fill = T{}) : shape(std::move(s)), data(static_cast<size_t>(numel(shape)), fill) {
    for (auto d : shape) require(d >= 0, "Array: dimension {} violates dim >= 0", d);
  }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  int64_t rows() const { return shape.empty() ? 1 : numel(Shape(shape.begin(), shape.end() - 1)); }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  // View as rows x last-dim matrix (every N-d array is a batch of rows).
  MatMap<T> mat() { return MatMap<T>(data.data(), rows(), cols()); }
  ConstMatMap<T> mat() const { return ConstMatMap<T>(data.data(), rows(), cols()); }

  static Array from(const Mat<T>& m) {
    Array a({m.rows(), m.cols()});
    a.mat() = m;
    return a;
  }
  template <class U>
  Array<U> cast() const {
    Array<U> r;
    r.shape = shape;
    r.data.assign(data.begin(), data.end());
    return r;
  }
};

}  // namespace ladder
