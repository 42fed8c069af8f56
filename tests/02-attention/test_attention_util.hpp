// tests/02-attention/test_attention_util.hpp -- helpers the stage-02 tests share: the stage's tolerance rule for
// forward outputs and gradients, random inputs, and running a registered rung on arrays.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "ladder/02-attention/attention.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"
#include "lab_check.hpp"

namespace ladder::test {

// The tolerance rule (core/compare.hpp) with the parameters the stage's contract declares (O: forward,
// dQ: backward; ref/src/02-attention/contract.cpp); float64 candidates get k + 1 (Contract::tolerance).
inline const Tolerance kForward32 = contract("02-attention").tolerance("O", DType::F4);
inline const Tolerance kBackward32 = contract("02-attention").tolerance("dQ", DType::F4);
inline const Tolerance kForward64 = contract("02-attention").tolerance("O", DType::F8);
inline const Tolerance kBackward64 = contract("02-attention").tolerance("dQ", DType::F8);

// The gradient (dQ, dK, dV) as one tensor per batch row and head, [B, H, Nq d + 2 Nk d]: the contract judges
// them together (OutputSpec::judged_with) and per (b, h) slice. A component can be exactly zero (one key:
// P = 1, so dS = P o (dP - D) = 0 and dQ = dK = 0), where a floor "at the output's scale" would be 0 and
// demand bit-exact zeros; taken together the floor is at the scale of the slice's whole gradient.
// GQA (H_kv < H): one slice per batch row and kv head, holding the dQ of its G = H / H_kv query heads.
template <class T>
Array<T> gradient(const attention::Grads<T>& g) {
  const int64_t B = g.dQ.shape[0], Hkv = g.dK.shape[1], sk = B * Hkv, G = g.dQ.shape[1] / Hkv;
  const int64_t q = G * g.dQ.size() / (B * g.dQ.shape[1]), k = g.dK.size() / sk, v = g.dV.size() / sk;
  Array<T> r({B, Hkv, q + k + v});
  auto it = r.data.begin();
  for (int64_t s = 0; s < sk; ++s) {
    it = std::copy(g.dQ.data.begin() + s * q, g.dQ.data.begin() + (s + 1) * q, it);
    it = std::copy(g.dK.data.begin() + s * k, g.dK.data.begin() + (s + 1) * k, it);
    it = std::copy(g.dV.data.begin() + s * v, g.dV.data.begin() + (s + 1) * v, it);
  }
  return r;
}

// Dimension names for failure positions: O, Q, dQ [B, H, Nq, d] (K, V, dK, dV: Nk rows); L, m, D [B, H, Nq].
inline const std::vector<std::string> kBHRC = {"b", "h", "row", "col"};
inline const std::vector<std::string> kBHR = {"b", "h", "row"};

// fp64 rungs: the fp32 baseline's error scaled to double precision (ladder::fp64_baseline says why).
inline Array<double> scaled_baseline(const Array<double>& oracle, const Array<float>& base32) {
  return fp64_baseline(oracle, base32.cast<double>());
}

// The rule on the gradient, decided on (dQ | dK | dV) as one tensor (see gradient() above), reported
// per output: a failure names the first output with bad elements (dQ, dK or dV), its first bad
// element as [b, h, row, col] with expected and actual values, and how many elements of each output
// are outside the tolerance -- so "only dK is off" is visible at once.
template <class T>
bool check_gradient(const std::string& rung, const std::string& precision, const std::string& what,
                    const attention::Grads<double>& oracle, const attention::Grads<T>& cand,
                    const attention::Grads<float>& base, Tolerance tol) {
  const Array<double> o = gradient(oracle);
  const Array<T> c = gradient(cand);
  const Array<float> b32 = gradient(base);
  CompareReport r;
  if constexpr (std::is_same_v<T, float>)
    r = compare(o, c, b32, tol);
  else
    r = compare(o, c, scaled_baseline(o, b32), tol);
  if (r.pass) return true;
  struct Part {
    const char* name;
    const Array<double>* o;
    const Array<T>* c;
  };
  const Part parts[] = {{"dQ", &oracle.dQ, &cand.dQ}, {"dK", &oracle.dK, &cand.dK}, {"dV", &oracle.dV, &cand.dV}};
  std::string counts, line;
  for (const Part& part : parts) {
    int64_t bad = 0, first = -1;
    if (part.c->shape != part.o->shape) {
      counts += fmt::format(" {} has shape {} where {} is expected;", part.name, shape_str(part.c->shape),
                            shape_str(part.o->shape));
      if (line.empty()) line = fmt::format("rung {} ({}), output {}, case {}: wrong shape", rung, precision, part.name, what);
      continue;
    }
    for (int64_t i = 0; i < part.o->size(); ++i) {
      const double ov = part.o->data[i], cv = static_cast<double>(part.c->data[i]);
      const bool special = !std::isfinite(ov) || !std::isfinite(cv);
      if ((special && !(ov == cv)) || (!special && std::abs(cv - ov) > r.tol)) {
        if (first < 0) first = i;
        ++bad;
      }
    }
    counts += fmt::format(" {} {} of {}", part.name, bad, part.o->size());
    if (first >= 0 && line.empty())
      line = fmt::format("rung {} ({}), output {}, case {}: first bad element at {} of {}: expected {:.6e}, got {:.6e} "
                         "(|err| {:.2e} > tolerance {:.2e})",
                         rung, precision, part.name, what, position(first, part.o->shape, kBHRC),
                         shape_str(part.o->shape), part.o->data[first], static_cast<double>(part.c->data[first]),
                         std::abs(static_cast<double>(part.c->data[first]) - part.o->data[first]), r.tol);
  }
  if (line.empty()) line = fmt::format("rung {} ({}), output dQ|dK|dV, case {}: {}", rung, precision, what, r.failure);
  FAIL_CHECK(line << "\n  elements outside the tolerance:" << counts << "\n  " << r.text());
  return false;
}

template <class T>
Array<T> randn(Rng& rng, const Shape& s, double sd = 1) {
  Array<T> a(s);
  for (auto& v : a.data) v = static_cast<T>(sd * rng.normal());
  return a;
}

template <class T>
attention::Forward<T> forward(const Rung& r, const attention::Problem& p, const Array<T>& Q, const Array<T>& K,
                              const Array<T>& V) {
  const auto& f = r.fn<attention::ForwardFns>();
  if constexpr (std::is_same_v<T, float>)
    return attention::run_forward<float>(f.f32, p, Q, K, V);
  else
    return attention::run_forward<double>(f.f64, p, Q, K, V);
}

template <class T>
attention::Grads<T> backward(const Rung& r, const attention::Problem& p, const Array<T>& Q, const Array<T>& K,
                             const Array<T>& V, const Array<T>& O, const Array<T>& dO, const Array<T>& L) {
  const auto& f = r.fn<attention::BackwardFns>();
  if constexpr (std::is_same_v<T, float>)
    return attention::run_backward<float>(f.f32, p, Q, K, V, O, dO, L);
  else
    return attention::run_backward<double>(f.f64, p, Q, K, V, O, dO, L);
}

}  // namespace ladder::test
