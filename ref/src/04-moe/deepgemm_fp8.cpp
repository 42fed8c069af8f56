// ref/src/04-moe/deepgemm_fp8.cpp -- the layouts "04-moe/deepgemm_contiguous_fp8" and "04-moe/deepgemm_masked_fp8":
// DeepGEMM's grouped layouts (deepgemm.cpp) with E4M3 values and DeepSeek-V3's block scales (the facts:
// ladder/04-moe/deepgemm.hpp). Stage 07's FP8 block-scaled recipe is the arithmetic (ladder/07-precision/
// fp8_block.hpp): per expert, the rows of a as 1 x 128 tiles (codes + the scales read through the transposed,
// aligned sa) and B[e]^T as 128 x 128 blocks; the oracle is fp8_oracle (sum_k xh wh in float64 of the dequantised
// values) and the rule is Rule::bound with fp8_bound of the default recipe (a 14-bit accumulator promoted to float32
// every N_C = 128, DeepSeek-V3 §3.3 -- DeepGEMM's SM90 kernels promote so): a kernel with that accumulator or a wider
// one, in any order, passes; a scale from the wrong block or read untransposed moves whole chunks by a ratio of
// scales, far outside it. Padding rows and rows past masked_m as in the f32 layouts (their bound is 0: the oracle
// there is 0 and so is every term).
#include <fmt/format.h>

#include <cmath>

#include "deepgemm_in.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/07-precision/fp8_block.hpp"

