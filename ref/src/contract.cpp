// ref/src/contract.cpp -- the stages' contracts and the generic oracle / check (core/contract.hpp).
#include "ladder/core/contract.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "ladder/core/compare.hpp"
#include "ladder/core/fixed_order.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/stage.hpp"

namespace ladder {

// The contracts are the stages' (ladder/core/stage.hpp), in ladder order.
const std::vector<Contract>& contracts() {
  static const std::vector<Contract> table = [] {
    std::vector<Contract> t;
    for (const Stage& s : stages()) {
      t.push_back(s.contract());
      // Every baseline, whoever asks for it (check, the tests, Python), in a FixedOrder scope: the float32
      // products, exps and marked reductions in an order fixed by the code, so the rule's verdict is the
      // same on every CPU (core/fixed_order.hpp).
      if (auto& f = t.back().baseline)
        f = [inner = std::move(f)](const Tensors& in, const nlohmann::json& params, DType prec) {
          const FixedOrder pinned;
          return inner(in, params, prec);
        };
    }
    return t;
  }();
  return table;
}

namespace {

bool dtype_allowed(const std::string& spec, DType d) { return spec.find(dtype_name(d)) != std::string::npos; }

}  // namespace

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::max_abs: return "max_abs";
    case Rule::elementwise: return "elementwise";
    case Rule::exact: return "exact";
    case Rule::bound: return "bound";
  }
  return "?";
}

const Contract& contract(const std::string& id) {
  if (id.find('/') != std::string::npos) return layout_contract(id);  // contract_layouts.cpp
  const Stage& s = stage(id);  // Error "no stage 'x' (did you mean 'y'? ...)"
  for (const Contract& c : contracts())
    if (c.stage == s.id) return c;
  throw Error(fmt::format("stage {}: its contract is declared for stage '{}'", s.id, s.contract().stage));
}

const OutputSpec& Contract::output(const std::string& name) const {
  std::vector<std::string> names;
  for (const OutputSpec& o : outputs) {
    if (o.name == name) return o;
    names.push_back(o.name);
  }
  throw Error(fmt::format("{}: '{}' is not an output (outputs: {})", stage, name, fmt::join(names, ", ")));
}

Tolerance Contract::tolerance(const std::string& name, DType candidate) const {
  const OutputSpec& spec = output(name);
  require(spec.rule != Rule::exact, "{}: output {} is compared exactly, not by the tolerance rule", stage, name);
  require(spec.rule != Rule::bound, "{}: output {} is judged by its derived bound, not by the tolerance rule", stage,
          name);
  require(candidate == DType::F4 || candidate == DType::F8,
          "{}: candidate dtype {} violates dtype in {{<f4, <f8}} for output {}", stage, dtype_name(candidate), name);
  const bool f64 = candidate == DType::F8;
  // k + 1 for a float64 candidate: the fp64_baseline heuristic's (a stage without fp64_bound; stage tests
  // comparing two float64 rungs); with a derived bound k is not used.
  Tolerance t{f64 ? spec.k + 1 : spec.k, spec.floor_ulps, f64 ? 0x1p-52 : 0x1p-23};
  t.slice_axes = spec.slice_axes;
  // The sliced axes' names from the symbolic shape ("[B, H, Nq, d]" -> "B, H").
  std::string names = spec.shape;
  names.erase(std::remove_if(names.begin(), names.end(), [](char ch) { return ch == '[' || ch == ']'; }), names.end());
  for (int a = 0, pos = 0; a < spec.slice_axes; ++a) {
    const size_t comma = names.find(',', static_cast<size_t>(pos));
    const std::string axis = names.substr(static_cast<size_t>(pos), comma == std::string::npos ? std::string::npos
                                                                                                : comma - static_cast<size_t>(pos));
    t.slice_names += (a ? ", " : "") + axis.substr(axis.find_first_not_of(' '));
    if (comma == std::string::npos) break;
    pos = static_cast<int>(comma) + 1;
  }
  return t;
}

const NpyData& tensor(const Tensors& t, const std::string& name, const std::string& what) {
  auto it = t.find(name);
  require(it != t.end(), "{}: tensor '{}' is missing", what, name);
  return it->second;
}

Array<double> npy_as_double(const NpyData& d) {
  Array<double> a(d.shape);
  for (int64_t i = 0; i < a.size(); ++i) {
    const unsigned char* b = d.bytes.data() + static_cast<size_t>(i) * dtype_size(d.dtype);
    switch (d.dtype) {
      case DType::F4: { float v; std::memcpy(&v, b, 4); a.data[i] = v; break; }
      case DType::F8: { std::memcpy(&a.data[i], b, 8); break; }
      case DType::I4: { int32_t v; std::memcpy(&v, b, 4); a.data[i] = v; break; }
      case DType::I8: { int64_t v; std::memcpy(&v, b, 8); a.data[i] = static_cast<double>(v); break; }
      case DType::U1: a.data[i] = *b; break;
    }
  }
  return a;
}

