// python/src/rungs.hpp -- the per-stage calls of registry rungs on numpy arrays (python/src/rungs_*.cpp).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "ladder/core/registry.hpp"

namespace ladder::python {

namespace py = pybind11;

// The registered rung (stage, backend, id), or ValueError naming the argument and what exists.
const Rung& lookup(const std::string& stage, const std::string& backend, const std::string& id);

py::dict attention_backward_rung(const Rung& r, py::handle q, py::handle k, py::handle v, py::handle o,
                                 py::handle dout, py::handle L, bool causal, py::object scale);
// 06-disagg: a step model's time (ms) for one batch given its request lengths (prefill: new tokens;
// decode: contexts), params as JSON; and the goodput rung on a `ladder simulate` config (JSON text,
// relative paths against base_dir) -> one dict per placement.
double disagg_step_time(const Rung& r, const std::string& phase, py::handle lengths, const std::string& params_json);
py::list disagg_goodput(const Rung& r, const std::string& config_json, const std::string& base_dir);

}  // namespace ladder::python
