// ref/src/04-moe/deepgemm.cpp -- the layouts "04-moe/deepgemm_contiguous" and "04-moe/deepgemm_masked": stage 04's
// ragged dot in DeepGEMM's grouped-GEMM interface (ladder/04-moe/deepgemm.hpp says which facts come from where and
// what ladder judges on padding rows and rows past masked_m).
#include "ladder/04-moe/deepgemm.hpp"
#include "deepgemm_in.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ladder/04-moe/ragged_dot.hpp"
#include "ladder/core/fp64_bound.hpp"
#include "ladder/core/gemm.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::moe::detail {
namespace {

int64_t param_int(const std::string& who, const nlohmann::json& p, const char* name, int64_t fallback) {
  if (!p.is_object() || !p.contains(name)) return fallback;
  require(p.at(name).is_number_integer() && p.at(name).get<int64_t>() >= 1, "{}: param {} = {} violates integer >= 1",
          who, name, p.at(name).dump());
  return p.at(name).get<int64_t>();
}

}  // namespace

GroupedIn read(const std::string& who, bool masked, const Tensors& t, const nlohmann::json& params) {
  GroupedIn in;
  in.masked = masked;
  in.a = from_npy<float>(tensor(t, "a", who), "input a");
  in.b = from_npy<float>(tensor(t, "b", who), "input b");
  require(in.b.shape.size() == 3, "{}: input b has shape {}, violates [num_groups, n, k] (NT: D = A B^T)", who,
          shape_str(in.b.shape));
  in.G = in.b.shape[0], in.n = in.b.shape[1], in.k = in.b.shape[2];
  require(in.G >= 1 && in.n >= 1 && in.k >= 1, "{}: input b has shape {}, violates num_groups, n, k >= 1", who,
          shape_str(in.b.shape));
  if (masked) {
    require(in.a.shape.size() == 3 && in.a.shape[0] == in.G && in.a.shape[2] == in.k,
            "{}: input a has shape {}, violates [num_groups = {}, max_m, k = {}]", who, shape_str(in.a.shape), in.G, in.k);
    in.max_m = in.a.shape[1], in.R = in.G * in.max_m;
    const Array<int64_t> mm = npy_as_int64(tensor(t, "masked_m", who), "input masked_m");
    require(mm.shape == Shape{in.G}, "{}: input masked_m has shape {}, violates [num_groups = {}]", who,
            shape_str(mm.shape), in.G);
    param_int(who, params, "expected_m", 1);  // DeepGEMM's performance hint: accepted, changes nothing
    in.expert.assign(static_cast<size_t>(in.R), -1);
    for (int64_t g = 0; g < in.G; ++g) {
      require(mm.data[g] >= 0 && mm.data[g] <= in.max_m, "{}: input masked_m[{}] = {} violates 0 <= masked_m <= max_m "
              "= {}", who, g, mm.data[g], in.max_m);
      std::fill_n(in.expert.begin() + g * in.max_m, mm.data[g], g);
    }
    return in;
  }
  require(in.a.shape.size() == 2 && in.a.shape[1] == in.k, "{}: input a has shape {}, violates [m_sum, k = {}]", who,
          shape_str(in.a.shape), in.k);
  in.R = in.a.shape[0];
  const Array<int64_t> idx = npy_as_int64(tensor(t, "m_indices", who), "input m_indices");
  require(idx.shape == Shape{in.R}, "{}: input m_indices has shape {}, violates [m_sum = {}]", who,
          shape_str(idx.shape), in.R);
  const int64_t bm = param_int(who, params, "block_m", 128);
  require(in.R % bm == 0, "{}: input a has m_sum = {} rows, violates m_sum % block_m = {} == 0 (every expert "
          "segment padded to the M block size)", who, in.R, bm);
  if (params.is_object() && params.contains("padding_rows")) {
    const nlohmann::json& p = params.at("padding_rows");
    require(p.is_string() && (p == "zero" || p == "unjudged"), "{}: param padding_rows = {} violates \"zero\" | "
            "\"unjudged\"", who, p.dump());
    in.padding_unjudged = p == "unjudged";
  }
  in.expert = idx.data;
  for (int64_t i = 0; i < in.R; ++i) {
    const int64_t v = idx.data[i], prev = i % bm == 0 ? v : idx.data[i - 1];
    require(v >= -1 && v < in.G, "{}: input m_indices[{}] = {} violates -1 <= m_indices < num_groups = {}", who, i, v,
            in.G);
    require(v == -1 || prev == v, "{}: input m_indices[{}] = {} follows {} in M block {} (rows {}..{}), violates one "
            "expert per block, its padding rows (-1) last (segments aligned to block_m = {})", who, i, v, prev, i / bm,
            i / bm * bm, i / bm * bm + bm - 1, bm);
  }
  return in;
}

