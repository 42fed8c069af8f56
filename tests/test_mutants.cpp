// tests/test_mutants.cpp -- the mutation score: every mutant caught, every correct variant passed
// (tools/ladder/mutants.cpp holds the catalogue; `ladder mutants` prints the same table).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "golden_util.hpp"
#include "mutants.hpp"

using namespace ladder;

namespace {
// Run once, judged by both test cases.
const std::vector<mutants::Outcome>& catalogue() {
  static const auto outcomes = mutants::run_catalogue(test::golden_dir("01-softmax").parent_path());
  return outcomes;
}
}  // namespace

TEST_CASE("mutation score: every bug class caught, every correct variant passed") {
  const auto& outcomes = catalogue();
  MESSAGE(mutants::table(outcomes));
  for (const mutants::Outcome& o : outcomes) {
    CAPTURE(o.name);
    if (o.mutant)
      CHECK_MESSAGE(!o.passed, "mutant " << o.name << " (" << o.source << ") passed ladder's checks");
    else
      CHECK_MESSAGE(o.passed, "correct variant " << o.name << " was rejected: " << o.check);
  }
  CHECK(mutants::all_good(outcomes));
  // The catalogue holds what it promises: each of these classes is there as a mutant.
  for (const char* want : {"all-zero output", "input mutated in place", "stale output", "N < 4", "lse in log2",
                           "NHD read as HND", "duplicate hot experts", "-inf row with one NaN", "causal flag ignored",
                           "wrong block_table entry", "scales of the wrong block",
                           "sequence shorter than a block", "padding row of the contiguous layout written",
                           "group index (-1) taken as an expert", "segment shifted by a row",
                           "rows past masked_m counted", "scale of the neighbouring 128-group",
                           "scale divided instead of multiplied", "RoPE part read as FP8",
                           "activation scales read untransposed", "weight scales of the wrong k block",
                           "lonely token: o NaN", "topk_length ignored", "attention sink ignored",
                           "packed UE8M0: bytes in the wrong order", "group boundary shifted by one row",
                           "a dropped token", "recv_topk_idx global instead of local",
                           "FP8 scale of the wrong 128-block", "combine weights applied twice",
                           "k-grouped FP8: the scale of the neighbouring K block",
                           "k-grouped FP8: a group boundary shifted by one row",
                           "k-grouped FP8: scales read untransposed"}) {
    const bool there = std::any_of(outcomes.begin(), outcomes.end(), [&](const mutants::Outcome& o) {
      return o.mutant && o.name.find(want) != std::string::npos;
    });
    CHECK_MESSAGE(there, "the catalogue has no mutant '" << want << "'");
  }
}

TEST_CASE("the harness and the invariants name the check that caught a mutant") {
  const auto& outcomes = catalogue();
  auto check_of = [&](const std::string& name) {
    for (const mutants::Outcome& o : outcomes)
      if (o.name.find(name) != std::string::npos) return o.check;
    return std::string("(absent)");
  };
  CHECK(check_of("input mutated in place").find("inputs_unchanged") != std::string::npos);
  CHECK(check_of("duplicate hot experts").find("invariant distinct_per_gpu") != std::string::npos);
  CHECK(check_of("an expert left without a replica").find("invariant every_expert_placed") != std::string::npos);
}
