// tests/04-moe/test_moe_util.hpp -- helpers the stage-04 tests share: committed cases, the tolerance rule.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "golden_util.hpp"
#include "lab_oracle.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/04-moe/golden_cases.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/04-moe/golden.hpp"

namespace ladder::test {

// A committed case with its expected outputs read back from the files.
struct MoeCase {
  moe::GoldenCase in;
  moe::Routing<double> routing;
  Array<moe::Index> sort_idx, group_sizes, kept;
  Array<double> y;
  std::vector<std::string> rungs;
};

inline std::vector<std::string> moe_input_cases() {
  std::vector<std::string> n;
  for (const auto& c : moe::golden_case_names())
    if (c != "model") n.push_back(c);
  return n;
}

inline MoeCase load_moe_case(const std::string& name) {
  const auto dir = golden_dir(moe::kStage) / name;
  MoeCase c;
  c.in = moe::load_case(dir);
  c.routing.topk_idx = load_npy<int64_t>(dir / "topk_idx.npy");
  c.routing.topk_weight = load_npy<double>(dir / "topk_weight.npy");
  c.sort_idx = load_npy<int64_t>(dir / "sort_idx.npy");
  c.group_sizes = load_npy<int64_t>(dir / "group_sizes.npy");
  if (c.in.dropping) c.kept = load_npy<int64_t>(dir / "kept.npy");
  c.y = load_npy<double>(dir / "y.npy");
  const nlohmann::json j = read_json(dir / "case.json");  // kept alive: the loop reads into it
  for (const auto& r : j.at("rungs")) c.rungs.push_back(r.get<std::string>());
  REQUIRE(!c.rungs.empty());
  return c;
}

inline Array<moe::Index> as_array(const std::vector<moe::Index>& v) {
  Array<moe::Index> a({moe::Index(v.size())});
  a.data = v;
  return a;
}

// The tolerance rule on a float32 layer output: baseline dense_loop<float> (kept mask for dropping),
// compiled from the reference alone (tests/lab_oracle.hpp): in the lab it never runs the student's code.
inline CompareReport judge_f32(const MoeCase& c, const Mat<float>& y, const std::vector<moe::Index>* kept = nullptr) {
  const Mat<float> base = lab_oracle::moe_dense_loop_f32((golden_dir(moe::kStage) / c.in.name).string(),
                                                         c.routing.topk_idx.data, c.routing.topk_weight.data,
                                                         kept ? *kept : std::vector<moe::Index>{});
  return compare(c.y, Array<float>::from(y), Array<float>::from(base), contract(moe::kStage).tolerance("y", DType::F4));
}

}  // namespace ladder::test