namespace {

// d [R, n] (masked: [G, max_m, n]) at T: each row with an expert, sum_k a b with k ascending (stage 04's GEMM order,
// gemm_fixed_order, as a kernel's accumulator runs down k); others 0.
template <class T>
Tensors grouped(const GroupedIn& in) {
  Array<T> d(in.masked ? Shape{in.G, in.max_m, in.n} : Shape{in.R, in.n});
  std::fill(d.data.begin(), d.data.end(), T(0));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < in.R; ++i) {
    const int64_t e = in.expert[static_cast<size_t>(i)];
    if (e < 0) continue;
    std::vector<T> x(static_cast<size_t>(in.k)), w(x.size());
    std::copy_n(&in.a.data[i * in.k], in.k, x.begin());
    for (int64_t j = 0; j < in.n; ++j) {
      std::copy_n(&in.b.data[(e * in.n + j) * in.k], in.k, w.begin());
      d.data[i * in.n + j] = dot_fixed_order<T>(x.data(), w.data(), in.k);
    }
  }
  return {{"d", to_npy(d)}};
}

// A float64 candidate's allowance per element of d (Contract::fp64_bound): each valid row's dot product of float32
// values, the oracle's and the candidate's sums (core/fp64_bound.hpp, dot_f32_allowance); rows without an expert 0.
Tensors grouped_allowance(const GroupedIn& in) {
  Array<double> d(in.masked ? Shape{in.G, in.max_m, in.n} : Shape{in.R, in.n});
  for (int64_t i = 0; i < in.R; ++i) {
    const int64_t e = in.expert[static_cast<size_t>(i)];
    if (e < 0) continue;
    for (int64_t j = 0; j < in.n; ++j)
      d.data[i * in.n + j] = fp64::dot_f32_allowance(&in.a.data[i * in.k], 1, &in.b.data[(e * in.n + j) * in.k], 1, in.k);
  }
  return {{"d", to_npy(d)}};
}

}  // namespace

Contract grouped_contract(bool masked, bool fp8) {
  const std::string who = fp8 ? (masked ? kDeepGemmMaskedFp8 : kDeepGemmContiguousFp8)
                              : (masked ? kDeepGemmMasked : kDeepGemmContiguous);
  Contract c;
  c.stage = who;
  const std::string mrows = masked ? "[num_groups, max_m, k]" : "[m_sum, k]";
  c.inputs = {{"a", "<f4", mrows, masked ? "each expert's tokens, rows past masked_m[g] unused"
                                         : "the experts' tokens stacked along M, each segment padded to block_m"},
              {"b", "<f4", "[num_groups, n, k]", "the experts' weights, NT: D = A B^T"}};
  if (masked) {
    c.doc = "DeepGEMM's m_grouped_*_gemm_nt_masked (decode): stage 04's ragged dot with each expert's rows in its own "
            "[max_m, k] slab and a valid count masked_m (float32 values here)";
    c.inputs.push_back({"masked_m", "<i4|<i8", "[num_groups]", "valid rows of each group (0 <= masked_m <= max_m)"});
    c.params = {{"expected_m", "integer", "DeepGEMM's hint of the rows per group: accepted, changes nothing"}};
    c.outputs = {{"d", "<f8", "[num_groups, max_m, n]", "D[g, i] = A[g, i] B[g]^T for i < masked_m[g]; rows past it "
                  "not judged", Rule::max_abs, 2, "one scale per token row (a dot product per element)", false, ""}};
    c.outputs[0].slice_axes = 2;  // (g, i): one token row
  } else {
    c.doc = "DeepGEMM's m_grouped_*_gemm_nt_contiguous (prefill): stage 04's ragged dot with the experts' segments "
            "stacked along M, each padded to block_m, and a per-row group index (float32 values here)";
    c.inputs.push_back({"m_indices", "<i4|<i8", "[m_sum]", "expert of each row, -1 on padding rows"});
    c.params = {{"block_m", "integer", "the M block size every expert segment is padded to (default 128)"},
                {"padding_rows", "string", "\"zero\" (default: a's padding rows are 0, d zero-initialised, so d's "
                                           "padding rows must be 0) or \"unjudged\" (as DeepGEMM's tests)"}};
    c.outputs = {{"d", "<f8", "[m_sum, n]", "D[i] = A[i] B[m_indices[i]]^T on valid rows; padding rows 0 or not "
                  "judged (padding_rows)", Rule::max_abs, 2, "one scale per token row (a dot product per element)",
                  false, ""}};
    c.outputs[0].slice_axes = 1;  // one token row
  }
  c.oracle_doc = "each valid row's dot products at float64 of the float32 inputs, k ascending (gemm_fixed_order)";
  c.baseline_doc = "the same at float32";
  c.oracle = [who, masked](const Tensors& t, const nlohmann::json& p) { return grouped<double>(read(who, masked, t, p)); };
  c.baseline = [who, masked](const Tensors& t, const nlohmann::json& p, DType prec) {
    const GroupedIn in = read(who, masked, t, p);
    return prec == DType::F4 ? grouped<float>(in) : grouped<double>(in);
  };
  c.unjudged = [who, masked](const Tensors& t, const nlohmann::json& p, const std::string&) {
    const GroupedIn in = read(who, masked, t, p);
    std::vector<bool> skip;
    if (!masked && !in.padding_unjudged) return skip;
    skip.assign(static_cast<size_t>(in.R * in.n), false);
    for (int64_t i = 0; i < in.R; ++i)
      if (in.expert[static_cast<size_t>(i)] < 0) std::fill_n(skip.begin() + i * in.n, in.n, true);
    return skip;
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"deepgemm_calc_diff", layout_cos_diff(x, e)}};
  };
  if (!fp8)  // the FP8 forms are judged by stage 07's derived bound (Rule::bound) whatever the candidate's dtype
    c.fp64_bound = [who, masked](const Tensors& t, const nlohmann::json& p, const Tensors&) {
      return grouped_allowance(read(who, masked, t, p));
    };
  if (fp8) add_fp8(c, masked);
  return c;
}

}  // namespace ladder::moe::detail