Array<int64_t> npy_as_int64(const NpyData& d, const std::string& what) {
  require(d.dtype == DType::I4 || d.dtype == DType::I8, "{}: dtype {} where an integer dtype (<i4 or <i8) is required",
          what, dtype_name(d.dtype));
  if (d.dtype == DType::I8) return from_npy<int64_t>(d, what);
  return from_npy<int32_t>(d, what).cast<int64_t>();
}

namespace {

// Every input the contract names is present with an allowed dtype; nothing else is given.
// run_at: the precision of a run_rung call (TensorSpec::f64_at_run); unset for the oracle.
void check_inputs(const Contract& c, const Tensors& inputs, const nlohmann::json& params, const char* what,
                  std::optional<DType> run_at = std::nullopt) {
  for (const TensorSpec& s : c.inputs) {
    if (s.optional && !inputs.count(s.name)) continue;  // the stage's reader says where it is needed
    const NpyData& d = tensor(inputs, s.name, c.stage + " " + what);
    if (s.f64_at_run && run_at && d.dtype == DType::F8) {
      require(*run_at == DType::F8, "{}: input {} has dtype <f8, violates <f4 at precision float32 (a float64 input "
              "runs at precision float64)", c.stage, s.name);
      continue;
    }
    require(dtype_allowed(s.dtype, d.dtype), "{}: input {} has dtype {} where {} is required", c.stage, s.name,
            dtype_name(d.dtype), s.dtype + (s.f64_at_run ? " (<f8 at precision float64)" : ""));
  }
  for (const auto& [name, d] : inputs) {
    const bool known = std::any_of(c.inputs.begin(), c.inputs.end(), [&](const TensorSpec& s) { return s.name == name; });
    require(known, "{}: '{}' is not an input (see `ladder describe {}`)", c.stage, name, c.stage);
  }
  require(params.is_object() || params.is_null(), "{}: params must be a JSON object, not {}", c.stage, params.dump());
}

}  // namespace

Tensors run_oracle(const Contract& c, const Tensors& inputs, const nlohmann::json& params) {
  check_inputs(c, inputs, params, "oracle");
  return c.oracle(inputs, params.is_null() ? nlohmann::json::object() : params);
}

Tensors run_rung(const Contract& c, const Rung& rung, const Tensors& inputs, const nlohmann::json& params,
                 DType precision) {
  require(static_cast<bool>(c.run_rung), "{}: the contract declares no run_rung", c.stage);
  require(rung.stage == c.stage, "{}: rung {} belongs to stage {}", c.stage, rung.key(), rung.stage);
  require(precision == DType::F4 || precision == DType::F8, "{}: precision {} violates precision in {{<f4, <f8}}",
          c.stage, dtype_name(precision));
  check_inputs(c, inputs, params, "run", precision);
  return c.run_rung(rung, inputs, params.is_null() ? nlohmann::json::object() : params, precision);
}

