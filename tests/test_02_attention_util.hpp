// tests/test_02_attention_util.hpp -- helpers the stage-02 tests share: the stage's tolerance rule for
// forward outputs and gradients, random inputs, and running a registered rung on arrays.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "ladder/attention.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::test {

// DESIGN.md's rule with the stage's fixed parameters: k = 2 forward, 3 backward, floor 4 ULPs.
inline constexpr Tolerance kForward32{2, 4, 0x1p-23};
inline constexpr Tolerance kBackward32{3, 4, 0x1p-23};
inline constexpr Tolerance kForward64{2, 4, 0x1p-52};
inline constexpr Tolerance kBackward64{3, 4, 0x1p-52};

// The gradient (dQ, dK, dV) as one flat tensor. A component can be exactly zero (one key: P = 1, so
// dS = P o (dP - D) = 0 and dQ = dK = 0), where a floor "at the output's scale" would be 0 and demand
// bit-exact zeros; taken together the floor is at the scale of the whole gradient.
template <class T>
Array<T> gradient(const attention::Grads<T>& g) {
  Array<T> r({g.dQ.size() + g.dK.size() + g.dV.size()});
  auto it = std::copy(g.dQ.data.begin(), g.dQ.data.end(), r.data.begin());
  it = std::copy(g.dK.data.begin(), g.dK.data.end(), it);
  std::copy(g.dV.data.begin(), g.dV.data.end(), it);
  return r;
}

// fp64 rungs: there is no fp64 baseline distinct from the fp64 oracle, so the baseline error is the
// fp32 baseline's error scaled to double precision (x eps64 / eps32 = 2^-29).
inline Array<double> scaled_baseline(const Array<double>& oracle, const Array<float>& base32) {
  Array<double> r = oracle;
  for (int64_t i = 0; i < r.size(); ++i)
    if (std::isfinite(oracle.data[i])) r.data[i] += (static_cast<double>(base32.data[i]) - oracle.data[i]) * 0x1p-29;
  return r;
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
