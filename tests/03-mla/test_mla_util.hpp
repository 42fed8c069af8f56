// tests/03-mla/test_mla_util.hpp -- helpers the stage-03 tests share: the stage's tolerance rule applied to
// every output a rung has (u, scores, attn, lse), running a registered rung, the golden folders.
#pragma once
#include <doctest/doctest.h>

#include <numeric>
#include <set>
#include <string>
#include <type_traits>

#include "golden_util.hpp"
#include "lab_check.hpp"
#include "lab_oracle.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/03-mla/mla.hpp"
#include "ladder/03-mla/golden.hpp"

namespace ladder::test {

// The tolerance rule (core/compare.hpp) with the parameters the stage's contract declares for u
// (ref/src/03-mla/contract.cpp). A float64 candidate has the oracle's own precision, so the oracle is no
// longer exact beside it: k + 1 (Contract::tolerance, fp64_baseline; the fixed-order fp64 oracle sums
// sequentially, so its own error is of the same order as the candidate's; a one-key case failed at
// 1.12x the k = 2 tolerance).
inline const Tolerance kMla32 = contract("03-mla").tolerance("u", DType::F4);
inline const Tolerance kMla64 = contract("03-mla").tolerance("u", DType::F8);

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

// fp64 rungs: the fp32 baseline's error scaled to double precision (ladder::fp64_baseline says why).
inline Array<double> scaled_baseline(const Array<double>& oracle, const Array<float>& base32) {
  return fp64_baseline(oracle, base32.cast<double>());
}

template <class T>
Array<T> as_array(const Mat<T>& m) {
  return Array<T>::from(m);
}

// The judge's side in a lab (lab_oracle.hpp): the reference's outputs as this side's types.
template <class T>
Array<T> from_plain(const lab_oracle::Plain<T>& p) {
  Array<T> a;
  a.shape = p.shape;
  a.data = p.data;
  return a;
}
template <class T>
mla::Output<T> from_oracle(const lab_oracle::MlaOut<T>& o) {
  return {o.u, from_plain(o.scores), from_plain(o.attn), from_plain(o.lse)};
}

// The rule on one named output; a failure names rung, output, case and the first bad element.
template <class T>
bool check_one(const What& w, const Array<double>& oracle, const Array<T>& cand, const Array<float>& base32) {
  if constexpr (std::is_same_v<T, float>)
    return check_rule(w, oracle, cand, base32, kMla32);
  else
    return check_rule(w, oracle, cand, scaled_baseline(oracle, base32), kMla64);
}

// u [B, hidden] always; scores and attn [B, H, Lmax] where the rung materialises them; lse [B, H]
// where it returns one (its baseline is the log-sum-exp of the fp32 baseline's scores).
template <class T>
bool check_outputs(const std::string& rung, const std::string& test_case, const mla::Output<T>& cand,
                   const mla::Output<double>& oracle, const mla::Output<float>& base32,
                   const std::vector<int64_t>& seqlens) {
  const std::string prec = std::is_same_v<T, float> ? "float32" : "float64";
  const std::vector<std::string> bhl = {"b", "h", "key"};
  bool ok = check_one({rung, prec, "u", test_case, {"b", "col"}}, as_array(oracle.u), as_array(cand.u), as_array(base32.u));
  if (cand.scores.size() > 0) {
    ok = check_one({rung, prec, "scores", test_case, bhl}, oracle.scores, cand.scores, base32.scores) && ok;
    ok = check_one({rung, prec, "attn", test_case, bhl}, oracle.attn, cand.attn, base32.attn) && ok;
  }
  if (cand.lse.size() > 0)
    ok = check_one({rung, prec, "lse", test_case, {"b", "h"}}, oracle.lse, cand.lse,
                   mla::logsumexp_rows(base32.scores, seqlens)) && ok;
  return ok;
}
template <class T>
bool check_output(const std::string& key, const mla::Output<T>& cand, const mla::Output<double>& oracle,
                  const mla::Output<float>& base32, const std::vector<int64_t>& seqlens) {
  return check_outputs(key, "(see CAPTURE)", cand, oracle, base32, seqlens);
}

}  // namespace ladder::test
