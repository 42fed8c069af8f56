// ladder/02-attention/golden.hpp -- stage 02 golden cases (data/golden/02-attention/<case>/), defined in
// ref/src/02-attention/golden.cpp.
//
// Inputs Q, K, V, dO are float32 draws from ladder::Rng(seed) (Q scaled by q_std: 3 makes the attention
// peaky); the expected outputs are the fp64 oracle (naive_forward<double>, naive_backward<double>) of
// those float32 values. Small cases are stored whole; the others store every input's sum and the
// oracle at 16 evenly spaced query rows and 16 key rows (`ladder golden 02-attention --case NAME --out
// DIR` writes them whole). Cases of the shapes only the oracle computes (GQA / MQA, d_v != d, sliding
// windows, per-sequence key lengths, forward-only) list the rungs that apply in case.json "rungs".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ladder/02-attention/problem.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder::attention {

struct GoldenCase {
  std::string name;
  Problem p;
  double q_std = 1;
  uint64_t seed = 0;
  bool sampled = false;
  std::string what;
  bool backward = true;  // false: a forward-only case (no dO; outputs O, L, m)
};

struct GoldenInputs {
  Array<float> Q, K, V, dO;  // dO empty in a forward-only case
};

// The fp64 oracle of a case (forward and backward of naive at T = double; D, dQ, dK, dV empty if forward-only).
struct GoldenOracle {
  Array<double> O, L, m, D, dQ, dK, dV;
};

const GoldenCase& golden_case(const std::string& name);
GoldenInputs golden_inputs(const GoldenCase& c);
GoldenOracle golden_oracle(const GoldenCase& c, const GoldenInputs& in);

// Row indices a sampled case stores: 16 (or all, if fewer) evenly spaced rows of n, first and last included.
std::vector<int64_t> sample_rows(int64_t n);

}  // namespace ladder::attention
