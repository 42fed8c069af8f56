// ref/src/04-moe/deepgemm_k_grouped_fp8.cpp -- the layout "04-moe/deepgemm_k_grouped_fp8": DeepGEMM's k-grouped GEMM
// of the MoE weight gradient (deepgemm_k_grouped.cpp: d[g] = c[g] + a[K_g]^T b[K_g], groups stacked along K) with FP8
// E4M3 values and per-channel scales along K, as DeepGEMM's k_grouped_fp8_gemm_tn_contiguous (SM100) and
// k_grouped_fp8_gemm_nt_contiguous (SM90) take them. The facts (DeepGEMM tests/generators.py
// generate_k_grouped_contiguous, deep_gemm/utils per_channel_cast_to_fp8, csrc/apis/layout.hpp
// transform_k_grouped_sf_into_required_layout, tests/test_layout.py test_k_grouped_sf_layout_kernels):
//   * a [sum(ks), m] and b [sum(ks), n] (MN-major: the TN kernel's operands) are cast by per_channel_cast_to_fp8:
//     the rows cut into blocks of 128 along K, one scale per (K block, column) = amax / 448 (or its UE8M0 power of
//     two), sf [sum(ks) / 128, m] (and [.., n]); the recipe is (1, 1, 128) for both operands ("1D1D": the kernel
//     asserts it), so every ks[g] is a multiple of 128 (k_alignment % 128 == 0) and no block spans two groups;
//   * SM90 takes the float32 scales MN-major and TMA-aligned (get_mn_major_tma_aligned_tensor: each scale row padded
//     to a multiple of 4 floats); here sa <f4 [sum(ks)/128, align4(m)], sb <f4 [sum(ks)/128, align4(n)], the padding
//     not read;
//   * SM100 takes UE8M0 packed per group (get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor; its test splits the
//     result into ceil(ks[g] / 512) rows per group and compares each with the non-grouped packing of that group's
//     scales): scales ue8m0_packed here is <i4 [sum_g ceil(ks[g]/512), align4(m)] (and n), group g's K blocks packed
//     four to an int32 on their own (pack_ue8m0, ladder/04-moe/deepgemm.hpp), the groups' rows stacked in the order
//     of ks; empty groups hold no rows.
// The rule: stage 07's FP8 recipe as in deepgemm_fp8.cpp. Per group, x = a[K_g]^T [m, K_g] in 1 x 128 tiles (scale
// sa[kb, i]) and w = b[K_g] [K_g, n] in 128 x 1 blocks (scale sb[kb, j]); the oracle is c + fp8_oracle (float64 of
// the dequantised values), and |d - oracle| <= fp8_bound(K_g, G) + gamma_{nch+1}(2^-24) (|c| + 2 G), nch the number of
// promotions: fp8_bound covers the accumulation (ladder/07-precision/fp8_block.hpp; its derivation needs only that a
// chunk never spans two scale blocks, true for 128 x 1 blocks), the second term the float32 addition of c, whether
// a kernel adds c at the end (one rounding of |c + y| <= |c| + G + fp8_bound) or starts its float32 accumulator from
// c (c one more term of the promoted sum). A scale of the wrong K block, scales read untransposed or a group
// boundary off by a row move terms by whole factors, far outside it.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "deepgemm_k_in.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/07-precision/fp8_block.hpp"

