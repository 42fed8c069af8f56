// python/src/rungs_disagg.cpp -- stage 06 (disaggregation): the step-model and goodput rungs.
//
// The simulator rungs (colocated, disaggregated) take a request list and run through the case
// contract (ref/src/06-disagg/contract.cpp, run_rung). The other 06 rungs do not take a request list:
//   step models (distserve, roofline, table): one batch, described by its request lengths, -> ms;
//   goodput: a `ladder simulate` config (the same JSON, as text) -> the bisection's result per placement.
// Their parameters are the config's own keys, checked by the same C++ code as the CLI's (ladder::Error
// becomes ValueError naming the key).
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "arrays.hpp"
#include "ladder/06-disagg/disagg.hpp"
#include "ladder/06-disagg/presets.hpp"
#include "ladder/06-disagg/rungs.hpp"
#include "rungs.hpp"
#include "source_dir.hpp"

namespace ladder::python {

namespace {

using nlohmann::json;

// The folder that holds models/, gpus/ and disagg/: $LADDER_DATA, else the source tree's data/.
std::filesystem::path data_root() {
  if (const char* d = std::getenv("LADDER_DATA"); d && *d) return d;
  return ladder::source_dir() / "data";
}

// A named data file (data/<kind>/<name>.json) or a path to one.
std::filesystem::path data_file(const std::string& value, const char* kind, const char* key) {
  std::filesystem::path p(value);
  if (p.extension() != ".json") p = data_root() / kind / (value + ".json");
  if (!std::filesystem::exists(p))
    throw py::value_error(fmt::format("{}: '{}' violates a JSON file or a name in {} (no {})", key, value,
                                      (data_root() / kind).string(), p.string()));
  return p;
}

std::vector<int64_t> lengths_arg(py::handle obj, const char* name) {
  py::array a = as_array(obj, name);
  std::vector<int64_t> v;
  if (a.dtype().is(py::dtype::of<int64_t>())) {
    const Arg x = checked(a, name, 1, "[n]: one length per request of the batch");
    v.assign(x.ptr<int64_t>(), x.ptr<int64_t>() + x.size());
  } else if (a.dtype().is(py::dtype::of<int32_t>())) {
    const Arg x = checked(a, name, 1, "[n]: one length per request of the batch");
    v.assign(x.ptr<int32_t>(), x.ptr<int32_t>() + x.size());
  } else {
    throw py::type_error(std::string(name) + ": dtype " + dtype_text(a) + "; int32 or int64 required");
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 1 || v[i] > (int64_t{1} << 30))
      throw py::value_error(fmt::format("{}[{}] = {} violates 1 <= length <= 2^30", name, i, v[i]));
  return v;
}

std::array<double, 3> coefficients(const json& p, const char* key, const double* fallback) {
  std::array<double, 3> c{fallback[0], fallback[1], fallback[2]};
  if (!p.contains(key)) return c;
  const json& v = p.at(key);
  if (!v.is_array() || v.size() != 3 || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }))
    throw py::value_error(fmt::format("{} = {} violates [a, b, c] (three numbers, ms)", key, v.dump()));
  for (int i = 0; i < 3; ++i) c[static_cast<size_t>(i)] = v[static_cast<size_t>(i)].get<double>();
  return c;
}

void known_keys(const json& p, const std::string& rung, std::initializer_list<const char*> keys) {
  std::string list;
  for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
  for (const auto& [k, v] : p.items())
    if (std::none_of(keys.begin(), keys.end(), [&](const char* x) { return k == x; }))
      throw py::type_error(fmt::format("{}: not a parameter of the {} step model ({})", k, rung,
                                       list.empty() ? "it takes none" : list));
}

}  // namespace

double disagg_step_time(const Rung& r, const std::string& phase, py::handle lengths, const std::string& params_json) {
  if (phase != "prefill" && phase != "decode")
    throw py::value_error("phase: '" + phase + "' violates phase in {'prefill', 'decode'}");
  if (r.function.type() != typeid(disagg::StepModelFn))
    throw py::value_error("rung: '" + r.id + "' is not a step model of 06-disagg (distserve, roofline, table); "
                          "simulators run through ladder.run(..., arrival_ms=, input_len=, output_len=), "
                          "goodput through ladder.goodput(config)");
  const json p = json::parse(params_json);
  disagg::StepModelInputs in;
  if (r.id == "distserve") {
    known_keys(p, r.id, {"prefill", "decode"});
    const disagg::DistServeCoefficients d0 = disagg::distserve_opt13b_a100();
    const auto pre = coefficients(p, "prefill", d0.prefill), dec = coefficients(p, "decode", d0.decode);
    for (size_t i = 0; i < 3; ++i) in.distserve.prefill[i] = pre[i], in.distserve.decode[i] = dec[i];
  } else if (r.id == "roofline") {
    known_keys(p, r.id, {"model", "gpu", "gpus", "dtype"});
    const auto str = [&](const char* k, const char* fallback) {
      if (!p.contains(k)) return std::string(fallback);
      if (!p.at(k).is_string()) throw py::type_error(fmt::format("{}: {} violates type str", k, p.at(k).dump()));
      return p.at(k).get<std::string>();
    };
    in.model = disagg::load_model(data_file(str("model", "opt-13b"), "models", "model"));
    in.gpu = disagg::load_gpu(data_file(str("gpu", "a100-80gb"), "gpus", "gpu"), str("dtype", "bf16"));
    in.gpus = p.value("gpus", int64_t{1});
    if (in.gpus < 1) throw py::value_error(fmt::format("gpus = {} violates gpus >= 1", in.gpus));
  } else {
    known_keys(p, r.id, {"csv"});
    if (!p.contains("csv") || !p.at("csv").is_string())
      throw py::value_error("csv: the table step model needs csv=PATH (header phase,batch,tokens,ms)");
    in.table_csv = p.at("csv").get<std::string>();
    if (!std::filesystem::exists(in.table_csv))
      throw py::value_error("csv: '" + in.table_csv + "': no such file");
  }
  const std::vector<int64_t> l = lengths_arg(lengths, "lengths");
  disagg::BatchStats b;
  b.n = static_cast<int64_t>(l.size());
  for (int64_t x : l) {
    b.sum_tokens += static_cast<double>(x);
    b.sum_sq += static_cast<double>(x) * static_cast<double>(x);
  }
  const std::shared_ptr<const disagg::StepModel> m = r.fn<disagg::StepModelFn>()(in);
  return phase == "prefill" ? m->prefill_ms(b) : m->decode_ms(b);
}

py::list disagg_goodput(const Rung& r, const std::string& config_json, const std::string& base_dir) {
  const json j = json::parse(config_json);
  disagg::SimSetup s = disagg::parse_sim_config(j, "config", base_dir, data_root());
  py::list out;
  for (const disagg::Placement& pl : s.placements) {
    disagg::GoodputResult g;
    {
      py::gil_scoped_release nogil;
      g = r.fn<disagg::GoodputFn>()(s, pl);
    }
    py::dict d;
    d["placement"] = pl.name;
    d["gpus"] = pl.cluster.gpus();
    d["rate"] = g.rate;
    d["per_gpu"] = g.per_gpu;
    d["attainment"] = g.attainment;
    d["upper"] = g.upper;
    d["probes"] = g.probes;
    out.append(d);
  }
  return out;
}

}  // namespace ladder::python
