// python/src/rungs_attention_backward.cpp -- stage 02's backward on the caller's O and L: the one typed call left beside the
// contract's run (Contract::run_rung recomputes O and L from Q, K, V; FlashAttention-2's backward takes the
// forward's saved O and L, and so does ladder.attention_backward).
//
// The rung is looked up in the one registry (ladder::registry()) and called through the function type
// its stage header documents (attention::BackwardFns). Inputs are read
// in place (zero copy: the C-contiguous numpy buffer is the rung's input pointer) and outputs are
// numpy arrays the rung writes into directly. The precision is the inputs' dtype: float32 runs the
// rung's f32 function, float64 its f64 function (CUDA rungs have f32 only).
#include "arrays.hpp"
#include "ladder/02-attention/attention.hpp"
#include "ladder/core/registry.hpp"
#include "rungs.hpp"

namespace ladder::python {

namespace {

template <class Fns>
void require_f64(const Fns& fns, const Rung& r, const Arg& first) {
  if (!fns.f64)
    throw py::type_error(first.name + ": dtype float64, but rung " + r.key() +
                         " runs in float32 only (a CUDA kernel); pass float32 arrays");
}

}  // namespace

namespace {

constexpr const char* kQ = "[B, H, Nq, d]";
constexpr const char* kKV = "[B, H, Nk, d] (K and V share Nk and d)";

struct AttnArgs {
  Float fp{};
  Arg Q, K, V;
  attention::Problem p;
};

AttnArgs attention_args(py::handle q, py::handle k, py::handle v, bool causal, py::object scale) {
  AttnArgs a;
  a.Q = float_arg(q, "Q", 4, kQ, &a.fp);
  a.K = float_arg(k, "K", 4, kKV, nullptr);
  a.V = float_arg(v, "V", 4, kKV, nullptr);
  same_precision(a.Q, a.fp, a.K);
  same_precision(a.Q, a.fp, a.V);
  const Shape& s = a.Q.shape;
  require_shape(a.K, {s[0], s[1], a.K.shape[2], s[3]}, "K must match Q's B, H and d");
  require_shape(a.V, a.K.shape, "V must have K's shape");
  a.p = attention::Problem::make(s[0], s[1], s[2], a.K.shape[2], s[3], causal);
  if (!scale.is_none()) {
    a.p.scale = scale.cast<double>();
    if (!std::isfinite(a.p.scale))
      throw py::value_error("scale: " + std::to_string(a.p.scale) + " violates scale finite");
  }
  return a;
}

template <class T>
py::dict backward_at(const attention::BackwardFn<T>& f, const AttnArgs& a, const Arg& O, const Arg& dO,
                     const Arg& L) {
  const attention::Problem& p = a.p;
  py::array_t<T> dQ = empty_array<T>(a.Q.shape), dK = empty_array<T>(a.K.shape), dV = empty_array<T>(a.V.shape),
                 D = empty_array<T>({p.B, p.H, p.Nq});
  T *dq = dQ.mutable_data(), *dk = dK.mutable_data(), *dv = dV.mutable_data(), *dd = D.mutable_data();
  {
    py::gil_scoped_release nogil;
    f(p, a.Q.ptr<T>(), a.K.ptr<T>(), a.V.ptr<T>(), O.ptr<T>(), dO.ptr<T>(), L.ptr<T>(), dq, dk, dv, dd);
  }
  py::dict d;
  d["dQ"] = dQ;
  d["dK"] = dK;
  d["dV"] = dV;
  d["D"] = D;
  return d;
}

}  // namespace

// Q, K, V, O, dO, L -> {dQ, dK, dV, D}.
py::dict attention_backward_rung(const Rung& r, py::handle q, py::handle k, py::handle v, py::handle o,
                                 py::handle dout, py::handle L, bool causal, py::object scale) {
  if (!attention::is_backward(r))
    throw py::value_error("rung: " + r.key() + " is a forward rung; call it with Q, K, V");
  const AttnArgs a = attention_args(q, k, v, causal, scale);
  const Arg O = float_arg(o, "O", 4, kQ, nullptr), dO = float_arg(dout, "dO", 4, kQ, nullptr),
            Lse = float_arg(L, "L", 3, "[B, H, Nq]", nullptr);
  for (const Arg* x : {&O, &dO, &Lse}) same_precision(a.Q, a.fp, *x);
  require_shape(O, a.Q.shape, "O must have Q's shape");
  require_shape(dO, a.Q.shape, "dO must have Q's shape");
  require_shape(Lse, {a.p.B, a.p.H, a.p.Nq}, "L is the forward's log-sum-exp per query row");
  const auto& fns = r.fn<attention::BackwardFns>();
  if (a.fp == Float::f32) return backward_at<float>(fns.f32, a, O, dO, Lse);
  require_f64(fns, r, a.Q);
  return backward_at<double>(fns.f64, a, O, dO, Lse);
}

}  // namespace ladder::python