namespace ladder::moe::detail {
namespace {

struct Fp8In {
  GroupedIn g;
  int64_t KB = 0, NB = 0, ld = 0;  // k blocks, n blocks, sa's aligned row length
  Array<float> sa, sb;
};


// scales = "ue8m0_packed": sa, sb as SM100 takes them (ladder/04-moe/deepgemm.hpp), unpacked exactly into the fp32
// forms [(G,) KB, ld] and [G, NB, KB]; the weight scales must repeat one value over each 128-row block.
void unpack_scales(const std::string& who, bool masked, const Tensors& t, Fp8In& f) {
  const GroupedIn& g = f.g;
  const NpyData& pa = tensor(t, "sa", who);
  const NpyData& pb = tensor(t, "sb", who);
  require(pa.dtype == DType::I4 && pb.dtype == DType::I4, "{}: inputs sa, sb are {}, {}, violate <i4 (param scales "
          "ue8m0_packed: four UE8M0 bytes to an int32)", who, dtype_name(pa.dtype), dtype_name(pb.dtype));
  Array<int32_t> a = from_npy<int32_t>(pa, "input sa");
  const Array<int32_t> b = from_npy<int32_t>(pb, "input sb");
  const int64_t W = (f.KB + 3) / 4, nld = align4(g.n);
  const Shape wa = masked ? Shape{g.G, W, f.ld} : Shape{W, f.ld};
  require(a.shape == wa, "{}: input sa has shape {}, violates {} (packed: [(num_groups,) ceil(k/128/4), align4(rows)])",
          who, shape_str(a.shape), shape_str(wa));
  require(b.shape == (Shape{g.G, W, nld}), "{}: input sb has shape {}, violates [num_groups, ceil(k/128/4), align4(n)] "
          "= {} (packed, per row)", who, shape_str(b.shape), shape_str(Shape{g.G, W, nld}));
  if (!masked) a.shape = {1, W, f.ld};
  const Array<float> ua = unpack_ue8m0(a, f.KB, "input sa"), ub = unpack_ue8m0(b, f.KB, "input sb");
  const int64_t slabs = masked ? g.G : 1;
  f.sa = Array<float>(masked ? Shape{g.G, f.KB, f.ld} : Shape{f.KB, f.ld});
  for (int64_t q = 0; q < slabs; ++q)
    for (int64_t i = 0; i < f.ld; ++i)
      for (int64_t kb = 0; kb < f.KB; ++kb) f.sa.data[(q * f.KB + kb) * f.ld + i] = ua.data[(q * f.ld + i) * f.KB + kb];
  f.sb = Array<float>({g.G, f.NB, f.KB});
  for (int64_t e = 0; e < g.G; ++e)
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t kb = 0; kb < f.KB; ++kb) {
        const float v = ub.data[(e * nld + j) * f.KB + kb];
        float& blk = f.sb.data[(e * f.NB + j / 128) * f.KB + kb];
        require(j % 128 == 0 || v == blk, "{}: input sb row {} of group {} has k block {}'s scale {}, violates the "
                "scale of its 128 x 128 block ({}; ladder's recipe has one weight scale per block)", who, j, e, kb, v, blk);
        blk = v;
      }
}

Fp8In read_fp8(const std::string& who, bool masked, const Tensors& t, const nlohmann::json& params) {
  Fp8In f;
  f.g = read(who, masked, t, params);
  const GroupedIn& g = f.g;
  f.KB = (g.k + 127) / 128, f.NB = (g.n + 127) / 128, f.ld = align4(masked ? g.max_m : g.R);
  std::string form = "fp32";
  if (params.is_object() && params.contains("scales")) {
    const nlohmann::json& p = params.at("scales");
    require(p.is_string() && (p == "fp32" || p == "ue8m0" || p == "ue8m0_packed"), "{}: param scales = {} violates "
            "\"fp32\" | \"ue8m0\" | \"ue8m0_packed\"", who, p.dump());
    form = p.get<std::string>();
  }
  const bool ue8m0 = form != "fp32";
  if (form == "ue8m0_packed") {
    unpack_scales(who, masked, t, f);
  } else {
    f.sa = from_npy<float>(tensor(t, "sa", who), "input sa");
    f.sb = from_npy<float>(tensor(t, "sb", who), "input sb");
  }
  const Shape want = masked ? Shape{g.G, f.KB, f.ld} : Shape{f.KB, f.ld};
  require(f.sa.shape == want, "{}: input sa has shape {}, violates {} (the activation scales transposed, MN-major, "
          "rows padded to a multiple of 4 for TMA)", who, shape_str(f.sa.shape), shape_str(want));
  require(f.sb.shape == (Shape{g.G, f.NB, f.KB}), "{}: input sb has shape {}, violates [num_groups, ceil(n/128), "
          "ceil(k/128)] = {}", who, shape_str(f.sb.shape), shape_str(Shape{g.G, f.NB, f.KB}));
  auto scale_ok = [&](const char* name, size_t i, float s) {
    int e = 0;
    require(std::isfinite(s) && s > 0 && (!ue8m0 || std::frexp(s, &e) == 0.5f), "{}: input {}[{}] = {} violates a "
            "finite scale > 0{}", who, name, i, s, ue8m0 ? ", a power of two (scales ue8m0)" : "");
  };
  const int64_t rows = masked ? g.max_m : g.R, groups = masked ? g.G : 1;
  for (int64_t q = 0; q < groups * f.KB; ++q)
    for (int64_t r = 0; r < rows; ++r) scale_ok("sa", static_cast<size_t>(q * f.ld + r), f.sa.data[q * f.ld + r]);
  for (size_t i = 0; i < f.sb.data.size(); ++i) scale_ok("sb", i, f.sb.data[i]);
  for (const auto& [name, arr] : {std::pair{"a", &g.a}, std::pair{"b", &g.b}})
    for (size_t i = 0; i < arr->data.size(); ++i)
      require(formats::from_e4m3(formats::to_e4m3(arr->data[i])) == arr->data[i], "{}: input {}[{}] = {} violates "
              "an E4M3 value (the FP8 codes as float32)", who, name, i, arr->data[i]);
  return f;
}

// Expert e's operands in stage 07's types: its rows of a as 1 x 128 tiles, B[e]^T [k, n] as 128 x 128 blocks.
struct Ops {
  std::vector<int64_t> rows;
  quant::Quantized xq, wq;
};
Ops ops(const Fp8In& f, int64_t e) {
  const GroupedIn& g = f.g;
  Ops o;
  for (int64_t i = 0; i < g.R; ++i)
    if (g.expert[static_cast<size_t>(i)] == e) o.rows.push_back(i);
  const int64_t m = static_cast<int64_t>(o.rows.size());
  o.xq.elem = o.wq.elem = quant::Elem::e4m3;
  o.xq.rows = m, o.xq.cols = g.k, o.xq.block_rows = 1, o.xq.block_cols = 128;
  o.xq.codes.resize(static_cast<size_t>(m * g.k));
  o.xq.scales = Mat<float>(m, f.KB);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t i = o.rows[static_cast<size_t>(r)];
    for (int64_t c = 0; c < g.k; ++c) o.xq.codes[static_cast<size_t>(r * g.k + c)] = formats::to_e4m3(g.a.data[i * g.k + c]);
    for (int64_t kb = 0; kb < f.KB; ++kb)  // sa[kb, i] (masked: sa[g, kb, i - g max_m])
      o.xq.scales(r, kb) = g.masked ? f.sa.data[((i / g.max_m) * f.KB + kb) * f.ld + i % g.max_m] : f.sa.data[kb * f.ld + i];
  }
  o.wq.rows = g.k, o.wq.cols = g.n, o.wq.block_rows = o.wq.block_cols = 128;
  o.wq.codes.resize(static_cast<size_t>(g.k * g.n));
  o.wq.scales = Mat<float>(f.KB, f.NB);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t c = 0; c < g.k; ++c) o.wq.codes[static_cast<size_t>(c * g.n + j)] = formats::to_e4m3(g.b.data[(e * g.n + j) * g.k + c]);
  for (int64_t kb = 0; kb < f.KB; ++kb)
    for (int64_t nb = 0; nb < f.NB; ++nb) o.wq.scales(kb, nb) = f.sb.data[(e * f.NB + nb) * f.KB + kb];
  return o;
}

