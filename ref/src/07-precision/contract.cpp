// ref/src/07-precision/contract.cpp -- stage 07's case contract (ladder/core/contract.hpp): a quantised
// GEMM under a declared recipe (the case's params), judged exactly where the recipe is deterministic
// (codes, scales, int32 sums) and by the bound derived from the recipe where it rounds (y).
#include "ladder/07-precision/attn_recipes.hpp"
#include "ladder/07-precision/recipe.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

namespace ladder::stage_records {

namespace {

using precision::Recipe;

struct Operands {
  Mat<float> x, w;
};

precision::MoeOperands moe_operands(const Tensors& in) {
  precision::MoeOperands m;
  m.x = from_npy<float>(tensor(in, "x", "07-precision"), "input x").mat();
  const Array<float> w = from_npy<float>(tensor(in, "w", "07-precision"), "input w");
  require(in.count("topk_idx"), "07-precision: the moe recipes need input topk_idx [T, k] (each token's experts)");
  require(w.shape.size() == 3 && w.shape[0] >= 1 && w.shape[1] == m.x.cols() && w.shape[2] >= 1,
          "07-precision: input w has shape {}, violates [E, K, N] with K = x's {} and E, N >= 1 (the moe recipes)",
          shape_str(w.shape), m.x.cols());
  m.w = w.data;
  m.E = w.shape[0], m.N = w.shape[2];
  m.topk_idx = npy_as_int64(in.at("topk_idx"), "input topk_idx");
  return m;
}

Operands operands(const Tensors& in) {
  require(!in.count("topk_idx"), "07-precision: input topk_idx belongs to the moe recipes (params.recipe moe_a8w8 | moe_a8w4)");
  const Array<float> x = from_npy<float>(tensor(in, "x", "07-precision"), "input x");
  const Array<float> w = from_npy<float>(tensor(in, "w", "07-precision"), "input w");
  require(x.shape.size() == 2 && x.rows() >= 1 && x.cols() >= 1,
          "07-precision: input x has shape {}, violates [M, K] with M, K >= 1", shape_str(x.shape));
  require(w.shape.size() == 2 && w.cols() >= 1 && w.rows() == x.cols(),
          "07-precision: input w has shape {}, violates [K, N] with K = x's {} and N >= 1", shape_str(w.shape), x.cols());
  return {x.mat(), w.mat()};
}

}  // namespace

Contract contract_07_precision() {
  Contract c;
  c.stage = "07-precision";
  c.doc = "y = x w under a declared low-precision recipe (params.recipe): a8w8 (int8 per token x per channel, int32 "
          "sums), fp8_block (E4M3, 1x128 / 128x128 scales, a limited accumulator promoted every nc), bf16_gemm (bf16 "
          "RNE operands, exact products, float32 sums in any order), or the routed "
          "experts y_a = x_t w[topk_idx[a]] through the ragged dot: moe_a8w8, moe_a8w4 (int4 groups of g along K); "
          "rung (e): MLA decode over an int8 (kv_int8) or FlashMLA FP8 (kv_fp8) cache, u and lse; rung (f): bf16 tiled "
          "attention with float32 accumulation (attn_bf16), o and lse";
  c.inputs = {{"x", "<f4", "[M, K]", "activations, float32 (the recipe quantises them); the GEMM and moe recipes", true},
              {"w", "<f4", "[K, N] | [E, K, N]", "weights, float32 (the recipe quantises them: per channel, 128 x 128 "
               "blocks, or int4 groups); [E, K, N] stacked experts for the moe recipes", true},
              {"topk_idx", "<i4|<i8", "[T, k]", "moe recipes only: the experts of token t; assignment a = t k + j", true},
              {"q_abs", "<f4", "[B, H, R]", "kv recipes: stage 03's absorbed query q^C W_UK per head (R = kv_lora)", true},
              {"q_pe", "<f4", "[B, H, rope]", "kv recipes: the roped query part q^R", true},
              {"kv", "<f4", "[B, Lmax, R + rope]", "kv recipes: the cache rows [c^KV | k^R] in float32 (the recipe "
               "quantises them); rows past seqlens are not read", true},
              {"seqlens", "<i4|<i8", "[B]", "kv recipes: the cache length of each query token, 1..Lmax", true},
              {"w_o", "<f4", "[hidden, H R]", "kv recipes: stage 03's W_absO (W_O W_UV per head): u = W_absO o^lat", true},
              {"q", "<f4", "[Lq, d]", "attn_bf16: queries, float32 (the recipe rounds them to bf16)", true},
              {"k", "<f4", "[Lk, d]", "attn_bf16: keys", true},
              {"v", "<f4", "[Lk, dv]", "attn_bf16: values", true}};
  c.params = {{"recipe", "string", "a8w8 | fp8_block | bf16_gemm | moe_* | kv_* | attn_bf16 (required): the recipe the "
               "candidate declares"},
              {"acc_bits", "int", "fp8_block: the accumulator's significant bits, 8..24 (14; 24 = float32)"},
              {"acc_round", "string", "fp8_block: rne | rtz, how each accumulator addition rounds (rne)"},
              {"nc", "int", "fp8_block: promotion interval N_C, a divisor of 128 (128)"},
              {"x_scale", "float", "fp8_block: 0 = dynamic amax/448 per 1x128 tile; > 0 one static scale (0)"},
              {"group", "int", "moe_a8w4: the int4 scale group along K, even, 2..16384 (128)"},
              {"softmax_scale", "float", "kv_*, attn_bf16: the score scale as a float32 (0: 1/sqrt(192) for MLA, "
               "1/sqrt(d) for attention)"},
              {"bc", "int", "attn_bf16: keys per tile, 1..65536 (64)"}};
  auto out = [](const char* name, const char* dtype, const char* shape, const char* doc, Rule rule, const char* why) {
    OutputSpec o;
    o.name = name, o.dtype = dtype, o.shape = shape, o.doc = doc, o.rule = rule, o.k = 0, o.why = why;
    return o;
  };
  const OutputSpec xq = out("xq", "<i4", "[M, K]", "activation codes: int8 values (a8w8), E4M3 bit patterns 0..255 "
                            "(fp8_block), bf16 bit patterns 0..65535 (bf16_gemm)",
                            Rule::exact, "quantisation is deterministic: RNE, saturation and the scale rule fix every code");
  const OutputSpec xs = out("xs", "<f4", "[M, 1] | [M, ceil(K/128)]", "activation scales: amax/127 per token, amax/448 per tile",
                            Rule::exact, "the scale rule is one float32 division of the tile's amax: no freedom");
  const OutputSpec acc = out("acc", "<i4", "[M, N] | [T k, ceil(K/g), N]",
                             "the int32 sums of xq wq (a8w8, moe_a8w8); moe_a8w4: per int4 group of g along K",
                             Rule::exact, "an integer sum that cannot overflow (K <= 131071) is the same in every "
                             "order");
  const OutputSpec wq = out("wq", "<i4", "[K, N]", "bf16_gemm: the weight codes, bf16 bit patterns 0..65535",
                            Rule::exact, "bf16 RNE of each float32 weight: one code per value, no freedom");
  OutputSpec y = out("y", "<f8", "[M, N] | [T k, N]", "the dequantised product (moe: per assignment)", Rule::bound,
                     "the recipe's rounding (float32 dequant; fp8: the acc_bits accumulator and promotion) bounded per "
                     "element, derived in ladder/07-precision/a8w8.hpp and fp8_block.hpp");
  y.bound = [](const Tensors& in, const nlohmann::json& p, const Tensors&) {
    const Recipe r = precision::parse_recipe(p);
    require(!r.kv() && !r.attn(), "07-precision: output y belongs to the GEMM and moe recipes (not {})", r.name);
    if (r.moe()) return precision::oracle_moe_recipe(r, moe_operands(in)).bound;
    const Operands op = operands(in);
    return precision::oracle_recipe(r, op.x, op.w).bound;
  };
  // Rungs (e), (f): judged by the bound derived in attn_bound.hpp (the oracle: the unquantised / unrounded float64
  // attention), computed with the oracle.
  auto attn_out = [&](const char* name, const char* shape, const char* doc) {
    OutputSpec o = out(name, "<f8", shape, doc, Rule::bound,
                       "the recipe's rounding of its inputs (cache codes x scales, bf16 Q K V), P's bf16 rounding and "
                       "the float32 arithmetic, carried through scores, softmax and weighted sum to a per-element "
                       "bound (ladder/07-precision/attn_bound.hpp)");
    o.bound = [n = std::string(name)](const Tensors& in, const nlohmann::json& p, const Tensors&) {
      const Recipe r = precision::parse_recipe(p);
      require(r.kv() || r.attn(), "07-precision: output {} belongs to recipes kv_int8, kv_fp8, attn_bf16 (not {})", n,
              r.name);
      return precision::oracle_attn_recipe(r, in).bound.at(n);
    };
    return o;
  };
  c.outputs = {xq, xs, acc, wq, y,
               attn_out("u", "[B, hidden]", "kv recipes: the layer's attention output u = W_absO o^lat per query token"),
               attn_out("lse", "[B, H] | [Lq]", "kv recipes, attn_bf16: log sum_j e^{s_j} per row (scaled scores)"),
               attn_out("o", "[Lq, dv]", "attn_bf16: the attention output")};
  c.oracle_doc = "the recipe's codes and scales (deterministic), acc exact, y = the exact product of the dequantised "
                 "operands in float64 (pairwise sums)";
  c.baseline_doc = "the reference recipe itself in float32 (y is judged by its derived bound, not by k x a baseline)";
  c.oracle = [](const Tensors& in, const nlohmann::json& p) {
    const Recipe r = precision::parse_recipe(p);
    if (r.kv() || r.attn()) return precision::oracle_attn_recipe(r, in).outputs;
    if (r.moe()) return precision::oracle_moe_recipe(r, moe_operands(in)).outputs;
    const Operands op = operands(in);
    return precision::oracle_recipe(r, op.x, op.w).outputs;
  };
  c.baseline = [](const Tensors& in, const nlohmann::json& p, DType) {
    const Recipe r = precision::parse_recipe(p);
    if (r.kv() || r.attn()) return precision::run_attn_recipe(r, in);
    if (r.moe()) return precision::run_moe_recipe(r, moe_operands(in));
    const Operands op = operands(in);
    return precision::run_recipe(r, op.x, op.w);
  };
  c.run_rung = [](const Rung& rung, const Tensors& in, const nlohmann::json& p, DType dtype) {
    const Recipe r = precision::parse_recipe(p);
    const auto& f = rung.fn<precision::RecipeFns>();
    require(f.recipe == r.name, "07-precision: rung {} computes recipe {}, the case's params.recipe is {}", rung.id,
            f.recipe, r.name);
    if ((r.kv() || r.attn()) && f.run_attn) {  // a CUDA rung: float32 kernels
      require(dtype == DType::F4, "07-precision: rung {} has no float64 function (a float32 kernel)", rung.key());
      return f.run_attn(r, in);
    }
    if (r.kv() || r.attn()) return precision::run_attn_recipe(r, in);
    if (r.moe()) return precision::run_moe_recipe(r, moe_operands(in));
    const Operands op = operands(in);
    if (f.run) {  // a CUDA rung, or ref/bf16_gemm (gemm_bf16_cpu): float32 kernels
      require(dtype == DType::F4, "07-precision: rung {} has no float64 function (a float32 kernel)", rung.key());
      return f.run(r, op.x, op.w);
    }
    return precision::run_recipe(r, op.x, op.w);
  };
  return c;
}

}  // namespace ladder::stage_records
