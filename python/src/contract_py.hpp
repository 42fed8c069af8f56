// python/src/contract_py.hpp -- binds the case contracts (python/src/contract_py.cpp).
#pragma once
#include <pybind11/pybind11.h>

namespace ladder::python {
void bind_contracts(pybind11::module_& m);
}  // namespace ladder::python