// d of the layout's shape, each expert's rows from fn(ops) -> [rows x n] (anything with (r, j)).
template <class T, class Fn>
Array<T> per_expert(const Fp8In& f, const Fn& fn) {
  const GroupedIn& g = f.g;
  Array<T> d(g.masked ? Shape{g.G, g.max_m, g.n} : Shape{g.R, g.n});
  std::fill(d.data.begin(), d.data.end(), T(0));
  for (int64_t e = 0; e < g.G; ++e) {
    const Ops o = ops(f, e);
    if (o.rows.empty()) continue;
    const auto y = fn(o);
    for (size_t r = 0; r < o.rows.size(); ++r)
      for (int64_t j = 0; j < g.n; ++j) d.data[o.rows[r] * g.n + j] = static_cast<T>(y(static_cast<int64_t>(r), j));
  }
  return d;
}

}  // namespace

void add_fp8(Contract& c, bool masked) {
  const std::string who = c.stage;
  c.doc += "; FP8: E4M3 values with 1 x 128 activation and 128 x 128 weight scales (fp32 or UE8M0)";
  c.inputs[0].doc += " (E4M3 values as float32)";
  c.inputs[1].doc += " (E4M3 values as float32)";
  c.inputs.push_back({"sa", "<f4|<i4", masked ? "[num_groups, ceil(k/128), align4(max_m)]" : "[ceil(k/128), align4(m_sum)]",
                      "activation scales, one per 1 x 128 tile, transposed (MN-major) and TMA-aligned (<i4 [.., ceil(k/128/4), ..]: "
                      "scales ue8m0_packed)"});
  c.inputs.push_back({"sb", "<f4|<i4", "[num_groups, ceil(n/128), ceil(k/128)]", "weight scales, one per 128 x 128 "
                      "block (<i4 [num_groups, ceil(k/128/4), align4(n)] per row: scales ue8m0_packed)"});
  c.params.push_back({"scales", "string", "\"fp32\" (default), \"ue8m0\" (every scale a power of two) or "
                      "\"ue8m0_packed\" (SM100: four UE8M0 bytes to an int32, k packed, MN-major)"});
  OutputSpec& d = c.outputs[0];
  d.rule = Rule::bound;
  d.why = "a declared low-precision recipe (DeepSeek-V3's FP8 block-scaled GEMM, stage 07): each element within "
          "fp8_bound, derived from the accumulator and promotion interval";
  c.oracle_doc = "stage 07's fp8_oracle per expert: sum_k xh wh at float64 of the dequantised values";
  c.baseline_doc = "stage 07's fp8_block rung (14-bit accumulator, promoted every 128) per expert";
  c.oracle = [who, masked](const Tensors& t, const nlohmann::json& p) {
    const Fp8In f = read_fp8(who, masked, t, p);
    return Tensors{{"d", to_npy(per_expert<double>(f, [](const Ops& o) { return precision::fp8_oracle(o.xq, o.wq).y; }))}};
  };
  c.baseline = [who, masked](const Tensors& t, const nlohmann::json& p, DType) {
    return deepgemm_run_fp8(who, t, p);
  };
  d.bound = [who, masked](const Tensors& t, const nlohmann::json& p, const Tensors&) {
    const Fp8In f = read_fp8(who, masked, t, p);
    const precision::Fp8Recipe r;
    const Array<double> g = per_expert<double>(f, [](const Ops& o) { return precision::fp8_oracle(o.xq, o.wq).g; });
    Array<double> b(g.shape);
    for (size_t i = 0; i < g.data.size(); ++i) b.data[i] = precision::fp8_bound(r, f.g.k, g.data[i]);
    return b;
  };
}

}  // namespace ladder::moe::detail

