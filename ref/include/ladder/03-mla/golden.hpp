// ladder/03-mla/golden.hpp -- stage 03 golden cases (data/golden/03-mla/<case>/), defined in
// ref/src/03-mla/golden.cpp.
//
// One model, small_config() weights from ladder::Rng(kModelSeed), is stored once in the case folder
// model_small/ (W_DQ.npy ... W_O.npy, <f4); every other case stores one decode step on that model:
//   inputs  h [B, hidden] <f4, q_pos [B] <i8, seqlens [B] <i8, block_table [B, max_blocks] <i4 (-1 =
//           unused), blocks [num_blocks, 64, kv_lora + rope] <f4 (NaN in every row no token owns);
//   oracle  u [B, hidden], scores [B, H, Lmax] (-inf past L_b), lse [B, H], all <f8: CD at T = double
//           on the <f4 inputs cast to double. The attention weights are not stored (the folder stays
//           small): load_oracle recomputes them from the scores with the same fp64 safe softmax, so
//           they are bit-identical to the oracle's.
// The tolerance rule (core/compare.hpp): k = 2, floor 4 ULPs of float32, baseline = CD at float32.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ladder/03-mla/step.hpp"
#include "ladder/03-mla/synthetic.hpp"

namespace ladder::mla {

inline constexpr uint64_t kModelSeed = 3001;
inline constexpr const char* kModelCase = "model_small";

struct GoldenCase {
  std::string name;
  InputSpec spec;
  std::string what;
};

// The decode-step cases (one token per sequence; every case but model_small and the chunk cases), in a fixed order.
const std::vector<GoldenCase>& golden_cases();

// The chunk cases (the contract's inputs q_lens, and prefix for a prefill chunk), on the same model: decode
// steps of s_q query tokens per sequence (their rows cached, as MTP's verify step sees them) and ragged
// prefill chunks (the blocks hold the prefixes, NaN where the chunk's rows go). Their files are the
// contract's inputs and its oracle's outputs: u, lse, scores (CD decoding token by token at float64), and
// kv_rows for a prefill chunk.
struct ChunkCase {
  std::string name;
  ChunkSpec spec;
  bool prefill = false;  // the step writes the chunk's rows (input prefix)
  std::string what;
};
const std::vector<ChunkCase>& chunk_cases();
const GoldenCase& golden_case(const std::string& name);

// From the cases' RNG seeds (what the committed files must equal).
Weights<float> golden_model();
Inputs golden_inputs(const GoldenCase& c);
Output<double> golden_oracle(const Weights<float>& W, const Inputs& in);

// From a folder written by write_golden_case.
Weights<float> load_model(const std::filesystem::path& model_dir);
Inputs load_inputs(const std::filesystem::path& case_dir);
Output<double> load_oracle(const std::filesystem::path& case_dir);

}  // namespace ladder::mla
