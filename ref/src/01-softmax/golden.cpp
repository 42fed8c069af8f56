// ref/src/01-softmax/golden.cpp -- stage 01 golden cases (data/golden/01-softmax/<case>/).
//
// Inputs are stored as float32 (what the kernels consume); the expected output y is the fp64 oracle
// (safe softmax in double) applied to those same float32 values. The 1<<20 case is too large for the
// repository (12 MB): its committed copy holds the seed, the exact sum of x, and the oracle at 1024
// evenly spaced positions; `ladder golden 01-softmax --case len_1048576 --out DIR` writes it whole.
#include <cmath>
#include <limits>
#include <map>

#include "ladder/core/contract.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/01-softmax/golden_cases.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder::softmax {
namespace {

struct CaseSpec {
  int64_t rows, cols;
  uint64_t seed;
  const char* what;
  const char* naive;  // what the naive float32 rung gives: "ok", "overflow" (non-finite), "nan" (0/0)
};

const std::map<std::string, CaseSpec>& specs() {
  static const std::map<std::string, CaseSpec> s = {
      {"len_1", {1, 1, 101, "a single element: softmax is exactly 1", "ok"}},
      {"len_97", {4, 97, 102, "4 rows of 97 N(0, 3^2) logits", "ok"}},
      {"len_1023", {4, 1023, 103, "4 rows of 1023 N(0, 3^2) logits", "ok"}},
      {"len_1025", {4, 1025, 104, "4 rows of 1025 N(0, 3^2) logits", "ok"}},
      {"len_1048576", {1, 1 << 20, 105, "one row of 2^20 N(0, 3^2) logits (committed as a sample)", "ok"}},
      {"overflow", {1, 4, 0, "the row [10000, 10001, 10002, 10003]: exp overflows", "overflow"}},
      {"neg_inf", {3, 33, 106, "-inf entries: every 3rd in row 0, the first in row 1, all but one in row 2", "ok"}},
      {"all_neg_inf", {2, 8, 107, "row 0 entirely -inf (defined as all zeros), row 1 ordinary", "nan"}},
      {"mixed_scales", {6, 257, 108, "rows scaled by 1e-3, 1, 10, 100, 1e3, 1e4 in one batch", "overflow"}},
      {"nan_inf", {9, 37, 109, "NaN and inf rows, one of each kind: all -inf, NaN among -inf, NaN among finite, "
                               "one +inf, three +inf, +inf among -inf, -inf mixed with finite, NaN and +inf, ordinary",
                   "nan"}},
  };
  return s;
}

const CaseSpec& spec(const std::string& name) {
  auto it = specs().find(name);
  require(it != specs().end(), "01-softmax: no golden case '{}'", name);
  return it->second;
}

constexpr int64_t kSample = 1024;

// nan_inf's rows (37 columns: a warp of 32 lanes plus 5, so the v4 kernel's lanes 5..31 hold one
// element each and lanes 0..4 two), with the value each must give (softmax.hpp's header):
//   0 all -inf                            -> zeros (ladder's convention for a fully masked row)
//   1 -inf but a NaN at column 5          -> NaN everywhere
//   2 finite, a NaN at column 5           -> NaN everywhere
//   3 finite, +inf at column 20           -> NaN everywhere
//   4 finite, +inf at columns 0, 20, 36   -> NaN everywhere
//   5 -inf but +inf at column 36          -> NaN everywhere
//   6 finite, -inf at every 4th column    -> ordinary softmax, exactly 0 at the -inf
//   7 finite, NaN at column 36, +inf at 3 -> NaN everywhere
//   8 finite                              -> ordinary softmax (a rung's state does not leak across rows)
void nan_inf_rows(Array<float>& x) {
  const float ninf = -std::numeric_limits<float>::infinity(), inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t c = x.cols();
  auto at = [&](int64_t r, int64_t j) -> float& { return x.data[static_cast<size_t>(r * c + j)]; };
  for (int64_t j = 0; j < c; ++j) at(0, j) = at(1, j) = at(5, j) = ninf;
  at(1, 5) = nan;
  at(2, 5) = nan;
  at(3, 20) = inf;
  at(4, 0) = at(4, 20) = at(4, 36) = inf;
  at(5, 36) = inf;
  for (int64_t j = 0; j < c; j += 4) at(6, j) = ninf;
  at(7, 36) = nan, at(7, 3) = inf;
}

}  // namespace

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : specs()) n.push_back(k);
  return n;
}

Array<float> golden_case_input(const std::string& name) {
  const CaseSpec& c = spec(name);
  Array<float> x({c.rows, c.cols});
  Rng rng(c.seed);
  for (auto& v : x.data) v = static_cast<float>(3.0 * rng.normal());
  const float ninf = -std::numeric_limits<float>::infinity();
  if (name == "overflow") {
    x.data = {10000.f, 10001.f, 10002.f, 10003.f};
  } else if (name == "neg_inf") {
    for (int64_t j = 0; j < c.cols; j += 3) x.data[j] = ninf;
    x.data[c.cols] = ninf;
    for (int64_t j = 0; j < c.cols; ++j)
      if (j != 17) x.data[2 * c.cols + j] = ninf;
  } else if (name == "all_neg_inf") {
    for (int64_t j = 0; j < c.cols; ++j) x.data[j] = ninf;
  } else if (name == "nan_inf") {
    nan_inf_rows(x);
  } else if (name == "mixed_scales") {
    const double scale[6] = {1e-3, 1.0, 10.0, 100.0, 1e3, 1e4};
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.cols; ++j) x.data[r * c.cols + j] *= static_cast<float>(scale[r] / 3.0);
  }
  return x;
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool full) {
  const CaseSpec& c = spec(name);
  const Array<float> x = golden_case_input(name);
  const Array<double> y = apply(&safe_rows<double>, x.cast<double>());
  std::filesystem::create_directories(dir);

  const bool sampled = (name == "len_1048576") && !full;
  nlohmann::json shapes = {{"x", x.shape}, {"y", y.shape}};
  nlohmann::json dtypes = {{"x", "<f4"}, {"y", "<f8"}};
  nlohmann::json j = case_manifest("01-softmax", {"naive", "safe", "online"}, c.seed, shapes, dtypes,
                                   rules_json(contract("01-softmax"), shapes));
  j["case"] = name;
  j["description"] = c.what;
  j["oracle"] = "safe softmax in float64 of the float32 input";
  j["naive_float32"] = c.naive;
  j["input"] = "x: float32 draws 3 * N(0, 1) from ladder::Rng(seed) (ref/src/01-softmax/golden.cpp)";
  if (sampled) {
    double sum = 0;
    for (float v : x.data) sum += v;
    Array<int64_t> idx({kSample});
    Array<double> ys({kSample});
    const int64_t stride = x.size() / kSample;
    for (int64_t i = 0; i < kSample; ++i) idx.data[i] = i * stride, ys.data[i] = y.data[i * stride];
    save_npy(dir / "sample_index.npy", idx);
    save_npy(dir / "y_sample.npy", ys);
    j["stored"] = "sample";
    j["x_sum"] = sum;
    j["files"] = {"sample_index.npy", "y_sample.npy"};
  } else {
    save_npy(dir / "x.npy", x);
    save_npy(dir / "y.npy", y);
    j["stored"] = "full";
    j["files"] = {"x.npy", "y.npy"};
  }
  write_json(dir / "case.json", j);
  seal_case(dir);  // digest of every file: `ladder check` refuses a changed folder
}

}  // namespace ladder::softmax
