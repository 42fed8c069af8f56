// python/src/contract_py.cpp -- the case contracts (ladder/core/contract.hpp) on numpy arrays.
//
// oracle, check, describe and case folders go through the same C++ entry points as `ladder oracle`,
// `ladder check` and `ladder describe`: the inputs are validated against the stage's contract there
// (names, dtypes, ranks, NaN where forbidden; ladder::Error -> ValueError). Here only the conversion
// is checked: a numpy array of a dtype .npy files carry (float32/64, int32/64), C-contiguous, non-empty
// (an input the contract marks may_be_empty may have a zero-size dimension).
// Arrays cross as NpyData (the bytes a .npy file holds): one copy in, one copy out.
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "contract_py.hpp"
#include "rungs.hpp"
#include "ladder/core/contract.hpp"

namespace ladder::python {

namespace {

DType npy_dtype(const py::array& a, const std::string& name) {
  if (a.dtype().is(py::dtype::of<float>())) return DType::F4;
  if (a.dtype().is(py::dtype::of<double>())) return DType::F8;
  if (a.dtype().is(py::dtype::of<int32_t>())) return DType::I4;
  if (a.dtype().is(py::dtype::of<int64_t>())) return DType::I8;
  if (a.dtype().is(py::dtype::of<uint8_t>())) return DType::U1;  // FlashMLA's FP8 cache records
  throw py::type_error(name + ": dtype " + dtype_text(a) + "; float32, float64, int32, int64 or uint8 required");
}

// may_be_empty: an input whose zero-size array is a value (TensorSpec::may_be_empty, e.g. MoE's s1 [D, 0]).
NpyData to_npy_data(py::handle obj, const std::string& name, bool may_be_empty = false) {
  const py::array a = as_array(obj, name);
  const DType dt = npy_dtype(a, name);
  if (may_be_empty && a.ndim() >= 1 && a.size() == 0 && (a.flags() & py::array::c_style))
    return NpyData{dt, Shape(a.shape(), a.shape() + a.ndim()), {}};
  const Arg arg = checked(a, name, -1, "see ladder.describe(stage)");
  NpyData d{dt, arg.shape, std::vector<unsigned char>(static_cast<size_t>(a.nbytes()))};
  std::memcpy(d.bytes.data(), a.data(), d.bytes.size());
  return d;
}

py::array to_numpy_data(const NpyData& d) {
  py::dtype dt = d.dtype == DType::F4   ? py::dtype::of<float>()
                 : d.dtype == DType::F8 ? py::dtype::of<double>()
                 : d.dtype == DType::I4 ? py::dtype::of<int32_t>()
                 : d.dtype == DType::U1 ? py::dtype::of<uint8_t>()
                                        : py::dtype::of<int64_t>();
  std::vector<py::ssize_t> shape(d.shape.begin(), d.shape.end());
  py::array a(dt, shape);
  if (!d.bytes.empty()) std::memcpy(a.mutable_data(), d.bytes.data(), d.bytes.size());
  return a;
}

// contract: the inputs' contract (its TensorSpec::may_be_empty), or null for outputs.
Tensors to_tensors(const py::dict& arrays, const std::string& what, const Contract* contract = nullptr) {
  Tensors t;
  for (auto [k, v] : arrays) {
    const std::string name = py::str(k).cast<std::string>();
    bool may_be_empty = false;
    if (contract)
      for (const TensorSpec& s : contract->inputs) may_be_empty = may_be_empty || (s.name == name && s.may_be_empty);
    t[name] = to_npy_data(v, what.empty() ? name : what + "['" + name + "']", may_be_empty);
  }
  return t;
}

py::dict to_dict(const Tensors& t) {
  py::dict d;
  for (const auto& [name, data] : t) d[py::str(name)] = to_numpy_data(data);
  return d;
}

nlohmann::json parse_params(const std::string& params_json) {
  const nlohmann::json p = nlohmann::json::parse(params_json, nullptr, false);
  if (p.is_discarded() || !p.is_object()) throw py::value_error("params: not a JSON object: " + params_json);
  return p;
}

py::dict describe_dict(const std::string& stage) {
  const Contract& c = contract(stage);
  py::dict d;
  d["stage"] = c.stage;
  d["doc"] = c.doc;
  py::list inputs, params, outputs;
  for (const TensorSpec& s : c.inputs)
    inputs.append(py::dict(py::arg("name") = s.name, py::arg("dtype") = s.dtype, py::arg("shape") = s.shape,
                           py::arg("doc") = s.doc, py::arg("optional") = s.optional,
                           py::arg("may_be_empty") = s.may_be_empty));
  for (const ParamSpec& p : c.params)
    params.append(py::dict(py::arg("name") = p.name, py::arg("type") = p.type, py::arg("doc") = p.doc));
  for (const OutputSpec& o : c.outputs)
    outputs.append(py::dict(py::arg("name") = o.name, py::arg("dtype") = o.dtype, py::arg("shape") = o.shape,
                            py::arg("doc") = o.doc, py::arg("rule") = std::string(rule_name(o.rule)),
                            py::arg("k") = o.k, py::arg("why") = o.why, py::arg("probability") = o.probability,
                            py::arg("masked_by") = o.masked_by, py::arg("floor_ulps") = o.floor_ulps,
                            py::arg("slice_axes") = o.slice_axes, py::arg("judged_with") = o.judged_with,
                            py::arg("device_rel") = o.device_rel));
  d["inputs"] = inputs;
  d["params"] = params;
  d["outputs"] = outputs;
  d["oracle_doc"] = c.oracle_doc;
  d["baseline_doc"] = c.baseline_doc;
  py::list rules;
  for (const auto& [name, fn] : c.extra_rules) rules.append(name);
  d["extra_rules"] = rules;
  d["extra_rules_doc"] = c.extra_rules_doc;
  d["text"] = describe(c);
  return d;
}

py::dict report_dict(const CheckReport& r) {
  py::dict d;
  d["pass"] = r.pass;
  d["output"] = r.output;
  d["rule"] = r.rule;
  d["failed"] = r.failed;
  d["metrics"] = r.metrics;
  d["text"] = r.text;
  return d;
}

}  // namespace

void bind_contracts(py::module_& m) {
  m.def("contract_stages", [] {
    std::vector<std::string> s;
    for (const Contract& c : contracts()) s.push_back(c.stage);
    return s;
  });
  m.def("describe", &describe_dict, py::arg("stage"));
  m.def(
      "oracle",
      [](const std::string& stage, const py::dict& inputs, const std::string& params_json) {
        const Contract& c = contract(stage);
        const Tensors in = to_tensors(inputs, "", &c);
        const nlohmann::json params = parse_params(params_json);
        Tensors out;
        {
          py::gil_scoped_release nogil;
          out = run_oracle(c, in, params);
        }
        return to_dict(out);
      },
      py::arg("stage"), py::arg("inputs"), py::arg("params_json"));
  m.def(
      "check",
      [](const std::string& stage, const py::dict& inputs, const std::string& params_json, const py::dict& expected,
         const std::string& output, py::handle candidate, const std::string& rule, py::object ftz,
         const py::dict& companions, bool device) {
        const Contract& c = contract(stage);
        const Tensors in = to_tensors(inputs, "", &c), exp = to_tensors(expected, "expected");
        const NpyData cand = to_npy_data(candidate, "candidate");
        const Tensors others = to_tensors(companions, "companions");
        const nlohmann::json params = parse_params(params_json);
        const std::optional<bool> ftz_opt = ftz.is_none() ? std::nullopt : std::optional<bool>(ftz.cast<bool>());
        CheckReport r;
        {
          py::gil_scoped_release nogil;
          r = check(c, in, params, exp, output, cand, rule, others, ftz_opt, device);
        }
        return report_dict(r);
      },
      py::arg("stage"), py::arg("inputs"), py::arg("params_json"), py::arg("expected"), py::arg("output"),
      py::arg("candidate"), py::arg("rule"), py::arg("ftz") = py::none(), py::arg("companions") = py::dict(),
      py::arg("device") = false);
  m.def(
      "run",
      [](const std::string& stage, const std::string& backend, const std::string& id, const py::dict& inputs,
         const std::string& params_json, const std::string& precision) {
        const Contract& c = contract(stage);
        // The one check of the precision's spelling (Python passes it through; run_rung checks the DType).
        if (precision != "float32" && precision != "float64")
          throw py::value_error("precision: '" + precision + "' violates precision in {'float32', 'float64'}");
        const Rung& r = lookup(stage, backend, id);
        const Tensors in = to_tensors(inputs, "", &c);
        const nlohmann::json params = parse_params(params_json);
        Tensors out;
        {
          py::gil_scoped_release nogil;
          out = run_rung(c, r, in, params, precision == "float32" ? DType::F4 : DType::F8);
        }
        return to_dict(out);
      },
      py::arg("stage"), py::arg("backend"), py::arg("id"), py::arg("inputs"), py::arg("params_json"),
      py::arg("precision"));
  m.def(
      "read_case",
      [](const std::string& stage, const std::string& dir) {
        CaseFolder f;
        {
          py::gil_scoped_release nogil;
          f = read_case(contract(stage), dir);
        }
        py::dict d;
        d["manifest_json"] = f.manifest.dump();
        d["params_json"] = f.params.dump();
        d["inputs"] = to_dict(f.inputs);
        d["expected"] = to_dict(f.expected);
        d["note"] = f.note;
        return d;
      },
      py::arg("stage"), py::arg("dir"));
}

}  // namespace ladder::python
