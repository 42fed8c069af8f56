// ref/src/99-rowsum/contract.cpp -- the template stage's case contract (ladder/core/contract.hpp).
#include "ladder/99-rowsum/rowsum.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/fp64_bound.hpp"
#include "ladder/core/registry.hpp"

namespace ladder::stage_records {

namespace {
// s = fn(x) for x [rows, cols]: one sum per row.
template <class T>
Array<T> sums(const Array<T>& x, void (*fn)(const T*, T*, int64_t, int64_t)) {
  Array<T> s(Shape(1, x.rows()));
  fn(x.data.data(), s.data.data(), x.rows(), x.cols());
  return s;
}
}  // namespace

Contract contract_99_rowsum() {
  Contract c;
  c.stage = "99-rowsum";
  c.doc = "the sum of each row of x (the template stage: examples/stage-template/README.md)";
  c.inputs = {{"x", "<f4", "[rows, cols]", "values as the kernel sees them"}};
  OutputSpec s;
  s.name = "s";
  s.dtype = "<f8";
  s.shape = "[rows]";
  s.doc = "the sum of each row";
  s.rule = Rule::max_abs;  // the tolerance rule: max|cand - oracle| <= k max|baseline - oracle| + floor
  s.k = 2;
  s.floor_ulps = 4;
  s.why = "every row is summed at the same scale (the cases draw x from one distribution)";
  c.outputs.push_back(s);
  c.oracle_doc = "pairwise sum in float64 of the float32 input";
  // The baseline sets the tolerance (k x its error): here the plain loop, so both rungs pass and a
  // candidate must be as accurate as one accumulator summing left to right.
  c.baseline_doc = "sequential sum in float32 (a float64 candidate: that error x 2^-29, k + 1)";
  auto input = [](const Tensors& in) {
    const Array<float> x = from_npy<float>(tensor(in, "x", "99-rowsum"), "input x");
    require(x.shape.size() == 2 && x.rows() >= 1 && x.cols() >= 1,
            "99-rowsum: input x has shape {}, violates [rows, cols] with rows, cols >= 1", shape_str(x.shape));
    return x;
  };
  c.oracle = [input](const Tensors& in, const nlohmann::json&) {
    return Tensors{{"s", to_npy(sums<double>(input(in).cast<double>(), &rowsum::pairwise_rows<double>))}};
  };
  c.baseline = [input](const Tensors& in, const nlohmann::json&, DType prec) {
    const Array<float> x = input(in);
    if (prec == DType::F4) return Tensors{{"s", to_npy(sums<float>(x, &rowsum::sequential_rows<float>))}};
    return Tensors{{"s", to_npy(sums<double>(x.cast<double>(), &rowsum::sequential_rows<double>))}};
  };
  // A float64 candidate: within the oracle's error bound + its own (core/fp64_bound.hpp). Both sum the same
  // cols float32 values (exact in float64) in some order: each within gamma_{cols-1} sum_j |x_j| (Higham (4.4)).
  c.fp64_bound = [input](const Tensors& in, const nlohmann::json&, const Tensors&) {
    const Array<float> x = input(in);
    Array<double> b(Shape(1, x.rows()));
    for (int64_t r = 0; r < x.rows(); ++r) {
      double mag = 0;
      for (int64_t j = 0; j < x.cols(); ++j) mag += std::abs(static_cast<double>(x.data[r * x.cols() + j]));
      b.data[r] = 2 * fp64::gamma(static_cast<double>(x.cols() - 1)) * mag;
    }
    return Tensors{{"s", to_npy(b)}};
  };
  c.run_rung = [input](const Rung& r, const Tensors& in, const nlohmann::json&, DType prec) {
    const Array<float> x = input(in);
    const auto& f = r.fn<rowsum::RowsFns>();
    if (prec == DType::F4) return Tensors{{"s", to_npy(sums<float>(x, f.f32))}};
    return Tensors{{"s", to_npy(sums<double>(x.cast<double>(), f.f64))}};
  };
  return c;
}

}  // namespace ladder::stage_records