namespace {

// One line per other output whose expected shape equals the candidate's: a likely mix-up.
std::string looks_like(const Tensors& expected, const std::string& output, const Shape& cand) {
  for (const auto& [name, d] : expected)
    if (name != output && d.shape == cand) return fmt::format(" (it has the shape of output '{}': pass --output {})", name, name);
  return "";
}

// Tolerance::group_scale / group_berr for an output judged with others (OutputSpec::judged_with): per
// slice of the leading slice_axes axes, the largest max|oracle| and max|baseline - oracle| over the
// group's outputs present in the case.
void group_tolerance(const Contract& c, const OutputSpec& spec, const Tensors& expected, const Tensors& base, bool f64,
                     Tolerance& tol) {
  for (const OutputSpec& g : c.outputs) {
    if (g.judged_with != spec.judged_with || !expected.count(g.name) || !base.count(g.name)) continue;
    const Array<double> o = npy_as_double(expected.at(g.name));
    Array<double> b = npy_as_double(base.at(g.name));
    if (b.shape != o.shape) continue;
    if (f64) b = fp64_baseline(o, std::move(b));
    const int sa = std::min(spec.slice_axes, static_cast<int>(o.shape.size()));
    int64_t slices = 1;
    for (int d = 0; d < sa; ++d) slices *= o.shape[static_cast<size_t>(d)];
    if (slices <= 0 || o.size() % slices != 0) continue;
    // The judged output's slice count; a member with a multiple of it (or a divisor) maps slice s to s / r (or
    // to r of them): attention's GQA, where dQ has B H slices and dK, dV B H_kv, query head h reading kv head
    // h / (H / H_kv).
    const NpyData& own = expected.at(spec.name);
    int64_t want = 1;
    for (int d = 0; d < std::min(spec.slice_axes, static_cast<int>(own.shape.size())); ++d)
      want *= own.shape[static_cast<size_t>(d)];
    require(want > 0 && (slices % want == 0 || want % slices == 0),
            "{}: outputs judged together ({}) have {} and {} slices, violates one a multiple of the other", c.stage,
            spec.judged_with, want, slices);
    if (tol.group_scale.empty()) tol.group_scale.assign(static_cast<size_t>(want), 0.0), tol.group_berr = tol.group_scale;
    const int64_t per = o.size() / slices, down = std::max<int64_t>(1, slices / want), up = std::max<int64_t>(1, want / slices);
    for (int64_t i = 0; i < o.size(); ++i) {
      if (!std::isfinite(o.data[i])) continue;
      for (int64_t u = 0; u < up; ++u) {
        const size_t s = static_cast<size_t>(i / per / down * up + u);
        tol.group_scale[s] = std::max(tol.group_scale[s], std::abs(o.data[i]));
        if (std::isfinite(b.data[i])) tol.group_berr[s] = std::max(tol.group_berr[s], std::abs(b.data[i] - o.data[i]));
      }
    }
  }
}

// Rule::bound: |cand - oracle| <= bound element by element (a NaN or inf where the oracle is finite fails).
CheckReport check_bound(const Contract& c, const OutputSpec& spec, const Tensors& inputs, const nlohmann::json& params,
                        const Tensors& expected, const NpyData& exp, const NpyData& candidate, CheckReport r) {
  require(static_cast<bool>(spec.bound), "{}: output {} has rule bound but no bound function", c.stage, spec.name);
  const Array<double> o = npy_as_double(exp), cand = npy_as_double(candidate);
  const Array<double> b = spec.bound(inputs, params, expected);
  require(b.shape == o.shape, "{}: bound of output {} has shape {} where the oracle's is {}", c.stage, spec.name,
          shape_str(b.shape), shape_str(o.shape));
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0, max_err = 0;
  for (int64_t i = 0; i < o.size(); ++i) {
    const double err = std::abs(cand.data[i] - o.data[i]);
    const bool ok = err <= b.data[i];
    if (!ok) ++bad;
    const double ratio = ok ? (b.data[i] > 0 ? err / b.data[i] : 0) : (std::isnan(err) ? INFINITY : err / b.data[i]);
    if (worst < 0 || ratio > worst_ratio) worst_ratio = ratio, worst = i;
    if (!std::isnan(err)) max_err = std::max(max_err, err);
  }
  r.pass = bad == 0;
  const std::string at = worst >= 0 ? index_str(o.shape, worst) : "-";
  if (!r.pass)
    r.failed.push_back(fmt::format("{} of {} elements beyond the derived bound; worst at {}: |cand - oracle| = {:.3e} "
                                   "> bound {:.3e}", bad, o.size(), at, std::abs(cand.data[worst] - o.data[worst]),
                                   b.data[worst]));
  r.metrics = {{"max_abs_err", max_err}, {"mismatches", static_cast<double>(bad)}, {"worst_err_over_bound", worst_ratio}};
  r.text = (r.pass ? "PASS (bound rule)" : "FAIL (bound rule): " + r.failed.front()) +
           fmt::format("\n  max abs err {:.3e}; worst |cand - oracle| / bound = {:.3e} at {} (bound there {:.3e})\n",
                       max_err, worst_ratio, at, worst >= 0 ? b.data[worst] : 0.0);
  return r;
}

// check() without the contract's invariants.
CheckReport check_one(const Contract& c, const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                      std::string output, const NpyData& candidate, const std::string& rule,
                      const Tensors& companions, std::optional<bool> ftz, bool device) {
  if (output.empty()) output = c.outputs.front().name;
  const OutputSpec& spec = c.output(output);
  require(spec.needs_input.empty() || inputs.count(spec.needs_input) || expected.count(output),
          "{}: output {} needs input {}, which this case does not have (it checks only the outputs that do not)",
          c.stage, output, spec.needs_input);
  const NpyData& exp = tensor(expected, output, c.stage + " expected outputs");
  if (!rule.empty() && rule != rule_name(spec.rule)) {
    auto it = c.extra_rules.find(rule);
    std::vector<std::string> known{rule_name(spec.rule)};
    for (const auto& [k, v] : c.extra_rules) known.push_back(k);
    require(it != c.extra_rules.end(), "check: --rule '{}' is not a rule of {} output {} (rules: {})", rule, c.stage,
            output, fmt::join(known, ", "));
    return it->second(inputs, params, expected, output, candidate, companions);
  }
  // An exact float output (a simulator's times: a deterministic computation, no rounding
  // freedom) is judged value for value in the oracle's own dtype.
  const bool exact_float = spec.rule == Rule::exact && (exp.dtype == DType::F4 || exp.dtype == DType::F8);
  // (Rule::bound takes a float candidate, as the tolerance rule does.)
  if (exact_float)
    require(candidate.dtype == exp.dtype, "candidate: dtype {} where {} is required for output {} (rule exact)",
            dtype_name(candidate.dtype), dtype_name(exp.dtype), output);
  else if (spec.rule == Rule::exact)
    require(candidate.dtype == DType::I4 || candidate.dtype == DType::I8,
            "candidate: dtype {} where an integer dtype (<i4 or <i8) is required for output {}",
            dtype_name(candidate.dtype), output);
  else
    require(candidate.dtype == DType::F4 || candidate.dtype == DType::F8,
            "candidate: dtype {} where a float dtype (<f4 or <f8) is required for output {}",
            dtype_name(candidate.dtype), output);
  require(candidate.shape == exp.shape, "candidate: shape {} where output {} has shape {}{}", shape_str(candidate.shape),
          output, shape_str(exp.shape), looks_like(expected, output, candidate.shape));
  CheckReport r;
  r.output = output;
  r.rule = rule_name(spec.rule);
  if (spec.rule == Rule::bound) return check_bound(c, spec, inputs, params, expected, exp, candidate, std::move(r));
  if (spec.rule == Rule::exact) {
    const ExactReport e = exact_float ? compare_exact(npy_as_double(exp), npy_as_double(candidate))
                                      : compare_exact(npy_as_int64(exp, output + " (expected)"),
                                                      npy_as_int64(candidate, "candidate"));
    r.pass = e.pass;
    if (!e.pass) r.failed.push_back(e.failure);
    r.metrics["mismatches"] = static_cast<double>(e.mismatches);
    r.text = e.text();
    return r;
  }
  // A float32 candidate: k x the float32 baseline's error. A float64 candidate: its derived bound, the
  // oracle's error + its own (Contract::fp64_bound, core/fp64_bound.hpp); a stage without one: the old
  // heuristic (fp64_baseline), which the report names.
  const bool f64 = candidate.dtype == DType::F8, derived = f64 && static_cast<bool>(c.fp64_bound);
  const Array<double> o = npy_as_double(exp), cand = npy_as_double(candidate);
  Tolerance tol = c.tolerance(output, candidate.dtype);
  tol.ftz = ftz.value_or(device);
  if (device) tol.device_rel = spec.device_rel;
  Array<double> b = o;
  if (derived) {
    const Array<double> bound = npy_as_double(tensor(c.fp64_bound(inputs, params, expected), output,
                                                     c.stage + " fp64_bound"));
    require(bound.shape == o.shape, "{}: fp64_bound of output {} has shape {} where the oracle's is {}", c.stage,
            output, shape_str(bound.shape), shape_str(o.shape));
    tol.bound = bound.data;
  } else {
    require(static_cast<bool>(c.baseline), "{}: the contract has no baseline for float output {}", c.stage, output);
    const Tensors base = c.baseline(inputs, params, DType::F4);
    b = npy_as_double(tensor(base, output, c.stage + " baseline"));
    require(b.shape == o.shape, "{}: baseline of output {} has shape {} where the oracle's is {}", c.stage, output,
            shape_str(b.shape), shape_str(o.shape));
    if (f64) b = fp64_baseline(o, std::move(b));
    if (!spec.judged_with.empty()) group_tolerance(c, spec, expected, base, f64, tol);
  }
  CompareReport cr;
  if (spec.rule == Rule::elementwise) {
    const Array<double>* mask = nullptr;
    Array<double> m;
    if (!spec.masked_by.empty()) m = npy_as_double(tensor(inputs, spec.masked_by, c.stage)), mask = &m;
    cr = compare_elementwise(o, cand, b, tol, spec.probability, mask);
  } else {
    cr = compare(o, cand, b, tol);
  }
  r.pass = cr.pass;
  r.failed = cr.failures;
  r.metrics = {{"max_abs_err", cr.max_abs_err}, {"max_rel_err", cr.max_rel_err}, {"nmse", cr.nmse},
               {"cos_diff", cr.cos_diff},       {"pct_within", cr.pct_within},   {"baseline_err", cr.baseline_err},
               {"tol", cr.tol},                 {"floor", cr.floor}};
  r.text = cr.text();
  if (f64 && !derived) r.text += "\n  float64 candidate: the float32 baseline's error x 2^-29, k + 1 (no fp64_bound declared)";
  if (device)
    r.text += fmt::format("\n  device candidate: FTZ {}; device math allowance {}", tol.ftz ? "on" : "off (--no-ftz)",
                          spec.device_rel > 0 ? fmt::format("{:.3e} relative (core/device_math.hpp)", spec.device_rel)
                                              : std::string("none derived for this output"));
  return r;
}

}  // namespace