namespace ladder::moe {
namespace {

constexpr const char* kFp8KWho = "04-moe/deepgemm_k_grouped_fp8";

struct KF {
  detail::KIn k;
  int64_t KB = 0, lda = 0, ldb = 0;
  Array<float> sa, sb;  // [KB, lda], [KB, ldb]: the scale of K block kb (rows 128 kb ..) for column i (j)
};

std::string scale_form(const nlohmann::json& p) {
  if (!p.is_object() || !p.contains("scales")) return "fp32";
  const nlohmann::json& s = p.at("scales");
  require(s.is_string() && (s == "fp32" || s == "ue8m0" || s == "ue8m0_packed"), "{}: param scales = {} violates "
          "\"fp32\" | \"ue8m0\" | \"ue8m0_packed\"", kFp8KWho, s.dump());
  return s.get<std::string>();
}

// scales ue8m0_packed: <i4 [sum_g ceil(ks[g]/512), align4(mn)] -> float32 [KB, align4(mn)], exactly.
Array<float> unpack_groups(const NpyData& d, const detail::KIn& in, int64_t mn, const char* name) {
  require(d.dtype == DType::I4, "{}: input {} is {}, violates <i4 (param scales ue8m0_packed: four UE8M0 bytes to an "
          "int32)", kFp8KWho, name, dtype_name(d.dtype));
  const Array<int32_t> p = from_npy<int32_t>(d, name);
  const int64_t ld = align4(mn);
  int64_t rows = 0;
  for (int64_t k : in.ks) rows += (k / 128 + 3) / 4;
  require(p.shape == (Shape{rows, ld}), "{}: input {} has shape {}, violates [sum_g ceil(ks[g]/512), align4({})] = {} "
          "(each group's K blocks packed on their own)", kFp8KWho, name, shape_str(p.shape), mn, shape_str(Shape{rows, ld}));
  Array<float> out({in.K / 128, ld});
  int64_t row = 0, kb0 = 0;
  for (int64_t g = 0; g < in.G; ++g) {
    const int64_t kbg = in.ks[g] / 128, w = (kbg + 3) / 4;
    if (kbg == 0) continue;
    Array<int32_t> slab({1, w, ld});
    std::copy_n(&p.data[row * ld], w * ld, slab.data.begin());
    const Array<float> u = unpack_ue8m0(slab, kbg, fmt::format("input {} (group {})", name, g));
    for (int64_t i = 0; i < ld; ++i)
      for (int64_t kb = 0; kb < kbg; ++kb) out.data[(kb0 + kb) * ld + i] = u.data[i * kbg + kb];
    row += w, kb0 += kbg;
  }
  return out;
}

KF read_fp8_k(const Tensors& t, const nlohmann::json& params) {
  KF f;
  f.k = detail::read_k(kFp8KWho, t, params);
  const detail::KIn& in = f.k;
  for (int64_t g = 0; g < in.G; ++g)
    require(in.ks[g] % 128 == 0, "{}: input ks[{}] = {} violates a multiple of 128 (one scale per 128 rows of K; "
            "DeepGEMM's FP8 k-grouped kernels assert k_alignment % 128 == 0)", kFp8KWho, g, in.ks[g]);
  f.KB = in.K / 128, f.lda = align4(in.m), f.ldb = align4(in.n);
  const std::string form = scale_form(params);
  if (form == "ue8m0_packed") {
    f.sa = unpack_groups(tensor(t, "sa", kFp8KWho), in, in.m, "sa");
    f.sb = unpack_groups(tensor(t, "sb", kFp8KWho), in, in.n, "sb");
  } else {
    f.sa = from_npy<float>(tensor(t, "sa", kFp8KWho), "input sa");
    f.sb = from_npy<float>(tensor(t, "sb", kFp8KWho), "input sb");
    for (const auto& [name, s, ld] : {std::tuple{"sa", &f.sa, f.lda}, std::tuple{"sb", &f.sb, f.ldb}})
      require(s->shape == (Shape{f.KB, ld}), "{}: input {} has shape {}, violates [sum(ks)/128, align4({})] = {} (one "
              "scale per 128 rows of K per column, MN-major, each row padded to a multiple of 4 for TMA)", kFp8KWho, name,
              shape_str(s->shape), name[1] == 'a' ? "m" : "n", shape_str(Shape{f.KB, ld}));
  }
  for (const auto& [name, s, mn, ld] : {std::tuple{"sa", &f.sa, in.m, f.lda}, std::tuple{"sb", &f.sb, in.n, f.ldb}})
    for (int64_t kb = 0; kb < f.KB; ++kb)
      for (int64_t i = 0; i < mn; ++i) {
        const float v = s->data[kb * ld + i];
        int e = 0;
        require(std::isfinite(v) && v > 0 && (form == "fp32" || std::frexp(v, &e) == 0.5f), "{}: input {}[{}, {}] = {} "
                "violates a finite scale > 0{}", kFp8KWho, name, kb, i, v, form == "fp32" ? "" : ", a power of two (UE8M0)");
      }
  for (const auto& [name, arr] : {std::pair{"a", &in.a}, std::pair{"b", &in.b}})
    for (size_t i = 0; i < arr->data.size(); ++i)
      require(formats::from_e4m3(formats::to_e4m3(arr->data[i])) == arr->data[i], "{}: input {}[{}] = {} violates an "
              "E4M3 value (the FP8 codes as float32)", kFp8KWho, name, i, arr->data[i]);
  return f;
}

// Group g in stage 07's types: x = a[K_g]^T [m, K_g] in 1 x 128 tiles, w = b[K_g] [K_g, n] in 128 x 1 blocks.
struct Ops {
  quant::Quantized xq, wq;
};
Ops ops(const KF& f, int64_t g) {
  const detail::KIn& in = f.k;
  const int64_t kg = in.ks[g], s0 = in.start[g], kbg = kg / 128, kb0 = s0 / 128;
  Ops o;
  o.xq.elem = o.wq.elem = quant::Elem::e4m3;
  o.xq.rows = in.m, o.xq.cols = kg, o.xq.block_rows = 1, o.xq.block_cols = 128;
  o.wq.rows = kg, o.wq.cols = in.n, o.wq.block_rows = 128, o.wq.block_cols = 1;
  o.xq.codes.resize(static_cast<size_t>(in.m * kg));
  o.wq.codes.resize(static_cast<size_t>(kg * in.n));
  o.xq.scales = Mat<float>(in.m, kbg);
  o.wq.scales = Mat<float>(kbg, in.n);
  for (int64_t r = 0; r < kg; ++r) {
    for (int64_t i = 0; i < in.m; ++i) o.xq.codes[static_cast<size_t>(i * kg + r)] = formats::to_e4m3(in.a.data[(s0 + r) * in.m + i]);
    for (int64_t j = 0; j < in.n; ++j) o.wq.codes[static_cast<size_t>(r * in.n + j)] = formats::to_e4m3(in.b.data[(s0 + r) * in.n + j]);
  }
  for (int64_t kb = 0; kb < kbg; ++kb) {
    for (int64_t i = 0; i < in.m; ++i) o.xq.scales(i, kb) = f.sa.data[(kb0 + kb) * f.lda + i];
    for (int64_t j = 0; j < in.n; ++j) o.wq.scales(kb, j) = f.sb.data[(kb0 + kb) * f.ldb + j];
  }
  return o;
}

float c_at(const detail::KIn& in, int64_t g, int64_t i, int64_t j) {
  return in.c.data.empty() ? 0.0f : in.c.data[(g * in.m + i) * in.n + j];
}

// Per group: fn(ops, g) -> [m x n] (anything with (i, j)), written into d [G, m, n] at T, plus c.
template <class T, class Fn>
Array<T> per_group(const KF& f, const Fn& fn) {
  const detail::KIn& in = f.k;
  Array<T> d({in.G, in.m, in.n});
  for (int64_t g = 0; g < in.G; ++g) {
    if (in.ks[g] == 0) {
      for (int64_t i = 0; i < in.m; ++i)
        for (int64_t j = 0; j < in.n; ++j) d.data[(g * in.m + i) * in.n + j] = static_cast<T>(fn.empty(in, g, i, j));
      continue;
    }
    const auto y = fn(ops(f, g), g);
    for (int64_t i = 0; i < in.m; ++i)
      for (int64_t j = 0; j < in.n; ++j) d.data[(g * in.m + i) * in.n + j] = static_cast<T>(fn.plus_c(y(i, j), g, i, j));
  }
  return d;
}

struct Oracle {  // d = c + o in float64
  const detail::KIn* in;
  Mat<double> operator()(const Ops& o, int64_t) const { return precision::fp8_oracle(o.xq, o.wq).y; }
  double plus_c(double y, int64_t g, int64_t i, int64_t j) const { return static_cast<double>(c_at(*in, g, i, j)) + y; }
  double empty(const detail::KIn& k, int64_t g, int64_t i, int64_t j) const { return c_at(k, g, i, j); }
};

struct BlockDotRung {  // stage 07's fp8_block_dot per element (acc_bits, promoted every 128), then fl32(c + y)
  const detail::KIn* in;
  precision::Fp8Recipe r;
  Mat<float> operator()(const Ops& o, int64_t) const {
    const int64_t m = o.xq.rows, k = o.xq.cols, n = o.wq.cols, kb = (k + 127) / 128;
    std::vector<uint8_t> wt(static_cast<size_t>(n * k));
    std::vector<float> xs(static_cast<size_t>(m * kb)), ws(static_cast<size_t>(n * kb));
    for (int64_t c = 0; c < k; ++c)
      for (int64_t j = 0; j < n; ++j) wt[static_cast<size_t>(j * k + c)] = o.wq.codes[static_cast<size_t>(c * n + j)];
    for (int64_t b = 0; b < kb; ++b) {
      for (int64_t i = 0; i < m; ++i) xs[static_cast<size_t>(i * kb + b)] = o.xq.scales(i, b);
      for (int64_t j = 0; j < n; ++j) ws[static_cast<size_t>(j * kb + b)] = o.wq.scales(b, j);
    }
    Mat<float> y(m, n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        y(i, j) = precision::fp8_block_dot(&o.xq.codes[static_cast<size_t>(i * k)], &xs[static_cast<size_t>(i * kb)],
                                           &wt[static_cast<size_t>(j * k)], &ws[static_cast<size_t>(j * kb)], k, r);
    return y;
  }
  float plus_c(float y, int64_t g, int64_t i, int64_t j) const { return c_at(*in, g, i, j) + y; }
  float empty(const detail::KIn& k, int64_t g, int64_t i, int64_t j) const { return c_at(k, g, i, j); }
};

}  // namespace

Tensors deepgemm_k_grouped_fp8_rung(const Tensors& t, const nlohmann::json& params, int acc_bits) {
  const KF f = read_fp8_k(t, params);
  BlockDotRung rung{&f.k, {}};
  rung.r.acc_bits = acc_bits;
  return {{"d", to_npy(per_group<float>(f, rung))}};
}

Tensors deepgemm_k_grouped_fp8_run(const Tensors& t, const nlohmann::json& params, KFp8Bug bug) {
  KF f = read_fp8_k(t, params);
  detail::KIn& in = f.k;
  if (bug == KFp8Bug::boundary_shift) {  // the boundary between the first two non-empty groups one row late
    std::vector<int64_t> full;
    for (int64_t g = 0; g < in.G; ++g)
      if (in.ks[g] > 0) full.push_back(g);
    require(full.size() >= 2, "deepgemm_k_grouped_fp8_run: boundary_shift needs two non-empty groups");
    in.ks[full[0]] += 1, in.ks[full[1]] -= 1;
    for (int64_t g = 1; g < in.G; ++g) in.start[g] = in.start[g - 1] + in.ks[g - 1];
  }
  auto scale = [&](const Array<float>& s, int64_t ld, int64_t r, int64_t col) {
    int64_t kb = r / 128;
    if (bug == KFp8Bug::neighbour_block_scale && (kb ^ 1) < f.KB) kb ^= 1;  // K blocks 0 <-> 1, 2 <-> 3, ..
    return bug == KFp8Bug::scales_untransposed ? s.data[col * f.KB + kb] : s.data[kb * ld + col];
  };
  // The dequantised values in float32 (fl(q s)), each group's rows summed in descending order, then c added.
  Array<float> d({in.G, in.m, in.n});
  for (int64_t g = 0; g < in.G; ++g)
    for (int64_t i = 0; i < in.m; ++i)
      for (int64_t j = 0; j < in.n; ++j) {
        float acc = 0.0f;
        for (int64_t r = in.start[g] + in.ks[g] - 1; r >= in.start[g]; --r)
          acc += (in.a.data[r * in.m + i] * scale(f.sa, f.lda, r, i)) * (in.b.data[r * in.n + j] * scale(f.sb, f.ldb, r, j));
        d.data[(g * in.m + i) * in.n + j] = c_at(in, g, i, j) + acc;
      }
  return {{"d", to_npy(d)}};
}

Tensors deepgemm_k_grouped_fp8_inputs(const DeepGemmKSpec& s) {
  require(s.scales == "fp32" || s.scales == "ue8m0" || s.scales == "ue8m0_packed", "{}: scales = {} violates fp32 | "
          "ue8m0 | ue8m0_packed", kFp8KWho, s.scales);
  for (int64_t k : s.ks) require(k % 128 == 0, "{}: ks = {} violates a multiple of 128 (the scale block along K)", kFp8KWho, k);
  Tensors t = deepgemm_k_grouped_inputs(s);  // the float32 case: each group at its own magnitude
  const quant::ScaleRule rule = s.scales == "fp32" ? quant::ScaleRule::amax : quant::ScaleRule::pow2;
  const int64_t K = t.at("a").shape[0], KB = K / 128;
  std::map<std::string, Array<float>> scales;
  for (const char* name : {"a", "b"}) {
    Array<float> x = from_npy<float>(t.at(name), name);
    const int64_t mn = x.shape[1], ld = align4(mn);
    Mat<float> v(K, mn);
    for (int64_t r = 0; r < K; ++r)  // and each K block at its own magnitude: a scale of the wrong block shows
      for (int64_t i = 0; i < mn; ++i) v(r, i) = std::ldexp(x.data[r * mn + i], static_cast<int>((r / 128) % 2) * 3);
    const quant::Quantized q = quant::quantize(v, quant::Elem::e4m3, 128, 1, rule);  // per_channel_cast_to_fp8
    Array<float> sf({KB, ld});
    std::fill(sf.data.begin(), sf.data.end(), 0.0f);  // the TMA padding: not read
    for (int64_t r = 0; r < K; ++r)
      for (int64_t i = 0; i < mn; ++i) x.data[r * mn + i] = q.element(r, i);
    for (int64_t kb = 0; kb < KB; ++kb)
      for (int64_t i = 0; i < mn; ++i) sf.data[kb * ld + i] = q.scales(kb, i);
    t[name] = to_npy(x);
    scales[name] = sf;
  }
  for (const auto& [name, sname] : {std::pair{"a", "sa"}, std::pair{"b", "sb"}}) {
    const Array<float>& sf = scales.at(name);
    if (s.scales != "ue8m0_packed") {
      t[sname] = to_npy(sf);
      continue;
    }
    const int64_t mn = t.at(name).shape[1], ld = sf.shape[1];
    std::vector<int32_t> rows;
    int64_t kb0 = 0;
    for (int64_t k : s.ks) {  // each group packed on its own, its rows stacked in the order of ks
      const int64_t kbg = k / 128;
      if (kbg == 0) continue;
      Array<float> g({1, mn, kbg});
      for (int64_t i = 0; i < mn; ++i)
        for (int64_t kb = 0; kb < kbg; ++kb) g.data[i * kbg + kb] = sf.data[(kb0 + kb) * ld + i];
      const Array<int32_t> p = pack_ue8m0(g);
      rows.insert(rows.end(), p.data.begin(), p.data.end());
      kb0 += kbg;
    }
    Array<int32_t> packed({static_cast<int64_t>(rows.size()) / ld, ld});
    packed.data = rows;
    t[sname] = to_npy(packed);
  }
  return t;
}

nlohmann::json deepgemm_k_grouped_fp8_params(const DeepGemmKSpec& s) {
  return {{"k_alignment", s.k_alignment}, {"scales", s.scales}};
}

}  // namespace ladder::moe

namespace ladder::stage_records {

Contract contract_04_moe_deepgemm_k_grouped_fp8() {
  using namespace moe;
  Contract c;
  c.stage = kDeepGemmKGroupedFp8;
  c.doc = "DeepGEMM's k_grouped_fp8_gemm_{tn,nt}_contiguous (MoE weight gradient): groups along K, d[g] = c[g] + "
          "a[K_g]^T b[K_g] with E4M3 a, b and per-channel scales per 128 rows of K (recipe 1, 1, 128)";
  c.inputs = {{"a", "<f4", "[sum(ks), m]", "the groups' K segments of A^T stacked in the order of ks (E4M3 values as "
               "float32)"},
              {"b", "<f4", "[sum(ks), n]", "the groups' K segments of B stacked the same way (E4M3 values as float32)"},
              {"ks", "<i4|<i8", "[num_groups]", "each group's K, a multiple of k_alignment and of 128 (0: empty group)"},
              {"c", "<f4", "[num_groups, m, n]", "the float32 accumulator (absent: d = a^T b per group)", true},
              {"sa", "<f4|<i4", "[sum(ks)/128, align4(m)]", "a's scales, sa[kb, i] for rows 128 kb .. 128 kb + 127 of "
               "column i, MN-major, TMA-aligned (<i4 [sum_g ceil(ks[g]/512), align4(m)]: scales ue8m0_packed, per group)"},
              {"sb", "<f4|<i4", "[sum(ks)/128, align4(n)]", "b's scales, the same layout over n"}};
  c.params = {{"k_alignment", "integer", "every ks a multiple of it (default 128)"},
              {"scales", "string", "\"fp32\" (default; SM90), \"ue8m0\" (every scale a power of two) or "
                                   "\"ue8m0_packed\" (SM100: each group's K blocks four UE8M0 bytes to an int32)"}};
  c.outputs = {{"d", "<f8", "[num_groups, m, n]", "d[g] = c[g] + sum over group g's rows r of the dequantised "
                "a[r]^T b[r]", Rule::bound, 2, "a declared low-precision recipe (DeepSeek-V3's FP8 GEMM, stage 07): "
                "each element within fp8_bound plus the float32 addition of c", false, ""}};
  c.outputs[0].slice_axes = 2;  // (g, i)
  c.oracle_doc = "per group, stage 07's fp8_oracle (sum at float64 of the dequantised products), plus c";
  c.baseline_doc = "stage 07's fp8_block_dot (14-bit accumulator, promoted every 128) per element, plus c in float32";
  c.oracle = [](const Tensors& t, const nlohmann::json& p) {
    const KF f = read_fp8_k(t, p);
    return Tensors{{"d", to_npy(per_group<double>(f, Oracle{&f.k}))}};
  };
  c.baseline = [](const Tensors& t, const nlohmann::json& p, DType) { return deepgemm_k_grouped_fp8_rung(t, p, 14); };
  c.outputs[0].bound = [](const Tensors& t, const nlohmann::json& p, const Tensors&) {
    const KF f = read_fp8_k(t, p);
    const moe::detail::KIn& in = f.k;
    const precision::Fp8Recipe r;
    Array<double> b({in.G, in.m, in.n});
    for (int64_t g = 0; g < in.G; ++g) {
      Mat<double> gs = Mat<double>::Zero(in.m, in.n);
      if (in.ks[g] > 0) {
        const Ops o = ops(f, g);
        gs = precision::fp8_oracle(o.xq, o.wq).g;
      }
      const double outer = precision::gamma_n(static_cast<double>(precision::fp8_chunks(in.ks[g], r.nc) + 1), 0x1p-24);
      for (int64_t i = 0; i < in.m; ++i)
        for (int64_t j = 0; j < in.n; ++j)
          b.data[(g * in.m + i) * in.n + j] = precision::fp8_bound(r, in.ks[g], gs(i, j)) +
                                              outer * (std::fabs(c_at(in, g, i, j)) + 2 * gs(i, j));
    }
    return b;
  };
  c.report_metrics = [](const std::string&, const Array<double>& e, const Array<double>& x) {
    return std::map<std::string, double>{{"deepgemm_calc_diff", layout_cos_diff(x, e)}};
  };
  return c;
}

}  // namespace ladder::stage_records
