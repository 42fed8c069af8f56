// ladder/07-precision/recipe.hpp -- a case's declared recipe (its params) and the stage's outputs.
//
// params: {"recipe": "a8w8" | "fp8_block" | "bf16_gemm" | "moe_a8w8" | "moe_a8w4", "acc_bits": 8..24 (14), "acc_round":
//          "rne" | "rtz" ("rne"), "nc": a divisor of 128 (128), "x_scale": 0 = dynamic, or one static
//          activation scale (0), "group": moe_a8w4's int4 group size along K, even, 2..16384 (128)};
// acc_bits .. x_scale belong to fp8_block (the int8 recipes refuse them: int32 sums, dynamic scales).
// Outputs (contract.cpp): xq [M, K] codes, xs activation scales ([M, 1] int8, [M, ceil(K/128)]
// fp8_block), acc int32 ([M, N] a8w8 and moe_a8w8, [M, ceil(K/g), N] moe_a8w4; none for fp8_block),
// y [M, N]; bf16_gemm (bf16_gemm.hpp): xq [M, K] and wq [K, N] bf16 codes, y [M, N]. The moe recipes
// (moe_quant.hpp) take w [E, K, N] and topk_idx [T, k]; their M = T k rows are the assignments in order a = t k + j.
// Rungs (e) and (f) (attn_recipes.hpp): "kv_int8" | "kv_fp8" (MLA decode over a quantised cache, kv_quant.hpp) and
// "attn_bf16" (bf16 tiled attention, attn_bf16.hpp); their params: "softmax_scale" (float32 value; 0 = the
// default: 1/sqrt(192) for MLA, DeepSeek's nope + rope, 1/sqrt(d) for attention), "bc" (attn_bf16: keys per tile).
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "ladder/07-precision/a8w8.hpp"
#include "ladder/07-precision/bf16_gemm.hpp"
#include "ladder/07-precision/fp8_block.hpp"
#include "ladder/07-precision/moe_quant.hpp"
#include "ladder/core/contract.hpp"

