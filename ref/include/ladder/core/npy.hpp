// ladder/core/npy.hpp -- .npy read/write (NumPy format 1.0/2.0/3.0), the golden files' format.
//
// Supported: little-endian '<f4' '<f8' '<i4' '<i8' (and '|' or '=' byte-order markers numpy writes on
// little-endian machines) and '|u1' (raw bytes: FlashMLA's FP8 cache records), C order, any rank. Everything else -- big-endian, Fortran order, other
// dtypes, truncated or inconsistent files -- raises ladder::Error naming the file and what is wrong.
// Spec: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ladder/core/tensor.hpp"

namespace ladder {

enum class DType { F4, F8, I4, I8, U1 };  // U1: '|u1', bytes (an input only, never a float candidate)

const char* dtype_name(DType d);  // "<f4" ...
size_t dtype_size(DType d);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::F4; }
template <>
constexpr DType dtype_of<double>() { return DType::F8; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::I4; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::I8; }
template <>
constexpr DType dtype_of<uint8_t>() { return DType::U1; }

struct NpyData {
  DType dtype{};
  Shape shape;
  std::vector<unsigned char> bytes;  // numel(shape) * dtype_size(dtype), little-endian
};

// Parses the bytes of a whole .npy file; `what` names it in error messages.
NpyData parse_npy(const std::string& file_bytes, const std::string& what);
NpyData read_npy(const std::filesystem::path& path);
void write_npy(const std::filesystem::path& path, DType dtype, const Shape& shape, const void* data);

// Exact dtype required (a golden written as <f8 must be read as double).
template <class T>
Array<T> load_npy(const std::filesystem::path& path) {
  NpyData d = read_npy(path);
  require(d.dtype == dtype_of<T>(), "{}: dtype {} where {} is required", path.string(), dtype_name(d.dtype),
          dtype_name(dtype_of<T>()));
  Array<T> a(d.shape);
  std::memcpy(a.data.data(), d.bytes.data(), d.bytes.size());
  return a;
}

// Any floating dtype converted to T (a candidate may be float32 or float64).
template <class T>
Array<T> load_npy_float_as(const std::filesystem::path& path) {
  NpyData d = read_npy(path);
  require(d.dtype == DType::F4 || d.dtype == DType::F8, "{}: dtype {} where a float dtype (<f4 or <f8) is required",
          path.string(), dtype_name(d.dtype));
  Array<T> a(d.shape);
  for (int64_t i = 0; i < a.size(); ++i) {
    if (d.dtype == DType::F4) {
      float v;
      std::memcpy(&v, d.bytes.data() + 4 * i, 4);
      a.data[i] = static_cast<T>(v);
    } else {
      double v;
      std::memcpy(&v, d.bytes.data() + 8 * i, 8);
      a.data[i] = static_cast<T>(v);
    }
  }
  return a;
}

template <class T>
void save_npy(const std::filesystem::path& path, const Array<T>& a) {
  write_npy(path, dtype_of<T>(), a.shape, a.data.data());
}

}  // namespace ladder
