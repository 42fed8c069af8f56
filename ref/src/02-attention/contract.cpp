// ref/src/02-attention/contract.cpp -- stage 02's case contract (core/contract.hpp), beside its registry.
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

#include <type_traits>

namespace ladder {
namespace {

using namespace attention;

// The naive rungs materialise S, P (and dS, dP) of B H Nq Nk elements: refuse what cannot fit.
constexpr double kMaxScratchBytes = 8.0 * (1ull << 30);

struct In {
  Array<float> Q, K, V, dO;
  Problem p;
};

In inputs(const Tensors& t, const nlohmann::json& params) {
  In in{from_npy<float>(tensor(t, "Q", kStage), "input Q"), from_npy<float>(tensor(t, "K", kStage), "input K"),
        from_npy<float>(tensor(t, "V", kStage), "input V"), from_npy<float>(tensor(t, "dO", kStage), "input dO"), {}};
  const nlohmann::json causal = params.value("causal", nlohmann::json(false));
  const nlohmann::json scale = params.value("scale", nlohmann::json(0.0));
  require(causal.is_boolean(), "02-attention: param causal = {} violates type bool", causal.dump());
  require(scale.is_number(), "02-attention: param scale = {} violates type number", scale.dump());
  in.p = problem_of(in.Q, in.K, in.V, causal.get<bool>(), scale.get<double>());
  require(in.dO.shape == in.Q.shape, "02-attention: input dO has shape {}, violates dO.shape == Q.shape = {}",
          shape_str(in.dO.shape), shape_str(in.Q.shape));
  const double scratch = 4.0 * 8 * static_cast<double>(in.p.heads()) * static_cast<double>(in.p.Nq) *
                         static_cast<double>(in.p.Nk);
  require(scratch <= kMaxScratchBytes,
          "02-attention: B H Nq Nk = {} x {} x {} x {} needs {:.1f} GiB of oracle scratch, violates <= {:.0f} GiB",
          in.p.B, in.p.H, in.p.Nq, in.p.Nk, scratch / (1ull << 30), kMaxScratchBytes / (1ull << 30));
  return in;
}

template <class T>
Tensors run_naive(const In& in) {
  const Array<T> Q = in.Q.cast<T>(), K = in.K.cast<T>(), V = in.V.cast<T>();
  const Forward<T> f = run_forward<T>(&naive_forward<T>, in.p, Q, K, V);
  const Grads<T> g = run_backward<T>(&naive_backward<T>, in.p, Q, K, V, f.O, in.dO.cast<T>(), f.L);
  return {{"O", to_npy(f.O)},   {"L", to_npy(f.L)},   {"m", to_npy(f.m)},  {"D", to_npy(g.D)},
          {"dQ", to_npy(g.dQ)}, {"dK", to_npy(g.dK)}, {"dV", to_npy(g.dV)}};
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
  c.doc = "attention forward (O, L, m) and backward (dQ, dK, dV, D) of one call";
  c.inputs = {{"Q", "<f4", "[B, H, Nq, d]", "queries"},
              {"K", "<f4", "[B, H, Nk, d]", "keys"},
              {"V", "<f4", "[B, H, Nk, d]", "values"},
              {"dO", "<f4", "[B, H, Nq, d]", "gradient of the loss w.r.t. O"}};
  c.params = {{"causal", "bool", "query i attends key j iff j <= i + Nk - Nq (default false)"},
              {"scale", "number", "S = scale Q K^T (default 1/sqrt(d))"}};
  const std::string one_scale =
      "one scale per batch row and head (each (b, h) an independent attention): an output row is a convex "
      "combination of V rows, so every element carries error at the scale of V";
  const std::string grad = "gradients: one scale per batch row and head, k = 3 for the backward";
  const std::string stat = "per-row statistics of one scale (S entries); -inf on fully masked rows must match";
  c.outputs = {{"O", "<f8", "[B, H, Nq, d]", "output (0 on fully masked rows)", Rule::max_abs, 2, one_scale, false, ""},
               {"L", "<f8", "[B, H, Nq]", "log-sum-exp of each score row (-inf if masked)", Rule::max_abs, 2, stat, false, ""},
               {"m", "<f8", "[B, H, Nq]", "row max of the scores (-inf if masked)", Rule::max_abs, 2, stat, false, ""},
               {"D", "<f8", "[B, H, Nq]", "rowsum(dO o O)", Rule::max_abs, 3, grad, false, ""},
               {"dQ", "<f8", "[B, H, Nq, d]", "gradient w.r.t. Q", Rule::max_abs, 3, grad, false, ""},
               {"dK", "<f8", "[B, H, Nk, d]", "gradient w.r.t. K", Rule::max_abs, 3, grad, false, ""},
               {"dV", "<f8", "[B, H, Nk, d]", "gradient w.r.t. V", Rule::max_abs, 3, grad, false, ""}};
  // Every output per batch row and head: each (b, h) is an independent attention (core/compare.hpp).
  for (OutputSpec& o : c.outputs) o.slice_axes = 2;
  // The gradients as one tensor (case.json's promise): dQ and dK are exactly 0 on a one-key attention, where
  // dV is not; at dV's scale a correct float32 backward's rounding passes, a wrong gradient does not.
  for (OutputSpec& o : c.outputs)
    if (o.name == "dQ" || o.name == "dK" || o.name == "dV") o.judged_with = "gradients";
  c.oracle_doc = "naive_forward<double> and naive_backward<double> of the float32 inputs";
  c.baseline_doc = "naive forward and backward_naive in float32 (a float64 candidate: that error x 2^-29, k + 1)";
  c.oracle = [](const Tensors& t, const nlohmann::json& params) { return run_naive<double>(inputs(t, params)); };
  c.baseline = [](const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_naive<float>(in) : run_naive<double>(in);
  };
  c.run_rung = [](const Rung& r, const Tensors& t, const nlohmann::json& params, DType prec) {
    const In in = inputs(t, params);
    return prec == DType::F4 ? run_rung_at<float>(r, in) : run_rung_at<double>(r, in);
  };
  return c;
}

}  // namespace stage_records

}  // namespace ladder