namespace ladder::precision {

struct Recipe {
  std::string name;  // "a8w8", "fp8_block", "bf16_gemm", "moe_a8w8", ... (parse_recipe)
  Fp8Recipe fp8;
  int64_t group = 128;  // moe_a8w4's int4 group along K
  double softmax_scale = 0;  // kv_*, attn_bf16: 0 = the default
  int64_t bc = 64;           // attn_bf16: keys per tile
  bool moe() const { return name == "moe_a8w8" || name == "moe_a8w4"; }
  bool kv() const { return name == "kv_int8" || name == "kv_fp8"; }
  bool attn() const { return name == "attn_bf16"; }
  bool gemm() const { return name == "a8w8" || name == "fp8_block" || name == "bf16_gemm"; }
};

inline Recipe parse_recipe(const nlohmann::json& p) {
  require(p.is_object() && p.contains("recipe") && p["recipe"].is_string(),
          "07-precision: params.recipe is required: \"a8w8\" or \"fp8_block\"");
  Recipe r;
  r.name = p["recipe"].get<std::string>();
  require(r.gemm() || r.moe() || r.kv() || r.attn(),
          "07-precision: params.recipe = '{}' violates recipe in {{a8w8, fp8_block, bf16_gemm, moe_a8w8, moe_a8w4, "
          "kv_int8, kv_fp8, attn_bf16}}", r.name);
  for (const auto& [key, v] : p.items()) {
    const bool fp8_key = key == "acc_bits" || key == "acc_round" || key == "nc" || key == "x_scale";
    require(key == "recipe" || key == "group" || key == "softmax_scale" || key == "bc" || fp8_key,
            "07-precision: params.{} is not a param (recipe, acc_bits, acc_round, nc, x_scale, group, softmax_scale, "
            "bc)", key);
    require(key != "softmax_scale" || r.kv() || r.attn(),
            "07-precision: params.softmax_scale violates recipe in {{kv_int8, kv_fp8, attn_bf16}} ({} has none)", r.name);
    require(key != "bc" || r.attn(), "07-precision: params.bc violates recipe == attn_bf16 ({} has none)", r.name);
    require(!fp8_key || r.name == "fp8_block", "07-precision: params.{} violates recipe == fp8_block ({} has none)", key,
            r.name);
    require(key != "group" || r.name == "moe_a8w4", "07-precision: params.group violates recipe == moe_a8w4 ({} has none)",
            r.name);
  }
  if (p.contains("group")) {
    require(p["group"].is_number_integer(), "07-precision: params.group violates an even integer 2..{}", kA8W4MaxGroup);
    r.group = p["group"].get<int64_t>();
    require(r.group >= 2 && r.group <= kA8W4MaxGroup && r.group % 2 == 0,
            "07-precision: params.group = {} violates even 2 <= group <= {}", r.group, kA8W4MaxGroup);
  }
  if (p.contains("softmax_scale")) {
    require(p["softmax_scale"].is_number() && std::isfinite(p["softmax_scale"].get<double>()) &&
                p["softmax_scale"].get<double>() >= 0,
            "07-precision: params.softmax_scale = {} violates a finite number >= 0 (0: the default)",
            p["softmax_scale"].dump());
    r.softmax_scale = p["softmax_scale"].get<double>();
  }
  if (p.contains("bc")) {
    require(p["bc"].is_number_integer() && p["bc"].get<int64_t>() >= 1 && p["bc"].get<int64_t>() <= 65536,
            "07-precision: params.bc = {} violates an integer 1..65536", p["bc"].dump());
    r.bc = p["bc"].get<int64_t>();
  }
  if (p.contains("acc_bits")) {
    require(p["acc_bits"].is_number_integer(), "07-precision: params.acc_bits violates an integer 8..24");
    r.fp8.acc_bits = p["acc_bits"].get<int>();
  }
  if (p.contains("nc")) {
    require(p["nc"].is_number_integer(), "07-precision: params.nc violates an integer dividing 128");
    r.fp8.nc = p["nc"].get<int64_t>();
  }
  if (p.contains("acc_round")) {
    const std::string m = p["acc_round"].is_string() ? p["acc_round"].get<std::string>() : "?";
    require(m == "rne" || m == "rtz", "07-precision: params.acc_round = '{}' violates acc_round in {{rne, rtz}}", m);
    r.fp8.acc_round = m == "rne" ? AccRound::nearest_even : AccRound::toward_zero;
  }
  if (p.contains("x_scale")) {
    require(p["x_scale"].is_number(), "07-precision: params.x_scale violates a number");
    r.fp8.x_scale = p["x_scale"].get<float>();
  }
  if (r.name == "fp8_block") check_recipe(r.fp8);
  return r;
}

// The codes as int32 (int8 values, or E4M3 bit patterns 0..255).
inline Array<int32_t> codes_i32(const quant::Quantized& q) {
  Array<int32_t> a({q.rows, q.cols});
  for (size_t i = 0; i < q.codes.size(); ++i)
    a.data[i] = q.elem == quant::Elem::e4m3 ? static_cast<int32_t>(q.codes[i]) : static_cast<int32_t>(static_cast<int8_t>(q.codes[i]));
  return a;
}

// The reference recipe on x [M, K], w [K, N]: every output it defines, y in float32.
inline Tensors run_recipe(const Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  if (r.name == "bf16_gemm") {
    const Bf16Result b = bf16_gemm_chain(x, w);
    Array<float> y({x.rows(), w.cols()});
    y.data = b.y;
    return Tensors{{"xq", to_npy(bf16_codes_i32(b.xq, x.rows(), x.cols()))},
                   {"wq", to_npy(bf16_codes_i32(b.wq, w.rows(), w.cols()))},
                   {"y", to_npy(y)}};
  }
  if (r.name == "a8w8") {
    const A8W8Result a = a8w8_gemm(x, w);
    return Tensors{{"xq", to_npy(codes_i32(a.xq))},
                   {"xs", to_npy(Array<float>::from(a.xq.scales))},
                   {"acc", to_npy(Array<int32_t>::from(a.acc))},
                   {"y", to_npy(Array<float>::from(a.y))}};
  }
  const Fp8Result f = fp8_gemm(x, w, r.fp8);
  return Tensors{{"xq", to_npy(codes_i32(f.xq))},
                 {"xs", to_npy(Array<float>::from(f.xq.scales))},
                 {"y", to_npy(Array<float>::from(f.y))}};
}

// The fp64 oracle: the same codes and scales (deterministic; judged exactly), acc exact, and y the
// exact product of the dequantised operands in float64; plus the per-element bound of y.
struct OracleOut {
  Tensors outputs;
  Array<double> bound;
};
inline OracleOut oracle_recipe(const Recipe& r, const Mat<float>& x, const Mat<float>& w) {
  OracleOut o;
  if (r.name == "bf16_gemm") {
    require(x.cols() == w.rows(), "bf16_gemm: x.cols = {} violates x.cols == w.rows = {}", x.cols(), w.rows());
    const std::vector<uint16_t> xq = bf16_codes(x, "x"), wq = bf16_codes(w, "w");
    Bf16Oracle b = bf16_gemm_oracle(xq, wq, x.rows(), x.cols(), w.cols());
    o.outputs = Tensors{{"xq", to_npy(bf16_codes_i32(xq, x.rows(), x.cols()))},
                        {"wq", to_npy(bf16_codes_i32(wq, w.rows(), w.cols()))},
                        {"y", to_npy(b.y)}};
    o.bound = std::move(b.bound);
    return o;
  }
  Array<double> y({x.rows(), w.cols()}), b({x.rows(), w.cols()});
  if (r.name == "a8w8") {
    const A8W8Result a = a8w8_gemm(x, w);  // codes, scales and acc are exact: the oracle's own
    for (int64_t i = 0; i < x.rows(); ++i)
      for (int64_t j = 0; j < w.cols(); ++j) {
        const double v = a8w8_oracle(a.acc(i, j), a.xq.scales(i, 0), a.wq.scales(0, j));
        y.data[static_cast<size_t>(i * w.cols() + j)] = v;
        b.data[static_cast<size_t>(i * w.cols() + j)] = a8w8_bound(v);
      }
    o.outputs = Tensors{{"xq", to_npy(codes_i32(a.xq))},
                        {"xs", to_npy(Array<float>::from(a.xq.scales))},
                        {"acc", to_npy(Array<int32_t>::from(a.acc))},
                        {"y", to_npy(y)}};
  } else {
    const quant::Quantized xq = fp8_quantize_x(x, r.fp8), wq = quant::blocks_128x128(w);
    const Fp8Oracle f = fp8_oracle(xq, wq);
    for (int64_t i = 0; i < x.rows(); ++i)
      for (int64_t j = 0; j < w.cols(); ++j) {
        y.data[static_cast<size_t>(i * w.cols() + j)] = f.y(i, j);
        b.data[static_cast<size_t>(i * w.cols() + j)] = fp8_bound(r.fp8, x.cols(), f.g(i, j));
      }
    o.outputs = Tensors{{"xq", to_npy(codes_i32(xq))}, {"xs", to_npy(Array<float>::from(xq.scales))}, {"y", to_npy(y)}};
  }
  o.bound = b;
  return o;
}

// The moe recipes' operands: x [T x K], w [E x K x N] (flat), topk_idx [T x k].
struct MoeOperands {
  Mat<float> x;
  std::vector<float> w;
  int64_t E = 0, N = 0;
  Array<moe::Index> topk_idx;
};

inline Tensors moe_outputs(const quant::Quantized& xq, const std::vector<int32_t>& acc, int64_t nb, int64_t N,
                           const Tensors& y) {
  const int64_t A = static_cast<int64_t>(acc.size()) / (nb * N);
  Array<int32_t> a(nb == 1 ? Shape{A, N} : Shape{A, nb, N});
  a.data = acc;
  Tensors t = y;
  t.emplace("xq", to_npy(codes_i32(xq)));
  t.emplace("xs", to_npy(Array<float>::from(xq.scales)));
  t.emplace("acc", to_npy(a));
  return t;
}

inline Tensors run_moe_recipe(const Recipe& r, const MoeOperands& m) {
  const MoeQuantResult q = moe_quant_experts(m.x, m.w, m.E, m.N, m.topk_idx, r.name == "moe_a8w4", r.group);
  return moe_outputs(q.xq, q.acc, q.wq.nb, m.N, Tensors{{"y", to_npy(Array<float>::from(q.y))}});
}

inline OracleOut oracle_moe_recipe(const Recipe& r, const MoeOperands& m) {
  check_moe_operands(m.x.rows(), m.x.cols(), m.E, m.topk_idx);
  const quant::Quantized xq = quant::per_token(m.x, quant::Elem::int8);  // deterministic: the oracle's own
  const QuantExperts wq = quantize_experts(m.w, m.E, m.x.cols(), m.N, r.name == "moe_a8w4", r.group);
  const MoeOracle o = moe_quant_oracle(xq, wq, m.topk_idx);
  return OracleOut{moe_outputs(xq, o.acc, wq.nb, m.N, Tensors{{"y", to_npy(o.y)}}), o.bound};
}

}  // namespace ladder::precision

namespace ladder::precision {
// The function a registry rung stores: the recipe it computes (run_rung refuses a case of another) and, for a
// rung of another backend (the CUDA a8w8, cuda/src/07-precision/registry.cpp) or a compiled CPU kernel (ref/bf16_gemm:
// gemm_bf16_cpu, ref/src/07-precision/registry.cpp), its own float32 run of a GEMM
// recipe on x [M, K], w [K, N] with the outputs run_recipe defines; null = the reference recipe (run_recipe).
// run_attn: the same for the attention recipes (the CUDA attn_bf16): the case's inputs -> the outputs
// run_attn_recipe defines (attn_recipes.hpp); null = the reference.
struct RecipeFns {
  std::string recipe;
  Tensors (*run)(const Recipe&, const Mat<float>& x, const Mat<float>& w) = nullptr;
  Tensors (*run_attn)(const Recipe&, const Tensors& in) = nullptr;
};
}  // namespace ladder::precision
