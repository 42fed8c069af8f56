// ref/src/04-moe/deepgemm_k_grouped.cpp -- the layout "04-moe/deepgemm_k_grouped": DeepGEMM's K-axis-grouped GEMM for
// the MoE weight gradient (README: "a K-axis-grouped API for MoE weight backward (with M and N must remain fixed)",
// k_grouped_fp8_gemm_{nt,tn}_contiguous; tests/generators.py generate_k_grouped_contiguous): a [sum(ks), m] and
// b [sum(ks), n] hold the groups' K segments concatenated in the order of ks, and
//   d[g] = c[g] + a[K_g]^T b[K_g],  K_g = rows ks[0] + .. + ks[g-1] .. + ks[g] - 1,
// c [num_groups, m, n] the float32 accumulator (absent: 0, "otherwise computes D = A @ B"); an empty group (ks = 0,
// which DeepGEMM's tests draw) leaves d[g] = c[g]. Each ks[g] is a multiple of k_alignment (DeepGEMM's
// get_mk_alignment_for_contiguous_layout(), 128 by default; its generator draws aligned ks). float32 values here
// (bf16 on a GPU not covered; FP8 with per-channel 1 x 128 scales: the sibling layout "04-moe/deepgemm_k_grouped_fp8",
// deepgemm_k_grouped_fp8.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "deepgemm_k_in.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/core/fp64_bound.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::moe::detail {

KIn read_k(const std::string& who, const Tensors& t, const nlohmann::json& params) {
  const char* w = who.c_str();
  KIn in;
  in.a = from_npy<float>(tensor(t, "a", w), "input a");
  in.b = from_npy<float>(tensor(t, "b", w), "input b");
  const Array<int64_t> ks = npy_as_int64(tensor(t, "ks", w), "input ks");
  require(in.a.shape.size() == 2, "{}: input a has shape {}, violates [sum(ks), m]", w, shape_str(in.a.shape));
  require(in.b.shape.size() == 2 && in.b.shape[0] == in.a.shape[0], "{}: input b has shape {}, violates [sum(ks) = {}, "
          "n]", w, shape_str(in.b.shape), in.a.shape[0]);
  require(ks.shape.size() == 1 && ks.shape[0] >= 1, "{}: input ks has shape {}, violates [num_groups >= 1]", w,
          shape_str(ks.shape));
  in.K = in.a.shape[0], in.m = in.a.shape[1], in.n = in.b.shape[1], in.G = ks.shape[0];
  int64_t align = 128;
  if (params.is_object() && params.contains("k_alignment")) {
    require(params.at("k_alignment").is_number_integer() && params.at("k_alignment").get<int64_t>() >= 1,
            "{}: param k_alignment = {} violates integer >= 1", w, params.at("k_alignment").dump());
    align = params.at("k_alignment").get<int64_t>();
  }
  int64_t sum = 0;
  for (int64_t g = 0; g < in.G; ++g) {
    const int64_t k = ks.data[g];
    require(k >= 0 && k % align == 0, "{}: input ks[{}] = {} violates >= 0 and a multiple of k_alignment = {}", w, g,
            k, align);
    in.ks.push_back(k), in.start.push_back(sum), sum += k;
  }
  require(sum == in.K, "{}: input ks sums to {}, violates = the rows of a and b, {}", w, sum, in.K);
  if (t.count("c")) {
    in.c = from_npy<float>(t.at("c"), "input c");
    require(in.c.shape == (Shape{in.G, in.m, in.n}), "{}: input c has shape {}, violates [num_groups, m, n] = {}", w,
            shape_str(in.c.shape), shape_str(Shape{in.G, in.m, in.n}));
  }
  return in;
}

}  // namespace ladder::moe::detail