CheckReport check(const Contract& c, const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                  std::string output, const NpyData& candidate, const std::string& rule,
                  const Tensors& companions, std::optional<bool> ftz, bool device) {
  if (output.empty()) output = c.outputs.front().name;
  // Contract::canonical (rows matched by source), unjudged elements, other projects' metrics (contract_layouts.cpp).
  const std::optional<NpyData> ord = c.canonical ? c.canonical(inputs, params, expected, output, candidate, companions)
                                                 : std::nullopt;
  const auto [judged, skipped] = judged_candidate(c, inputs, params, expected, output, ord ? *ord : candidate);
  CheckReport r = check_one(c, inputs, params, expected, output, judged, rule, companions, ftz, device);
  add_report_metrics(c, expected, output, judged, r, skipped);
  if (ord) r.text += "\n  rows matched to the oracle's by their source (the layout leaves their order unspecified)";
  // The invariants go with the output's own rule; an extra rule judges such facts itself.
  if (!c.invariants || (!rule.empty() && rule != rule_name(c.output(output).rule))) return r;
  const std::vector<std::string> broken = c.invariants(inputs, params, output, candidate, companions);
  for (const std::string& b : broken) r.failed.push_back("invariant " + b);
  r.metrics["invariants_broken"] = static_cast<double>(broken.size());
  if (broken.empty()) return r;
  r.pass = false;
  std::string head = "FAIL (invariant): " + broken.front() + "\n";
  for (size_t i = 1; i < broken.size(); ++i) head += "  also invariant " + broken[i] + "\n";
  r.text = head + r.text;
  return r;
}