namespace ladder::moe {
using detail::GroupedIn;
using detail::read;

Tensors deepgemm_contiguous_inputs(const DeepGemmSpec& s) {
  require(!s.group_m.empty() && s.n >= 1 && s.k >= 1 && s.block_m >= 1, "{}: spec violates num_groups, n, k, block_m "
          ">= 1", kDeepGemmContiguous);
  const int64_t G = static_cast<int64_t>(s.group_m.size());
  int64_t R = 0;
  for (int64_t m : s.group_m) {
    require(m >= 0, "{}: group_m = {} violates >= 0", kDeepGemmContiguous, m);
    R += (m + s.block_m - 1) / s.block_m * s.block_m;
  }
  Rng rng(s.seed);
  Array<float> a({R, s.k}), b({G, s.n, s.k});
  Array<int32_t> idx({R});
  std::fill(a.data.begin(), a.data.end(), 0.0f);
  std::fill(idx.data.begin(), idx.data.end(), -1);
  int64_t row = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = s.group_m[static_cast<size_t>(g)];
    for (int64_t i = row; i < row + m; ++i) {
      idx.data[i] = static_cast<int32_t>(g);
      for (int64_t c = 0; c < s.k; ++c) a.data[i * s.k + c] = static_cast<float>(rng.normal());
    }
    row += (m + s.block_m - 1) / s.block_m * s.block_m;
  }
  for (int64_t g = 0; g < G; ++g)  // experts of different magnitudes: a row given another expert's weights shows
    for (int64_t j = 0; j < s.n * s.k; ++j)
      b.data[g * s.n * s.k + j] = static_cast<float>(std::ldexp(rng.normal(), static_cast<int>(g % 3) - 1));
  return {{"a", to_npy(a)}, {"b", to_npy(b)}, {"m_indices", to_npy(idx)}};
}

Tensors deepgemm_masked_inputs(const DeepGemmSpec& s) {
  require(!s.group_m.empty() && s.n >= 1 && s.k >= 1 && s.max_m >= 0, "{}: spec violates num_groups, n, k >= 1, "
          "max_m >= 0", kDeepGemmMasked);
  const int64_t G = static_cast<int64_t>(s.group_m.size());
  const int64_t max_m = s.max_m > 0 ? s.max_m : *std::max_element(s.group_m.begin(), s.group_m.end()) + 5;
  Rng rng(s.seed);
  Array<float> a({G, max_m, s.k}), b({G, s.n, s.k});
  Array<int32_t> mm({G});
  for (int64_t g = 0; g < G; ++g) {
    const int64_t m = s.group_m[static_cast<size_t>(g)];
    require(m >= 0 && m <= max_m, "{}: group_m = {} violates 0 <= group_m <= max_m = {}", kDeepGemmMasked, m, max_m);
    mm.data[g] = static_cast<int32_t>(m);
  }
  for (float& x : a.data) x = static_cast<float>(rng.normal());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t j = 0; j < s.n * s.k; ++j)
      b.data[g * s.n * s.k + j] = static_cast<float>(std::ldexp(rng.normal(), static_cast<int>(g % 3) - 1));
  return {{"a", to_npy(a)}, {"b", to_npy(b)}, {"masked_m", to_npy(mm)}};
}

