// tests/test_03_mla_util.hpp -- helpers the stage-03 tests share: the stage's tolerance rule applied to
// every output a rung has (u, scores, attn, lse), running a registered rung, the golden folders.
#pragma once
#include <doctest/doctest.h>

#include <numeric>
#include <set>
#include <string>
#include <type_traits>

#include "golden_util.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/mla.hpp"
#include "ladder/mla/golden.hpp"

namespace ladder::test {

// DESIGN.md's rule with the stage's fixed parameters: k = 2 (forward), floor 4 ULPs of the output dtype.
inline constexpr Tolerance kMla32{2, 4, 0x1p-23};
inline constexpr Tolerance kMla64{2, 4, 0x1p-52};

// Every rung of every test file of the stage is marked here; the last test asserts full coverage.
inline Coverage& mla_coverage() {
  static Coverage c;
  return c;
}

inline std::filesystem::path mla_dir(const std::string& c = "") { return golden_dir(mla::kStage) / c; }

template <class T>
mla::Output<T> run_rung(const Rung& r, const mla::Weights<T>& W, const mla::PagedCache<T>& cache,
                        const mla::Step<T>& step) {
  mla_coverage().mark(r);
  const auto& f = r.fn<mla::RungFns>();
  if constexpr (std::is_same_v<T, float>)
    return mla::run(f.f32, W, cache, step);
  else
    return mla::run(f.f64, W, cache, step);
}

// fp64 rungs: the fp64 baseline would be the oracle itself, so its error is the fp32 baseline's error
// scaled to double precision (x eps64 / eps32 = 2^-29), as the stage-02 tests do.
inline Array<double> scaled_baseline(const Array<double>& oracle, const Array<float>& base32) {
  Array<double> r = oracle;
  for (int64_t i = 0; i < r.size(); ++i)
    if (std::isfinite(oracle.data[i])) r.data[i] += (static_cast<double>(base32.data[i]) - oracle.data[i]) * 0x1p-29;
  return r;
}

template <class T>
Array<T> as_array(const Mat<T>& m) {
  return Array<T>::from(m);
}

// The rule on one named output; returns pass and reports a failure with the rung's key.
template <class T>
bool check_one(const std::string& what, const Array<double>& oracle, const Array<T>& cand, const Array<float>& base32) {
  CompareReport rep;
  if constexpr (std::is_same_v<T, float>)
    rep = compare(oracle, cand, base32, kMla32);
  else
    rep = compare(oracle, cand, scaled_baseline(oracle, base32), kMla64);
  CHECK_MESSAGE(rep.pass, what << ": " << rep.text());
  return rep.pass;
}

// u always; scores and attn where the rung materialises them; lse where it returns one (its baseline
// is the log-sum-exp of the fp32 baseline's scores).
template <class T>
bool check_output(const std::string& key, const mla::Output<T>& cand, const mla::Output<double>& oracle,
                  const mla::Output<float>& base32, const std::vector<int64_t>& seqlens) {
  bool ok = check_one(key + " u", as_array(oracle.u), as_array(cand.u), as_array(base32.u));
  if (cand.scores.size() > 0) {
    ok = check_one(key + " scores", oracle.scores, cand.scores, base32.scores) && ok;
    ok = check_one(key + " attn", oracle.attn, cand.attn, base32.attn) && ok;
  }
  if (cand.lse.size() > 0)
    ok = check_one(key + " lse", oracle.lse, cand.lse, mla::logsumexp_rows(base32.scores, seqlens)) && ok;
  return ok;
}

}  // namespace ladder::test
