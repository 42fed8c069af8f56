// python/src/module.cpp -- ladder._ladder, the compiled half of the `ladder` Python package.
//
// What it binds: the one registry (every rung's stage, id, backend, doc, cost), the per-stage rung
// calls on numpy arrays (rungs_*.cpp), and the golden-case writer. The Python half
// (python/ladder/__init__.py) gives them their public names and turns case.json into dicts.
// ladder::Error (a violated constraint, named by the C++ code) is raised as ValueError.
#include <pybind11/stl.h>

#include <filesystem>

#include "arrays.hpp"
#include "contract_py.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/registry.hpp"
#include "rungs.hpp"

namespace py = pybind11;
using namespace ladder;
using namespace ladder::python;

// The rung, or ValueError naming the argument and the ids that exist (declared in rungs.hpp).
const Rung& ladder::python::lookup(const std::string& stage, const std::string& backend, const std::string& id) {
  const auto rungs = registry().stage(stage, backend);
  for (const Rung* r : rungs)
    if (r->id == id) return *r;
  if (registry().stage(stage).empty()) {
    std::string known;
    for (const auto& s : registry().stages()) known += (known.empty() ? "" : ", ") + s;
    throw py::value_error("stage: '" + stage + "' is not a registered stage (" + known + ")");
  }
  if (backend != "ref" && backend != "cuda")
    throw py::value_error("backend: '" + backend + "' violates backend in {'ref', 'cuda'}");
  std::string ids;
  for (const Rung* r : rungs) ids += (ids.empty() ? "" : ", ") + r->id;
  throw py::value_error("rung: '" + id + "' is not a " + backend + " rung of " + stage + " (" + ids + ")");
}

namespace {

py::list list_rungs() {
  py::list out;
  for (const Rung& r : registry().all()) {
    py::dict d;
    d["stage"] = r.stage;
    d["id"] = r.id;
    d["backend"] = r.backend;
    d["name"] = r.name;
    d["doc"] = r.doc;
    d["cost_doc"] = r.cost_doc;
    out.append(d);
  }
  return out;
}

py::dict cost(const std::string& stage, const std::string& backend, const std::string& id, const Shape& shape) {
  const Cost c = lookup(stage, backend, id).cost(shape);
  py::dict d;
  d["flops"] = c.flops;
  d["bytes_read"] = c.bytes_read;
  d["bytes_written"] = c.bytes_written;
  d["extra_bytes"] = c.extra_bytes;
  return d;
}

std::vector<std::string> golden_cases(const std::string& stage) {
  for (const auto& g : golden_stages())
    if (g.stage == stage) return g.case_names();
  std::string known;
  for (const auto& g : golden_stages()) known += (known.empty() ? "" : ", ") + g.stage;
  throw py::value_error("stage: '" + stage + "' has no golden cases (stages with goldens: " + known + ")");
}

// Writes case `name` of `stage` whole (full = true) into `dir`.
void golden_write(const std::string& stage, const std::string& name, const std::string& dir) {
  const auto names = golden_cases(stage);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw py::value_error("case: '" + name + "' is not a case of " + stage + " (" + known + ")");
  }
  py::gil_scoped_release nogil;
  golden_stage(stage).write_case(name, std::filesystem::path(dir), true);
}

}  // namespace

PYBIND11_MODULE(_ladder, m) {
  m.doc() = "ladder: reference rungs, fp64 oracle and tolerance rule for LLM-inference kernels (compiled part)";
  m.attr("version") = kVersion;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("rungs", &list_rungs, "every registered rung: dicts {stage, id, backend, name, doc, cost_doc}");
  m.def("stages", [] { return registry().stages(); }, "the registered stages, in ladder order");
  m.def("cost", &cost, py::arg("stage"), py::arg("backend"), py::arg("id"), py::arg("shape"),
        "the rung's Cost for the shape its stage documents");

  m.def(
      "attention_backward",
      [](const std::string& backend, const std::string& id, py::handle q, py::handle k, py::handle v, py::handle o,
         py::handle dout, py::handle L, bool causal, py::object scale) {
        return attention_backward_rung(lookup("02-attention", backend, id), q, k, v, o, dout, L, causal, scale);
      },
      py::arg("backend"), py::arg("id"), py::arg("Q"), py::arg("K"), py::arg("V"), py::arg("O"), py::arg("dO"),
      py::arg("L"), py::arg("causal"), py::arg("scale"));
  m.def(
      "step_time",
      [](const std::string& id, const std::string& phase, py::handle lengths, const std::string& params_json) {
        return disagg_step_time(lookup("06-disagg", "ref", id), phase, lengths, params_json);
      },
      py::arg("id"), py::arg("phase"), py::arg("lengths"), py::arg("params_json"));
  m.def(
      "goodput",
      [](const std::string& config_json, const std::string& base_dir) {
        return disagg_goodput(lookup("06-disagg", "ref", "goodput"), config_json, base_dir);
      },
      py::arg("config_json"), py::arg("base_dir"));

  bind_contracts(m);
  m.def("golden_cases", &golden_cases, py::arg("stage"), "the names of a stage's golden cases");
  m.def("golden_write", &golden_write, py::arg("stage"), py::arg("case"), py::arg("dir"),
        "writes a golden case whole (inputs, fp64 outputs, case.json) into dir");
}