nlohmann::json deepgemm_params(const DeepGemmSpec& s, bool masked) {
  if (masked) {
    int64_t total = 0;
    for (int64_t m : s.group_m) total += m;
    return {{"expected_m", std::max<int64_t>(1, total / static_cast<int64_t>(s.group_m.size()))}};
  }
  return {{"block_m", s.block_m}, {"padding_rows", s.padding_rows}};
}

Tensors deepgemm_run_ragged(const std::string& layout, const Tensors& t, const nlohmann::json& params) {
  require(layout == kDeepGemmContiguous || layout == kDeepGemmMasked, "deepgemm_run_ragged: layout '{}' violates {} | "
          "{}", layout, kDeepGemmContiguous, kDeepGemmMasked);
  const bool masked = layout == kDeepGemmMasked;
  const GroupedIn in = read(layout, masked, t, params);
  // The rows of each expert gathered in expert order (a stable counting sort), the weights as ragged_dot's
  // rhs [G, k, n] (B^T per expert), group_sizes counted.
  std::vector<Index> sizes(static_cast<size_t>(in.G), 0);
  for (int64_t e : in.expert)
    if (e >= 0) ++sizes[static_cast<size_t>(e)];
  std::vector<int64_t> start(static_cast<size_t>(in.G), 0), order;
  for (int64_t g = 1; g < in.G; ++g) start[g] = start[g - 1] + sizes[g - 1];
  const int64_t m = start.back() + sizes.back();
  order.assign(static_cast<size_t>(m), 0);
  for (int64_t i = 0; i < in.R; ++i)
    if (const int64_t e = in.expert[static_cast<size_t>(i)]; e >= 0) order[static_cast<size_t>(start[e]++)] = i;
  std::vector<float> lhs(static_cast<size_t>(m * in.k)), rhs(static_cast<size_t>(in.G * in.k * in.n)),
      out(static_cast<size_t>(m * in.n));
  for (int64_t r = 0; r < m; ++r) std::copy_n(&in.a.data[order[r] * in.k], in.k, &lhs[r * in.k]);
  for (int64_t g = 0; g < in.G; ++g)
    for (int64_t j = 0; j < in.n; ++j)
      for (int64_t c = 0; c < in.k; ++c) rhs[(g * in.k + c) * in.n + j] = in.b.data[(g * in.n + j) * in.k + c];
  ragged_dot<float>(lhs.data(), m, in.k, rhs.data(), in.G, in.n, sizes.data(), out.data());
  Array<float> d(in.masked ? Shape{in.G, in.max_m, in.n} : Shape{in.R, in.n});
  std::fill(d.data.begin(), d.data.end(), 0.0f);
  for (int64_t r = 0; r < m; ++r) std::copy_n(&out[r * in.n], in.n, &d.data[order[r] * in.n]);
  return {{"d", to_npy(d)}};
}

Array<float> deepgemm_ragged_d(const std::string& layout, const Tensors& t, const nlohmann::json& params) {
  return from_npy<float>(deepgemm_run_ragged(layout, t, params).at("d"), "d");
}

Tensors deepgemm_with_ints(Tensors t, const std::string& name, const std::vector<int64_t>& v) {
  Array<int32_t> a({static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.data[i] = static_cast<int32_t>(v[i]);
  t[name] = to_npy(a);
  return t;
}

}  // namespace ladder::moe

namespace ladder::stage_records {

Contract contract_04_moe_deepgemm_contiguous() { return moe::detail::grouped_contract(false, false); }
Contract contract_04_moe_deepgemm_masked() { return moe::detail::grouped_contract(true, false); }
Contract contract_04_moe_deepgemm_contiguous_fp8() { return moe::detail::grouped_contract(false, true); }
Contract contract_04_moe_deepgemm_masked_fp8() { return moe::detail::grouped_contract(true, true); }

}  // namespace ladder::stage_records