std::string describe(const Contract& c) {
  std::string s = fmt::format("{}: {}\n\ninputs (write each as NAME.npy in the --inputs folder):\n", c.stage, c.doc);
  for (const TensorSpec& t : c.inputs)
    s += fmt::format("  {:<12} {:<8} {:<28} {}{}\n", t.name, t.dtype, t.shape, t.doc,
                     t.f64_at_run ? " (`ladder run` / Python at float64 also take <f8)" : "");
  if (!c.params.empty()) {
    s += "params (case.json \"params\", or params.json in the --inputs folder):\n";
    for (const ParamSpec& p : c.params) s += fmt::format("  {:<12} {:<8} {}\n", p.name, p.type, p.doc);
  }
  s += "outputs (the oracle writes NAME.npy; `ladder check --output NAME` judges a candidate):\n";
  for (const OutputSpec& o : c.outputs) {
    s += fmt::format("  {:<12} {:<8} {:<28} {}\n", o.name, o.dtype, o.shape, o.doc);
    std::string how;
    if (o.rule != Rule::exact && o.rule != Rule::bound) {
      how = fmt::format(" (k = {}", o.k);
      if (o.slice_axes > 0) how += fmt::format("; per slice of {}", c.tolerance(o.name, DType::F4).slice_names);
      if (!o.judged_with.empty()) how += fmt::format("; judged with the {}", o.judged_with);
      if (o.device_rel > 0) how += fmt::format("; --device adds {:.3e} relative", o.device_rel);
      how += ")";
    }
    s += fmt::format("  {:<12} rule {}{}: {}\n", "", rule_name(o.rule), how, o.why);
  }
  s += fmt::format("oracle: {}\n", c.oracle_doc);
  if (!c.baseline_doc.empty()) s += fmt::format("baseline: {}\n", c.baseline_doc);
  if (c.fp64_bound) s += "a float64 candidate: within the oracle's error bound + its own, derived per element (no baseline; "
                         "core/fp64_bound.hpp)\n";
  if (!c.extra_rules_doc.empty()) s += fmt::format("other rules (--rule): {}\n", c.extra_rules_doc);
  return s;
}

}  // namespace ladder
