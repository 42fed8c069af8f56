// python/src/arrays.hpp -- numpy arguments checked at the boundary, numpy results made without copies.
//
// Every check names the argument, its value and the constraint: a wrong type or dtype raises
// TypeError, a wrong shape, a non-contiguous or empty array, or NaN where the stage forbids it raises
// ValueError. The C++ code behind never sees an argument that failed here (and its own ladder::Error,
// for constraints only it knows, becomes ValueError in module.cpp).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/core/tensor.hpp"

namespace ladder::python {

namespace py = pybind11;

enum class Float { f32, f64 };

inline const char* float_name(Float f) { return f == Float::f32 ? "float32" : "float64"; }

// A checked array argument: C-contiguous, of the dtype named in `dtype`, rank `ndim` (-1: any >= 1).
struct Arg {
  std::string name;
  py::array array;
  Shape shape;
  const void* data() const { return array.data(); }
  template <class T>
  const T* ptr() const { return static_cast<const T*>(array.data()); }
  int64_t size() const { return numel(shape); }
};

inline std::string shape_text(const py::array& a) {
  Shape s(a.shape(), a.shape() + a.ndim());
  return "(" + [&] {
    std::string r;
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + (s.size() == 1 ? "," : "");
  }() + ")";
}

inline std::string dtype_text(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// The array behind `obj`, or TypeError naming `name`.
inline py::array as_array(py::handle obj, const std::string& name) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(name + ": expected a numpy.ndarray, got " +
                         py::str(py::type::of(obj).attr("__name__")).cast<std::string>());
  return py::reinterpret_borrow<py::array>(obj);
}

// Layout checks shared by every argument: rank, non-empty, C-contiguous.
inline Arg checked(py::array a, const std::string& name, int ndim, const char* layout) {
  if (ndim >= 0 && a.ndim() != ndim)
    throw py::value_error(name + ": shape " + shape_text(a) + " has " + std::to_string(a.ndim()) +
                          " dimensions, " + std::to_string(ndim) + " required (" + layout + ")");
  if (a.ndim() == 0) throw py::value_error(name + ": a 0-d array; at least 1 dimension required (" + layout + ")");
  if (a.size() == 0) throw py::value_error(name + ": shape " + shape_text(a) + " is empty; every dimension must be >= 1");
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(name + ": array is not C-contiguous (strides of a view or transpose); pass "
                          "numpy.ascontiguousarray(" + name + ")");
  return Arg{name, a, Shape(a.shape(), a.shape() + a.ndim())};
}

// A float argument: float32 or float64 (the precision the rung runs at comes from it).
inline Arg float_arg(py::handle obj, const std::string& name, int ndim, const char* layout, Float* precision) {
  py::array a = as_array(obj, name);
  const bool f32 = a.dtype().is(py::dtype::of<float>()), f64 = a.dtype().is(py::dtype::of<double>());
  if (!f32 && !f64)
    throw py::type_error(name + ": dtype " + dtype_text(a) + "; float32 or float64 required");
  Arg r = checked(a, name, ndim, layout);
  const Float f = f32 ? Float::f32 : Float::f64;
  if (precision) *precision = f;
  return r;
}

// Every float argument of one call must share the first one's dtype (no silent mixed precision).
inline void same_precision(const Arg& first, Float fp, const Arg& other) {
  const bool f32 = other.array.dtype().is(py::dtype::of<float>());
  if ((fp == Float::f32) != f32)
    throw py::type_error(other.name + ": dtype " + dtype_text(other.array) + " but " + first.name + " is " +
                         float_name(fp) + "; every float input of one call must have the same dtype");
}

// An array argument of exactly dtype T (integers: block tables, positions).
template <class T>
Arg typed_arg(py::handle obj, const std::string& name, int ndim, const char* layout) {
  py::array a = as_array(obj, name);
  if (!a.dtype().is(py::dtype::of<T>()))
    throw py::type_error(name + ": dtype " + dtype_text(a) + "; " + py::str(py::dtype::of<T>()).cast<std::string>() +
                         " required");
  return checked(a, name, ndim, layout);
}

// Shape equality with a message that names both arguments.
inline void require_shape(const Arg& a, const Shape& want, const std::string& why) {
  if (a.shape != want)
    throw py::value_error(a.name + ": shape " + shape_text(a.array) + " violates shape == " + shape_str(want) + " (" +
                          why + ")");
}

template <class T>
void require_no_nan(const Arg& a) {
  const T* p = a.ptr<T>();
  for (int64_t i = 0; i < a.size(); ++i)
    if (std::isnan(p[i]))
      throw py::value_error(a.name + ": NaN at flat index " + std::to_string(i) + "; NaN is not allowed here");
}

// A fresh C-order numpy array of T with the given shape; the C++ rung writes into it (no copy back).
template <class T>
py::array_t<T> empty_array(const Shape& shape) {
  std::vector<py::ssize_t> s(shape.begin(), shape.end());
  return py::array_t<T>(s);
}

// An Array<T> moved into a numpy array (one copy out of the vector; used where the C++ API returns Arrays).
template <class T>
py::array_t<T> to_numpy(const Array<T>& a) {
  py::array_t<T> r = empty_array<T>(a.shape);
  if (a.size()) std::memcpy(r.mutable_data(), a.data.data(), sizeof(T) * a.data.size());
  return r;
}

}  // namespace ladder::python
