// python/src/rungs.hpp -- the per-stage calls of registry rungs on numpy arrays (python/src/rungs_*.cpp).
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "ladder/core/registry.hpp"

namespace ladder::python {

namespace py = pybind11;

// The registered rung (stage, backend, id), or ValueError naming the argument and what exists.
const Rung& lookup(const std::string& stage, const std::string& backend, const std::string& id);

py::array softmax_rung(const Rung& r, py::handle x);
py::dict attention_forward_rung(const Rung& r, py::handle q, py::handle k, py::handle v, bool causal,
                                py::object scale);
py::dict attention_backward_rung(const Rung& r, py::handle q, py::handle k, py::handle v, py::handle o,
                                 py::handle dout, py::handle L, bool causal, py::object scale);
py::dict eplb_rung(const Rung& r, py::handle weight, int64_t num_replicas, int64_t num_groups, int64_t num_nodes,
                   int64_t num_gpus, int64_t num_packs);

}  // namespace ladder::python
