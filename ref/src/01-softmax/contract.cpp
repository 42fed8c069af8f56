// ref/src/01-softmax/contract.cpp -- stage 01's case contract (core/contract.hpp), beside its registry.
#include "ladder/core/contract.hpp"
#include "ladder/core/device_math.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/01-softmax/softmax.hpp"

namespace ladder {

namespace softmax {
Array<double> fp64_allowance(const Array<double>& x);  // fp64_bound.cpp: the derivation
}  // namespace softmax

// The stage's case contract, named by its id (its Stage record and the fuzz targets' list use it).
namespace stage_records {

Contract contract_01_softmax() {
  Contract c;
  c.stage = "01-softmax";
  c.doc = "softmax over the last axis of x, row by row";
  // NaN and inf, per row (softmax.hpp's header is the one full statement, chapter 01 section 2 the why):
  // IEEE evaluation of safe softmax, which is also what torch.softmax gives, except the fully masked row.
  c.inputs = {{"x", "<f4", "[..., cols]",
               "logits as the kernel sees them; -inf = masked (probability exactly 0); NaN and +inf allowed, "
               "see y"}};
  c.outputs = {{"y", "<f8", "[..., cols]",
                "softmax of each row. A row of all -inf (fully masked) is all zeros (the FlashAttention "
                "convention; PyTorch gives NaN). A NaN anywhere, also among -inf, makes the whole row NaN; so "
                "does +inf (one or more: x - max = inf - inf), as in PyTorch. -inf beside a finite entry: 0",
                Rule::elementwise, 2,
                "probabilities span many orders of magnitude in one row: an absolute rule lets every small "
                "entry be zeroed, scaled or made negative, so each entry is judged at its own scale; and the "
                "structural facts hold (no negative entry, exactly 0 where x is -inf, rows sum as the oracle's)",
                true, "x"}};
  // A GPU candidate (`ladder check --device`): CUDA's expf is within 2 ulp, not correctly rounded; its
  // effect on each y_i is bounded by 2u / (1 - u), u = 2 eps (core/device_math.hpp derives it).
  c.outputs[0].device_rel = device_math::softmax_rel(device_math::cuda_expf_ulps);
  c.oracle_doc = "safe softmax (notes Alg. 2) in float64 of the float32 input";
  c.baseline_doc = "safe softmax in float32 in a fixed order (fixed-bits exps, d summed pairwise: "
                   "core/fixed_order.hpp; a float64 candidate: its derived bound, fp64_bound)";
  auto input = [](const Tensors& in) {
    const Array<float> x = from_npy<float>(tensor(in, "x", "01-softmax"), "input x");
    require(!x.shape.empty() && x.cols() >= 1 && x.rows() >= 1,
            "01-softmax: input x has shape {}, violates rank >= 1 with cols >= 1 and rows >= 1", shape_str(x.shape));
    return x;
  };
  c.oracle = [input](const Tensors& in, const nlohmann::json&) {
    return Tensors{{"y", to_npy(softmax::apply(&softmax::safe_rows<double>, input(in).cast<double>()))}};
  };
  c.fp64_bound = [input](const Tensors& in, const nlohmann::json&, const Tensors&) {
    return Tensors{{"y", to_npy(softmax::fp64_allowance(input(in).cast<double>()))}};
  };
  c.baseline = [input](const Tensors& in, const nlohmann::json&, DType prec) {
    const Array<float> x = input(in);
    if (prec == DType::F4) return Tensors{{"y", to_npy(softmax::apply(&softmax::safe_rows<float>, x))}};
    return Tensors{{"y", to_npy(softmax::apply(&softmax::safe_rows<double>, x.cast<double>()))}};
  };
  // Any registered rung (reference or CUDA) on the case's x, at its float32 or float64 function; at float64
  // x may be <f8 itself (f64_at_run: a float64 caller's data, not rounded to float32 first).
  c.inputs[0].f64_at_run = true;
  c.run_rung = [input](const Rung& r, const Tensors& in, const nlohmann::json&, DType prec) {
    const auto& f = r.fn<softmax::RowsFns>();
    if (prec == DType::F4) {
      const Array<float> x = input(in);
      Array<float> y(x.shape);
      f.f32(x.data.data(), y.data.data(), x.rows(), x.cols());
      return Tensors{{"y", to_npy(y)}};
    }
    require(static_cast<bool>(f.f64), "01-softmax: rung {} has no float64 function (a float32 kernel)", r.key());
    const NpyData& xd = tensor(in, "x", "01-softmax");
    const Array<double> x64 = xd.dtype == DType::F8 ? from_npy<double>(xd, "input x") : input(in).cast<double>();
    const Array<double>& x = x64;
    require(!x.shape.empty() && x.cols() >= 1 && x.rows() >= 1,
            "01-softmax: input x has shape {}, violates rank >= 1 with cols >= 1 and rows >= 1", shape_str(x.shape));
    Array<double> y(x.shape);
    f.f64(x64.data.data(), y.data.data(), x.rows(), x.cols());
    return Tensors{{"y", to_npy(y)}};
  };
  return c;
}

}  // namespace stage_records

}  // namespace ladder
