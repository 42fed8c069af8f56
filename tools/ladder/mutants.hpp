// tools/ladder/mutants.hpp -- the mutation score: bug classes seen in real projects, each as a mutant
// candidate that ladder's checks must reject, beside correct variants they must accept.
//
// A mutant is either a candidate output (the case's expected output with the bug applied, as a kernel with
// that bug would write it) judged by the stage's contract (core/contract.hpp: its rule, and the
// contract's invariants), or a small "user kernel" run by the harness below, which does what a test
// driver of a port should: poison the output buffer before each call (memory nobody wrote is NaN, as
// SIMT does), compare the inputs after the call with a copy taken before it, and reuse its buffers
// across calls with different inputs, so a stale output from the previous call shows.
// `ladder mutants` prints the table; tests/test_mutants.cpp requires every mutant caught and every
// correct variant passed.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace ladder::mutants {

struct Outcome {
  std::string name;       // the bug class (mutant) or the variant (correct)
  bool mutant = true;     // false: a correct variant, which must pass
  std::string source;     // where the bug class was seen, or how the variant differs
  bool passed = false;    // whether ladder's checks accepted it
  std::string check;      // the check that rejected it (its first failure line), or "-"
};

// Runs the whole catalogue on the golden cases under golden_root (data/golden) and generated inputs.
std::vector<Outcome> run_catalogue(const std::filesystem::path& golden_root);

// The catalogue's DeepGEMM part (tools/ladder/04-moe/mutants.cpp): stage 04's grouped-GEMM layouts.
void deepgemm_cases(std::vector<Outcome>& out);
// Its FP8 layouts (the same file): activation scales untransposed, weight scales of the wrong k block.
void deepgemm_fp8_cases(std::vector<Outcome>& out);
// The catalogue's FlashMLA part (tools/ladder/03-mla/mutants.cpp): FP8 records, lonely token, topk_length, sink.
void flashmla_cases(std::vector<Outcome>& out);
// The DeepEP part (tools/ladder/04-moe/mutants.cpp): dispatch / combine buffers (moe::deepep_variants).
void deepep_cases(std::vector<Outcome>& out);

// The table `ladder mutants` prints, its last line the score ("N/N mutants caught, M/M correct variants passed").
std::string table(const std::vector<Outcome>& outcomes);

// Whether every mutant was caught and every correct variant passed.
bool all_good(const std::vector<Outcome>& outcomes);

}  // namespace ladder::mutants
