// ladder/04-moe/golden.hpp -- stage 04 golden cases in memory and from disk (ref/src/04-moe/golden.cpp).
//
// A case = a model (the committed data/golden/04-moe/model/, first E experts), a bias, tokens x and
// the layer options; its outputs come from the fp64 references (gate, stable sort, dense_loop).
// load_case reads a case folder back through the contract's reader, so tests and the lab judge take a
// case from the files alone, as `ladder check 04-moe` does.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "ladder/04-moe/sorted.hpp"

namespace ladder::moe {

struct GoldenCase {
  std::string name, description, bias_kind;
  uint64_t seed = 0;
  Weights<double> weights;  // float32 values held in double
  Mat<double> x;            // [T, D], float32 values
  bool dropping = false;
  LayerOptions options;
};

struct GoldenOutputs {
  Routing<double> routing;
  std::vector<Index> sort_idx, group_sizes, kept;
  Mat<double> y;
};

GoldenCase golden_case(const std::string& name);         // from the case's seed
GoldenOutputs golden_outputs(const GoldenCase& g);       // the fp64 references on it

// Reads a case folder back through stage 04's contract (read_case in core/contract.hpp: the digest checked,
// the weights from CASE itself or the sibling CASE/../<model>, the params from case.json) -- the one
// case.json reader; the case's name, seed and the ep_sharded rung's shard count come from case.json too.
// Defined beside the contract (ref/src/04-moe/contract.cpp).
GoldenCase load_case(const std::filesystem::path& dir);

}  // namespace ladder::moe
