// ref/src/02-attention/contract.cpp -- stage 02's case contract (core/contract.hpp), beside its registry.
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

#include <type_traits>

namespace ladder {

namespace attention {
// fp64_bound.cpp: a float64 candidate's allowance per element, and its derivation.
Tensors fp64_allowance(const Problem& p, const Array<double>& Q, const Array<double>& K, const Array<double>& V,
                       const Array<double>* dO);
}  // namespace attention

namespace {

using namespace attention;

// The naive rungs materialise S, P (and dS, dP) of B H Nq Nk elements: refuse what cannot fit.
constexpr double kMaxScratchBytes = 8.0 * (1ull << 30);

// Held in double: a <f4 input widened exactly, or (run_rung at float64, TensorSpec::f64_at_run) a <f8 input as
// given; each rung casts to its precision, so a float32 run sees exactly the case's float32 values.
struct In {
  Array<double> Q, K, V, dO;
  bool has_dO = false;  // without dO the case is forward-only: O, L, m
  Problem p;
};

int64_t int_param(const nlohmann::json& v, const char* what) {
  require(v.is_number_integer(), "02-attention: param {} = {} violates type integer", what, v.dump());
  return v.get<int64_t>();
}

In inputs(const Tensors& t, const nlohmann::json& params) {
  In in{npy_as_double(tensor(t, "Q", kStage)), npy_as_double(tensor(t, "K", kStage)),
        npy_as_double(tensor(t, "V", kStage)), {}, t.count("dO") > 0, {}};
  const nlohmann::json causal = params.value("causal", nlohmann::json(false));
  const nlohmann::json scale = params.value("scale", nlohmann::json(0.0));
  const nlohmann::json window = params.value("window_size", nlohmann::json::array({-1, -1}));
  require(causal.is_boolean(), "02-attention: param causal = {} violates type bool", causal.dump());
  require(scale.is_number(), "02-attention: param scale = {} violates type number", scale.dump());
  require(window.is_array() && window.size() == 2,
          "02-attention: param window_size = {} violates [left, right] (integers, -1 unbounded)", window.dump());
  in.p = problem_of(in.Q, in.K, in.V, causal.get<bool>(), scale.get<double>());
  in.p.window_left = int_param(window[0], "window_size[0] (left)");
  in.p.window_right = int_param(window[1], "window_size[1] (right)");
  if (t.count("seqlens")) {
    const Array<int64_t> n = npy_as_int64(t.at("seqlens"), "input seqlens");
    require(n.shape == Shape{in.p.B}, "02-attention: input seqlens has shape {}, violates [B] = [{}]",
            shape_str(n.shape), in.p.B);
    in.p.seqlens = n.data;
  }
  check_problem(in.p, "02-attention", true);  // names the param or input that violates a constraint
  if (in.has_dO) {
    in.dO = npy_as_double(t.at("dO"));
    const Shape want{in.p.B, in.p.H, in.p.Nq, in.p.dim_v()};
    require(in.dO.shape == want, "02-attention: input dO has shape {}, violates dO.shape == O.shape = [B, H, Nq, d_v] = {}",
            shape_str(in.dO.shape), shape_str(want));
  }
  const double scratch = 4.0 * 8 * static_cast<double>(in.p.heads()) * static_cast<double>(in.p.Nq) *
                         static_cast<double>(in.p.Nk);
  require(scratch <= kMaxScratchBytes,
          "02-attention: B H Nq Nk = {} x {} x {} x {} needs {:.1f} GiB of oracle scratch, violates <= {:.0f} GiB",
          in.p.B, in.p.H, in.p.Nq, in.p.Nk, scratch / (1ull << 30), kMaxScratchBytes / (1ull << 30));
  return in;
}

// Forward outputs always; the backward's only when the case has dO.
template <class T>
Tensors run_naive(const In& in) {
  const Array<T> Q = in.Q.cast<T>(), K = in.K.cast<T>(), V = in.V.cast<T>();
  const Forward<T> f = run_forward<T>(&naive_forward<T>, in.p, Q, K, V);
  Tensors out{{"O", to_npy(f.O)}, {"L", to_npy(f.L)}, {"m", to_npy(f.m)}};
  if (!in.has_dO) return out;
  const Grads<T> g = run_backward<T>(&naive_backward<T>, in.p, Q, K, V, f.O, in.dO.cast<T>(), f.L);
  out.insert({{"D", to_npy(g.D)}, {"dQ", to_npy(g.dQ)}, {"dK", to_npy(g.dK)}, {"dV", to_npy(g.dV)}});
  return out;
}

// A registered rung on the case's inputs at precision T: a forward rung gives O, L, m; a backward rung
// gives dQ, dK, dV, D of the reference naive forward's O and L at the same precision (the backward's
// inputs, as the tests and the chapter pair them).
template <class T>
Tensors run_rung_at(const Rung& r, const In& in) {
  const Array<T> Q = in.Q.cast<T>(), K = in.K.cast<T>(), V = in.V.cast<T>();
  auto pick = [&r](const auto& fns) -> const auto& {
    if constexpr (std::is_same_v<T, float>) return fns.f32;
    else return fns.f64;
  };
  if (const auto* fwd = std::any_cast<ForwardFns>(&r.function)) {
    const auto& f = pick(*fwd);
    require(static_cast<bool>(f), "{}: rung {} has no {} function", kStage, r.key(), dtype_name(dtype_of<T>()));
    const Forward<T> o = run_forward<T>(f, in.p, Q, K, V);
    return {{"O", to_npy(o.O)}, {"L", to_npy(o.L)}, {"m", to_npy(o.m)}};
  }
  require(in.has_dO, "{}: rung {} computes the backward, which needs input dO (this case is forward-only)", kStage,
          r.key());
  const auto& f = pick(r.fn<BackwardFns>());
  require(static_cast<bool>(f), "{}: rung {} has no {} function", kStage, r.key(), dtype_name(dtype_of<T>()));
  const Forward<T> o = run_forward<T>(&naive_forward<T>, in.p, Q, K, V);
  const Grads<T> g = run_backward<T>(f, in.p, Q, K, V, o.O, in.dO.cast<T>(), o.L);
  return {{"D", to_npy(g.D)}, {"dQ", to_npy(g.dQ)}, {"dK", to_npy(g.dK)}, {"dV", to_npy(g.dV)}};
}

}  // namespace

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_02_attention() {
  Contract c;
  c.stage = kStage;
  c.doc = "attention forward (O, L, m) and, given dO, backward (dQ, dK, dV, D) of one call; GQA / MQA (H_kv < H_q), "
          "d_v != d, sliding windows and per-sequence key lengths are the oracle's (the other rungs refuse them)";
  c.inputs = {{"Q", "<f4", "[B, H, Nq, d]", "queries (H = H_q query heads)"},
              {"K", "<f4", "[B, H_kv, Nk, d]", "keys; H_q % H_kv == 0, query head h reads kv head h / (H_q / H_kv)"},
              {"V", "<f4", "[B, H_kv, Nk, d_v]", "values; d_v may differ from d"},
              {"dO", "<f4", "[B, H, Nq, d_v]", "gradient of the loss w.r.t. O; optional: without it the case is "
                                               "forward-only (O, L, m)", true},
              {"seqlens", "<i4|<i8", "[B]", "optional: keys of batch row b (cache_seqlens); keys j >= n_b masked, "
                                            "masks aligned with n_b in place of Nk", true}};
  c.params = {{"causal", "bool", "query i attends key j iff j <= i + Nk - Nq (default false)"},
              {"scale", "number", "S = scale Q K^T (default 1/sqrt(d))"},
              {"window_size", "[int, int]", "FlashAttention's (left, right), -1 unbounded (default [-1, -1]): key j "
                                            "visible to query i iff i + Nk - Nq - left <= j <= i + Nk - Nq + right; "
                                            "causal is right = 0"}};
  const std::string one_scale =
      "one scale per batch row and head (each (b, h) an independent attention): an output row is a convex "
      "combination of V rows, so every element carries error at the scale of V";
  const std::string grad = "gradients: one scale per batch row and head, k = 3 for the backward";
  const std::string stat = "per-row statistics of one scale (S entries); -inf on fully masked rows must match";
  c.outputs = {{"O", "<f8", "[B, H, Nq, d_v]", "output (0 on fully masked rows)", Rule::max_abs, 2, one_scale, false, ""},
               {"L", "<f8", "[B, H, Nq]", "log-sum-exp of each score row (-inf if masked)", Rule::max_abs, 2, stat, false, ""},
               {"m", "<f8", "[B, H, Nq]", "row max of the scores (-inf if masked)", Rule::max_abs, 2, stat, false, ""},
               {"D", "<f8", "[B, H, Nq]", "rowsum(dO o O)", Rule::max_abs, 3, grad, false, ""},
               {"dQ", "<f8", "[B, H, Nq, d]", "gradient w.r.t. Q", Rule::max_abs, 3, grad, false, ""},
               {"dK", "<f8", "[B, H_kv, Nk, d]", "gradient w.r.t. K (GQA: summed over the group's query heads)",
                Rule::max_abs, 3, grad, false, ""},
               {"dV", "<f8", "[B, H_kv, Nk, d_v]", "gradient w.r.t. V (GQA: summed over the group's query heads)",
                Rule::max_abs, 3, grad, false, ""}};
  // Every output per batch row and head: each (b, h) is an independent attention (core/compare.hpp).
  for (OutputSpec& o : c.outputs) o.slice_axes = 2;
  // The gradients as one tensor (case.json's promise): dQ and dK are exactly 0 on a one-key attention, where
  // dV is not; at dV's scale a correct float32 backward's rounding passes, a wrong gradient does not.
  for (OutputSpec& o : c.outputs)
    if (o.name == "dQ" || o.name == "dK" || o.name == "dV") o.judged_with = "gradients";
  // The backward's outputs exist only where the case gives dO (a forward-only case checks O, L, m).
  for (OutputSpec& o : c.outputs)
    if (o.name == "D" || o.name == "dQ" || o.name == "dK" || o.name == "dV") o.needs_input = "dO";
  c.oracle_doc = "naive_forward<double> and naive_backward<double> of the float32 inputs; every shape above "
                 "(GQA / MQA, d_v != d, windows, seqlens) is the oracle's; the flash, tiled, recompute and CUDA rungs "
                 "compute H_kv = H_q, d_v = d, no window, no seqlens only, and refuse the rest by name";
  c.baseline_doc = "naive forward and backward_naive in float32 in a fixed order (core/fixed_order.hpp; D = rowsum(dO o "
                   "O) as FA2 computes it; a float64 candidate: its derived bound, fp64_bound)";
  c.oracle = [](const Tensors& t, const nlohmann::json& params) { return run_naive<double>(inputs(t, params)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_naive<float>(in) : run_naive<double>(in);
  };
  c.fp64_bound = [](const Tensors& t, const nlohmann::json& params, const Tensors&) {
    const In in = inputs(t, params);
    return attention::fp64_allowance(in.p, in.Q, in.K, in.V, in.has_dO ? &in.dO : nullptr);
  };
  for (const char* name : {"Q", "K", "V", "dO"})  // a float64 caller's own data at precision float64
    for (TensorSpec& s : c.inputs)
      if (s.name == name) s.f64_at_run = true;
  c.run_rung = [](const Rung& r, const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_rung_at<float>(r, in) : run_rung_at<double>(r, in);
  };
  return c;
}

}  // namespace stage_records

}  // namespace ladder
