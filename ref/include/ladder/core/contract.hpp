// ladder/core/contract.hpp -- one case contract per stage: what goes in, what comes out, how it is judged.
//
// The contract is declared once, in the stage's folder (ref/src/NN-name/contract.cpp), and is
// the only thing `ladder golden`, `ladder check`, `ladder oracle`, `ladder describe` and the Python
// module read: the CLI has no per-stage branches. A stage declares
//   * its inputs and outputs: name, dtype, symbolic shape, one line of meaning;
//   * for each output, the rule that judges a candidate (core/compare.hpp) and WHY that rule fits:
//       Rule::max_abs      one scale per tensor (O, gradients): max|c - o| <= k max|b - o| + floor;
//       Rule::elementwise  scale varies element to element (probabilities): each element at its own
//                          scale, plus the structural facts of a probability row (OutputSpec::probability);
//       Rule::exact        integer outputs (maps, routing), and float outputs of a deterministic
//                          computation (a simulator's times): equality in the oracle's dtype;
//       Rule::bound        outputs of a declared low-precision recipe (07's quantised GEMMs): each
//                          element within a bound DERIVED from the recipe (OutputSpec::bound), no baseline;
//   * the fp64 oracle (inputs, params) -> outputs, and the float32 baseline rung (inputs, params, F4)
//     -> float outputs, which sets the tolerance (k x its error) of a float32 candidate;
//   * fp64_bound: the allowance a float64 candidate is judged by, per element, derived from unit
//     roundoffs and the magnitudes of each output's terms (core/fp64_bound.hpp), no baseline;
//   * optional extra rules a user may ask for by name (a placement's "valid").
//
// How a stage declares its contract (the whole of it for a one-input, one-output stage):
//
//   Contract name_contract() {               // ref/src/NN-name/contract.cpp
//     Contract c;
//     c.stage = "NN-name";
//     c.inputs = {{"x", "<f4", "[rows, cols]", "logits; -inf = masked"}};
//     c.outputs = {{"y", "<f8", "[rows, cols]", "softmax of each row", Rule::elementwise, 2, "why ...", true, "x"}};
//     c.oracle = [](const Tensors& in, const nlohmann::json&) { ... return Tensors{{"y", to_npy(y)}}; };
//     c.baseline = [](const Tensors& in, const nlohmann::json&, DType prec) { ... };
//     return c;
//   }
// and points its Stage record at it (ref/src/NN-name/stage.cpp; chapters/adding-a-stage.md).
//
// Values travel as NpyData {dtype, shape, little-endian bytes}: exactly what a .npy file or a numpy
// array holds, so files and Python share one path. Every entry point validates its arguments against
// the contract and throws ladder::Error naming the tensor, the value and the constraint.
#pragma once
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ladder/core/compare.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder {

struct Rung;  // core/registry.hpp

enum class Rule { max_abs, elementwise, exact, bound };
const char* rule_name(Rule r);

using Tensors = std::map<std::string, NpyData>;

struct TensorSpec {
  std::string name;
  std::string dtype;  // "<f4", "<f8", "<i4", "<i8"; "<i4|<i8" accepts either
  std::string shape;  // symbolic, e.g. "[rows, cols]"
  std::string doc;
  // May be absent: no output needs it, or the stage gives its absence a meaning (its doc says which).
  // check_inputs skips it; the stage's reader names it, and what needs it, where it is needed.
  bool optional = false;
  // A zero-size array is a value, not a mistake (MoE's s1 [D, 0]: no shared expert); Python passes it on.
  bool may_be_empty = false;
  // A float input that run_rung at float64 also takes as <f8, unrounded: a float64 caller's own data (Python's
  // ladder.softmax(x64)). The oracle and check read the <f4 the spec names; a <f8 input run at float32 is refused.
  bool f64_at_run = false;
};

struct OutputSpec {
  std::string name;
  std::string dtype;  // of the expected (oracle) file; a float candidate may be <f4 or <f8
  std::string shape;
  std::string doc;
  Rule rule = Rule::max_abs;
  double k = 2;         // 2 forward, 3 backward (the tolerance rule, compare.hpp)
  std::string why;      // why this rule fits this output
  bool probability = false;  // structural facts: >= 0, rows sum to the oracle's row sum
  std::string masked_by;     // input whose -inf positions must give exactly 0 (empty: none)
  double floor_ulps = 4;     // the rule's floor, in ULPs of the candidate's dtype at the output's scale
  // Rule::max_abs per independent slice: the leading slice_axes axes of the shape index independent
  // computations (attention: B, H; MLA: B; MoE: T), each judged at its own scale (core/compare.hpp).
  int slice_axes = 0;
  // Outputs with the same non-empty judged_with are judged as one tensor: per slice, the group's scale
  // and baseline error (core/compare.hpp, Tolerance::group_scale), e.g. attention's dQ, dK, dV.
  std::string judged_with = {};
  // A device candidate's (check(..., device = true)) extra allowance, relative, from the device math
  // library's documented error where it reaches this output more than the k x baseline covers (01's y:
  // CUDA's 2-ulp expf, core/device_math.hpp); 0: none derived.
  double device_rel = 0;
  // An input this output exists only with (attention's gradients need dO): a case without that input
  // has no such expected output, and asking for it is an error naming the input.
  std::string needs_input = {};
  // Rule::bound: the per-element bound on |candidate - oracle| of this case (the oracle's shape), derived
  // from the recipe its params declare; the stage states the derivation where it computes it.
  std::function<Array<double>(const Tensors& inputs, const nlohmann::json& params, const Tensors& expected)> bound =
      {};
};

struct ParamSpec {
  std::string name, type, doc;
};

// The result of one check, as plain data (the CLI prints `text`, Python returns it as a dict).
struct CheckReport {
  bool pass = false;
  std::string output, rule;
  std::vector<std::string> failed;         // each rule that failed, one line each
  std::map<std::string, double> metrics;   // max_abs_err, max_rel_err, nmse, cos_diff, pct_within, tol ...
  std::string text;                        // the full readable report
};

struct Contract {
  std::string stage, doc;
  std::vector<TensorSpec> inputs;
  std::vector<ParamSpec> params;
  std::vector<OutputSpec> outputs;
  std::string oracle_doc, baseline_doc;
  std::function<Tensors(const Tensors& inputs, const nlohmann::json& params)> oracle;
  std::function<Tensors(const Tensors& inputs, const nlohmann::json& params, DType precision)> baseline;
  // Runs one registered rung of the stage on the case's inputs at `precision` (F4: the rung's float32
  // function, F8: its float64 one), returning outputs named as above (those the rung computes). Every
  // stage sets it (tests/test_stages.cpp): `ladder run` and Python's ladder.run call every rung this way.
  std::function<Tensors(const Rung& rung, const Tensors& inputs, const nlohmann::json& params, DType precision)>
      run_rung;
  // Extra rules by name, for outputs where equality with the oracle is not the only right answer.
  std::map<std::string, std::function<CheckReport(const Tensors& inputs, const nlohmann::json& params,
                                                  const Tensors& expected, const std::string& output,
                                                  const NpyData& candidate, const Tensors& companions)>>
      extra_rules;
  std::string extra_rules_doc;
  // Optional facts every right answer obeys, run by check() beside the output's own rule (not by the extra
  // rules, which judge such facts themselves): one line per violation, starting with the fact's name
  // ("every_expert_placed: ..."); a candidate that breaks one fails even where its rule alone could not
  // say why (05-eplb: a placement's invariants, eplb/check.hpp). Empty: none.
  std::function<std::vector<std::string>(const Tensors& inputs, const nlohmann::json& params, const std::string& output,
                                         const NpyData& candidate, const Tensors& companions)>
      invariants;
  // Optional metrics of another project reported beside the verdict (never part of it): name -> value for
  // output `output`, expected and candidate as float64 (03-mla/flashmla: FlashMLA's cos_diff). Empty: none.
  std::function<std::map<std::string, double>(const std::string& output, const Array<double>& expected,
                                              const Array<double>& candidate)>
      report_metrics;
  // Optional elements of `output` a layout leaves unspecified (04-moe/deepgemm_masked: rows past masked_m): true =
  // not judged. check() gives them the oracle's value before any rule runs and its report counts them. Empty: none.
  std::function<std::vector<bool>(const Tensors& inputs, const nlohmann::json& params, const std::string& output)>
      unjudged;
  // Optional: a candidate's rows put into the oracle's order where a layout leaves their order unspecified
  // (04-moe/deepep_*: the tokens a rank or an expert received), before any rule runs. Returns the candidate
  // rearranged, the elements the layout leaves unspecified given the oracle's value (nullopt: `output` is not such
  // an output). It may read the candidate's other outputs (companions: the received rows' source ids) and throws
  // Error naming one it needs and lacks. Empty: none.
  std::function<std::optional<NpyData>(const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                                       const std::string& output, const NpyData& candidate, const Tensors& companions)>
      canonical;

  const OutputSpec& output(const std::string& name) const;  // throws Error naming the known outputs
  // The tolerance rule's parameters for output `name` and a candidate of dtype `candidate` (<f4 or
  // <f8), from the output's spec: the one source that check(), the tests, the lab judge and the CLI
  // use. A float64 candidate gets eps = 2^-52 and k + 1 (fp64_baseline's; a derived bound, fp64_bound, uses neither).
  Tolerance tolerance(const std::string& name, DType candidate) const;
  // A float64 candidate's allowance (core/fp64_bound.hpp): for every float output the tolerance rule
  // judges, an <f8 array of the output's shape, element i = E_oracle,i + E_cand,i, the bounds on the
  // oracle's and a float64 candidate's errors against the exact result (|cand - oracle| <= their sum).
  // Every stage with such outputs declares it (tests/test_fp64_bound.cpp); its derivation is in the
  // stage's fp64_bound.cpp.
  std::function<Tensors(const Tensors& inputs, const nlohmann::json& params, const Tensors& expected)> fp64_bound;
};

// The old heuristic, for a stage that declares no fp64_bound yet (check() falls back to it and its report
// says so) and for stage tests that compare two float64 rungs of their own: the float32 baseline's error
// scaled to double precision (x eps64 / eps32 = 2^-29) element by element where both are finite, judged
// with k + 1. Not derived: on a 2^20-wide softmax row it failed correct float64 rungs (issue 38).
Array<double> fp64_baseline(const Array<double>& oracle, Array<double> baseline32);

// Every stage's contract, in ladder order (from the Stage records, core/stage.hpp).
const std::vector<Contract>& contracts();
// Throws "no stage 'x' (did you mean 'y'? stages: ...)". "STAGE/LAYOUT" names a layout contract of the stage
// (Stage::layouts), e.g. "03-mla/flashmla".
const Contract& contract(const std::string& stage);
// A layout contract "STAGE/LAYOUT" (Stage::layouts; contract() sends such names here); Error naming the
// stage's layouts otherwise.
const Contract& layout_contract(const std::string& id);
// Adds the contract's report_metrics for `output` to r (metrics, one line of text each); check() calls it.
// 1 - 2 sum(x y) / sum(x x + y y) in float64, the denominator at least 1e-12: FlashMLA's cal_diff and DeepGEMM's
// calc_diff (their tests' metric), which layouts report beside the verdict. Sizes must agree.
double layout_cos_diff(const Array<double>& x, const Array<double>& y);
// not_judged > 0: also the count of the layout's unjudged elements (metric "not_judged", one line of text).
void add_report_metrics(const Contract& c, const Tensors& expected, const std::string& output, const NpyData& candidate,
                        CheckReport& r, int64_t not_judged = 0);
// The candidate as check() judges it: the contract's unjudged elements (Contract::unjudged) set to the oracle's value
// (float candidates of the oracle's shape; any other is returned as it is), and how many there were.
std::pair<NpyData, int64_t> judged_candidate(const Contract& c, const Tensors& inputs, const nlohmann::json& params,
                                             const Tensors& expected, const std::string& output,
                                             const NpyData& candidate);

// Inputs checked against the contract (names, dtypes, ranks), then the oracle.
Tensors run_oracle(const Contract& c, const Tensors& inputs, const nlohmann::json& params);
// Inputs checked as for run_oracle, then the stage's run_rung (Error naming the stage if it has none,
// or if `rung` belongs to another stage).
Tensors run_rung(const Contract& c, const Rung& rung, const Tensors& inputs, const nlohmann::json& params,
                 DType precision);
// Judges `candidate` as output `output` (empty: the first output) by the contract's rule, or by the
// named extra rule. Bad candidates (wrong dtype or shape) throw Error; a wrong answer is pass = false.
// `companions`: the candidate's other outputs, where an extra rule judges them together (a placement's rule "valid").
// ftz: judge with flush-to-zero (Tolerance::ftz: a subnormal oracle value matched by 0 counts as equal);
// unset: on for a device candidate, off otherwise.
// device: the candidate came from a GPU: the output's device_rel (the device math library's documented
// error) is allowed, and FTZ is on unless ftz says false (GPUs flush subnormals in fast-math); the report
// says both.
CheckReport check(const Contract& c, const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                  std::string output, const NpyData& candidate, const std::string& rule = "",
                  const Tensors& companions = {}, std::optional<bool> ftz = std::nullopt, bool device = false);
// `ladder describe`: the contract as text.
std::string describe(const Contract& c);

// Case folders: case.json {stage, params, inputs, outputs, files, digest{file: sha256}} + one .npy per tensor.
struct CaseFolder {
  nlohmann::json manifest;
  Tensors inputs, expected;
  nlohmann::json params;
  std::string note;  // e.g. "no digest: expected outputs recomputed by the oracle"
};
// Reads and verifies a case folder: every file listed in the digest must match (Error naming the file
// otherwise); without a digest the expected outputs are recomputed from the inputs by the oracle.
CaseFolder read_case(const Contract& c, const std::filesystem::path& dir);
// Writes inputs, outputs and case.json (with params, the contract's rules and the digest).
void write_case(const Contract& c, const std::filesystem::path& dir, const Tensors& inputs,
                const nlohmann::json& params, const Tensors& outputs, nlohmann::json extra = nlohmann::json::object());
// The contract's rules for the outputs `names` (a JSON array of names or an object keyed by them; null: every
// output), as case.json's "tolerance" records them: written from the contract, never typed twice, and never
// read back (check() takes the rule from the contract).
nlohmann::json rules_json(const Contract& c, const nlohmann::json& names = nullptr);
// Adds "digest" (sha256 of every file case.json lists under "files") to an existing case.json.
void seal_case(const std::filesystem::path& dir);
std::string sha256_hex(const std::string& bytes);

// NpyData <-> Array helpers.
template <class T>
NpyData to_npy(const Array<T>& a) {
  NpyData d{dtype_of<T>(), a.shape, std::vector<unsigned char>(a.data.size() * sizeof(T))};
  if (!a.data.empty()) std::memcpy(d.bytes.data(), a.data.data(), d.bytes.size());
  return d;
}
// Exact dtype; `what` names the tensor in the error.
template <class T>
Array<T> from_npy(const NpyData& d, const std::string& what) {
  require(d.dtype == dtype_of<T>(), "{}: dtype {} where {} is required", what, dtype_name(d.dtype),
          dtype_name(dtype_of<T>()));
  Array<T> a(d.shape);
  if (!a.data.empty()) std::memcpy(a.data.data(), d.bytes.data(), a.data.size() * sizeof(T));
  return a;
}
// Any dtype converted to double (integers exactly below 2^53).
Array<double> npy_as_double(const NpyData& d);
// <i4 or <i8 converted to int64; `what` names the tensor.
Array<int64_t> npy_as_int64(const NpyData& d, const std::string& what);
const NpyData& tensor(const Tensors& t, const std::string& name, const std::string& what);

}  // namespace ladder