namespace ladder::moe {

Tensors deepgemm_run_fp8(const std::string& layout, const Tensors& t, const nlohmann::json& params, int acc_bits) {
  require(layout == kDeepGemmContiguousFp8 || layout == kDeepGemmMaskedFp8, "deepgemm_run_fp8: layout '{}' violates "
          "{} | {}", layout, kDeepGemmContiguousFp8, kDeepGemmMaskedFp8);
  const detail::Fp8In f = detail::read_fp8(layout, layout == kDeepGemmMaskedFp8, t, params);
  precision::Fp8Recipe r;
  r.acc_bits = acc_bits;
  return {{"d", to_npy(detail::per_expert<float>(f, [&](const detail::Ops& o) {
             return precision::fp8_block_product(o.xq, o.wq, r);
           }))}};
}

Tensors deepgemm_fp8_inputs(const DeepGemmSpec& s, bool masked) {
  Tensors t = masked ? deepgemm_masked_inputs(s) : deepgemm_contiguous_inputs(s);
  const quant::ScaleRule rule = s.scales == "fp32" ? quant::ScaleRule::amax : quant::ScaleRule::pow2;
  require(s.scales == "fp32" || s.scales == "ue8m0" || s.scales == "ue8m0_packed", "deepgemm: scales = {} violates "
          "fp32 | ue8m0 | ue8m0_packed", s.scales);
  Array<float> a = from_npy<float>(t.at("a"), "a"), b = from_npy<float>(t.at("b"), "b");
  const int64_t k = s.k, n = s.n, G = b.shape[0], KB = (k + 127) / 128, NB = (n + 127) / 128;
  const int64_t slabs = masked ? G : 1, rows = static_cast<int64_t>(a.data.size()) / k / slabs, ld = align4(rows);
  for (int64_t i = 0; i < slabs * rows; ++i)  // each 128-column block of k at its own magnitude
    for (int64_t c = 0; c < k; ++c) a.data[i * k + c] = std::ldexp(a.data[i * k + c], static_cast<int>((c / 128) % 3) * 2 - 2);
  Array<float> sa(masked ? Shape{G, KB, ld} : Shape{KB, ld}), sb({G, NB, KB});
  std::fill(sa.data.begin(), sa.data.end(), 0.0f);  // the alignment padding: not read
  for (int64_t q = 0; q < slabs; ++q) {
    Mat<float> x(rows, k);
    std::copy_n(&a.data[q * rows * k], rows * k, x.data());
    const quant::Quantized xq = quant::tiles_1x128(x, rule);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < k; ++c) a.data[(q * rows + i) * k + c] = xq.element(i, c);
    for (int64_t kb = 0; kb < KB; ++kb)
      for (int64_t i = 0; i < rows; ++i) sa.data[(q * KB + kb) * ld + i] = xq.scales(i, kb);
  }
  for (int64_t e = 0; e < G; ++e) {
    Mat<float> w(n, k);
    std::copy_n(&b.data[e * n * k], n * k, w.data());
    const quant::Quantized wq = quant::blocks_128x128(w, rule);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < k; ++c) b.data[(e * n + j) * k + c] = wq.element(j, c);
    for (int64_t nb = 0; nb < NB; ++nb)
      for (int64_t kb = 0; kb < KB; ++kb) sb.data[(e * NB + nb) * KB + kb] = wq.scales(nb, kb);
  }
  t["a"] = to_npy(a), t["b"] = to_npy(b), t["sa"] = to_npy(sa), t["sb"] = to_npy(sb);
  if (s.scales == "ue8m0_packed") {  // the same scales as SM100 takes them: sa [.., rows, KB], sb per row of B
    Array<float> ra({slabs, ld, KB}), rb({G, n, KB});
    for (int64_t q = 0; q < slabs; ++q)
      for (int64_t i = 0; i < ld; ++i)
        for (int64_t kb = 0; kb < KB; ++kb)
          ra.data[(q * ld + i) * KB + kb] = i < rows ? sa.data[(q * KB + kb) * ld + i] : 1.0f;  // padding: 2^0
    for (int64_t e = 0; e < G; ++e)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t kb = 0; kb < KB; ++kb) rb.data[(e * n + j) * KB + kb] = sb.data[(e * NB + j / 128) * KB + kb];
    Array<int32_t> pa = pack_ue8m0(ra);
    if (!masked) pa.shape.erase(pa.shape.begin());
    t["sa"] = to_npy(pa), t["sb"] = to_npy(pack_ue8m0(rb));
  }
  return t;
}

nlohmann::json deepgemm_fp8_params(const DeepGemmSpec& s, bool masked) {
  nlohmann::json p = deepgemm_params(s, masked);
  p["scales"] = s.scales;
  return p;
}

}  // namespace ladder::moe