namespace ladder::moe {
namespace {

constexpr const char* kWho = "04-moe/deepgemm_k_grouped";
using detail::KIn;

KIn read(const Tensors& t, const nlohmann::json& params) { return detail::read_k(kWho, t, params); }

// d[g, i, j] = c + sum over the group's rows of a[r, i] b[r, j], at T, rows ascending (or descending: a candidate
// computed in another order).
template <class T>
Array<T> product(const KIn& in, bool descending = false) {
  Array<T> d({in.G, in.m, in.n});
  for (int64_t g = 0; g < in.G; ++g)
    for (int64_t i = 0; i < in.m; ++i)
      for (int64_t j = 0; j < in.n; ++j) {
        T acc = 0;
        for (int64_t t = 0; t < in.ks[g]; ++t) {
          const int64_t r = in.start[g] + (descending ? in.ks[g] - 1 - t : t);
          acc += static_cast<T>(in.a.data[r * in.m + i]) * static_cast<T>(in.b.data[r * in.n + j]);
        }
        const T c0 = in.c.data.empty() ? T(0) : static_cast<T>(in.c.data[(g * in.m + i) * in.n + j]);
        d.data[(g * in.m + i) * in.n + j] = c0 + acc;
      }
  return d;
}

// A float64 candidate's allowance per element of d (Contract::fp64_bound): c plus a dot product over the group's
// K_g rows of float32 values, the oracle's and the candidate's sums in any order (c added first or last alike);
// an empty group's d = c exactly: 0 (core/fp64_bound.hpp, dot_f32_allowance).
Array<double> k_grouped_allowance(const KIn& in) {
  Array<double> d({in.G, in.m, in.n});
  for (int64_t g = 0; g < in.G; ++g)
    for (int64_t i = 0; i < in.m; ++i)
      for (int64_t j = 0; j < in.n; ++j) {
        const int64_t r0 = in.start[g];
        const float* c0 = in.c.data.empty() ? nullptr : &in.c.data[(g * in.m + i) * in.n + j];
        d.data[(g * in.m + i) * in.n + j] = in.ks[g] == 0 ? 0.0 : fp64::dot_f32_allowance(
            &in.a.data[r0 * in.m + i], in.m, &in.b.data[r0 * in.n + j], in.n, in.ks[g], c0);
      }
  return d;
}

}  // namespace

Tensors deepgemm_k_grouped_inputs(const DeepGemmKSpec& s) {
  require(!s.ks.empty() && s.m >= 1 && s.n >= 1, "{}: spec violates num_groups, m, n >= 1", kWho);
  int64_t K = 0;
  for (int64_t k : s.ks) K += k;
  Rng rng(s.seed);
  Array<float> a({K, s.m}), b({K, s.n});
  Array<int32_t> ks({static_cast<int64_t>(s.ks.size())});
  for (size_t g = 0; g < s.ks.size(); ++g) ks.data[g] = static_cast<int32_t>(s.ks[g]);
  int64_t row = 0;
  for (size_t g = 0; g < s.ks.size(); ++g)  // groups of different magnitudes: a shifted boundary shows
    for (int64_t r = 0; r < s.ks[g]; ++r, ++row)
      for (int64_t i = 0; i < s.m; ++i)
        a.data[row * s.m + i] = static_cast<float>(std::ldexp(rng.normal(), static_cast<int>(g % 3) * 2 - 2));
  for (float& x : b.data) x = static_cast<float>(rng.normal());
  Tensors t{{"a", to_npy(a)}, {"b", to_npy(b)}, {"ks", to_npy(ks)}};
  if (s.accumulate) {
    Array<float> c({static_cast<int64_t>(s.ks.size()), s.m, s.n});
    for (float& x : c.data) x = static_cast<float>(32 * rng.normal());  // DeepGEMM's generator: randn * 32
    t["c"] = to_npy(c);
  }
  return t;
}

nlohmann::json deepgemm_k_grouped_params(const DeepGemmKSpec& s) { return {{"k_alignment", s.k_alignment}}; }

Tensors deepgemm_k_grouped_run(const Tensors& t, const nlohmann::json& params, int boundary_shift) {
  KIn in = read(t, params);
  std::vector<int64_t> full;  // the bug: the boundary between the first two non-empty groups off by boundary_shift
  for (int64_t g = 0; g < in.G; ++g)
    if (in.ks[g] > 0) full.push_back(g);
  if (boundary_shift != 0 && full.size() >= 2) {
    in.ks[full[0]] += boundary_shift, in.ks[full[1]] -= boundary_shift;
    for (int64_t g = 1; g < in.G; ++g) in.start[g] = in.start[g - 1] + in.ks[g - 1];
  }
  return {{"d", to_npy(product<float>(in, true))}};
}

}  // namespace ladder::moe

namespace ladder::stage_records {

Contract contract_04_moe_deepgemm_k_grouped() {
  using namespace moe;
  Contract c;
  c.stage = kDeepGemmKGrouped;
  c.doc = "DeepGEMM's k_grouped_*_gemm_*_contiguous (MoE weight gradient): groups along K, d[g] = c[g] + a[K_g]^T "
          "b[K_g] (float32 values here)";
  c.inputs = {{"a", "<f4", "[sum(ks), m]", "the groups' K segments of A^T stacked in the order of ks"},
              {"b", "<f4", "[sum(ks), n]", "the groups' K segments of B stacked the same way"},
              {"ks", "<i4|<i8", "[num_groups]", "each group's K, a multiple of k_alignment (0: an empty group)"},
              {"c", "<f4", "[num_groups, m, n]", "the accumulator (absent: d = a^T b per group)", true}};
  c.params = {{"k_alignment", "integer", "every ks a multiple of it (DeepGEMM's get_mk_alignment_for_contiguous_layout, "
                                         "default 128)"}};
  c.outputs = {{"d", "<f8", "[num_groups, m, n]", "d[g] = c[g] + sum over group g's rows r of a[r]^T b[r]",
                Rule::max_abs, 2, "one scale per row of a group's gradient (a dot product over K_g per element)",
                false, ""}};
  c.outputs[0].slice_axes = 2;  // (g, i)
  c.oracle_doc = "each element's dot product over its group's rows at float64 of the float32 inputs, plus c";
  c.baseline_doc = "the same at float32";
  c.oracle = [](const Tensors& t, const nlohmann::json& p) { return Tensors{{"d", to_npy(product<double>(read(t, p)))}}; };
  c.baseline = [](const Tensors& t, const nlohmann::json& p, DType prec) {
    const KIn in = read(t, p);
    return Tensors{{"d", prec == DType::F4 ? to_npy(product<float>(in)) : to_npy(product<double>(in))}};
  };
  c.fp64_bound = [](const Tensors& t, const nlohmann::json& p, const Tensors&) {
    return Tensors{{"d", to_npy(k_grouped_allowance(read(t, p)))}};
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"deepgemm_calc_diff", layout_cos_diff(x, e)}};
  };
  return c;
}

}  // namespace ladder::stage_records
