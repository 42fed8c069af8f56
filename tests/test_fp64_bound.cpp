// tests/test_fp64_bound.cpp -- a float64 candidate is judged by its derived bound (issue 38, deliverable 3):
// the oracle's error bound + the candidate's (core/fp64_bound.hpp, each stage's fp64_bound.cpp).
//
// On every golden case of every stage whose contract declares fp64_bound (01-04):
//   * the bound is float64-sized: per slice, max bound / max|oracle| is printed and must stay far below
//     float32's unit roundoff: < 2^-24 / 8 = 7.5e-9 (measured: <= 8.1e-10 at 01's 2^20 row, ~3e-9 at 03's u,
//     ~1e-12 .. 1e-13 elsewhere; a bound that propagated every error through |W| |x| gave 1e-8 at 03's u);
//   * every registered rung with a float64 function (the reference rungs; CUDA rungs are float32 kernels
//     and are counted as skipped) passes on every float output it computes -- except 01's naive rung where
//     its documented lesson (e^x overflows or underflows: the row is NaN) gives a NaN/inf position mismatch;
//   * the oracle rounded to float32 and written as <f8 FAILS wherever float32 rounding is visible;
//   * the oracle with ONE element (the largest of the first slice) off by a relative 1e-12 fails where
//     the derived bound there is below 1e-12 relative; where it is wider the case is printed ("wider than
//     1e-12"), nothing is asserted and nothing tuned: that list says where a tighter (probabilistic)
//     model would be needed.
// The same checks on the layouts of issue 41 (FlashMLA decode and sparse prefill, DeepGEMM's f32 grouped GEMMs, DeepEP's
// combine), on cases ladder writes, and a float64 candidate computed another way (the flash_mla rung at float64, sums
// in reverse order) passes; one with a planted bug fails.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>

#include "golden_util.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/registry.hpp"
#include "ladder/core/stage.hpp"
#include "ladder/03-mla/flashmla.hpp"
#include "ladder/04-moe/deepep.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/04-moe/moe.hpp"
#include "ladder/core/quant.hpp"

using namespace ladder;

namespace {

// As tests/test_slices.cpp: the committed folder, or a case stored as a sample written whole.
std::filesystem::path whole_case(const std::string& stage, const std::string& name) {
  const std::filesystem::path dir = test::golden_dir(stage) / name;
  if (read_json(dir / "case.json").value("stored", "full") != "sample") return dir;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / ("ladder_test_fp64_" + name);
  if (!std::filesystem::exists(tmp / "case.json")) ladder::stage(stage).write_golden_case(name, tmp, true);
  return tmp;
}

bool float_rule(const OutputSpec& o) { return o.rule == Rule::max_abs || o.rule == Rule::elementwise; }

NpyData as_f8(const Array<double>& a) { return to_npy(a); }

// The checks of one float output's derived bound on one case (label names it in the printed lines).
void output_checks(const Contract& cc, const Tensors& inputs, const nlohmann::json& params, const Tensors& expected,
                   const OutputSpec& spec, const Tensors& bounds, const std::string& label) {
  const Array<double> o = npy_as_double(expected.at(spec.name));
  const Array<double> b = npy_as_double(bounds.at(spec.name));
  REQUIRE(b.shape == o.shape);
  // The bound relative to its slice's scale, the largest over the slices.
  int64_t slices = 1;
  for (int d = 0; d < spec.slice_axes; ++d) slices *= o.shape[static_cast<size_t>(d)];
  const int64_t per = o.size() / std::max<int64_t>(slices, 1);
  double rel = 0;
  int64_t first_slice = -1;
  for (int64_t s = 0; s < slices; ++s) {
    double scale = 0, bmax = 0;
    for (int64_t i = s * per; i < (s + 1) * per; ++i)
      if (std::isfinite(o.data[i])) scale = std::max(scale, std::abs(o.data[i])), bmax = std::max(bmax, b.data[i]);
    if (scale > 0) rel = std::max(rel, bmax / scale), first_slice = first_slice < 0 ? s : first_slice;
  }
  // elementwise: each element at its own scale
  double rel_elem = 0;
  if (spec.rule == Rule::elementwise)
    for (int64_t i = 0; i < o.size(); ++i)
      if (std::isfinite(o.data[i]) && o.data[i] != 0) rel_elem = std::max(rel_elem, b.data[i] / std::abs(o.data[i]));
  std::cout << label << " " << spec.name << ": max bound / slice scale " << rel
            << " (per element: " << rel_elem << ")\n";
  CHECK(rel < 0x1p-24 / 8);  // far below float32 rounding: an answer at float32 must fail (checked next)
  // float32 rounding, cast to float64: fails wherever it is visible.
  Array<double> o32 = o;
  bool visible = false;
  for (double& x : o32.data)
    if (std::isfinite(x)) visible |= static_cast<double>(static_cast<float>(x)) != x, x = static_cast<float>(x);
  const CheckReport f = check(cc, inputs, params, expected, spec.name, as_f8(o32));
  if (visible) CHECK_MESSAGE(!f.pass, "a float32 answer passed as float64:\n" << f.text);
  // One element of the first nonzero slice, off by a relative 1e-12.
  if (first_slice < 0) return;
  int64_t at = -1;
  for (int64_t i = first_slice * per; i < (first_slice + 1) * per; ++i)
    if (std::isfinite(o.data[i]) && (at < 0 || std::abs(o.data[i]) > std::abs(o.data[at]))) at = i;
  Array<double> off = o;
  off.data[at] *= 1 + 1e-12;
  const double moved = std::abs(off.data[at] - o.data[at]);
  const CheckReport r = check(cc, inputs, params, expected, spec.name, as_f8(off));
  if (b.data[at] < moved) {
    CHECK_MESSAGE(!r.pass, "a 1e-12 error beyond its bound " << b.data[at] << " passed");
    if (spec.slice_axes > 0 && !r.pass) CHECK(r.text.find("slice") != std::string::npos);
  } else {
    std::cout << "  wider than 1e-12: " << label << " " << spec.name << " at element " << at
              << ": bound " << b.data[at] / std::abs(o.data[at]) << " relative\n";
  }
}

void stage_cases(const std::string& stage) {
  const Contract& c = contract(stage);
  REQUIRE(static_cast<bool>(c.fp64_bound));
  int rungs_run = 0, skipped = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::golden_dir(stage))) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.starts_with("model")) continue;
    INFO(stage << " case " << name);
    const CaseFolder cf = read_case(c, whole_case(stage, name));
    const Tensors bounds = c.fp64_bound(cf.inputs, cf.params, cf.expected);
    // The contract with this case's bounds computed once (check() would recompute them for every call).
    Contract cc = c;
    cc.fp64_bound = [&bounds](const Tensors&, const nlohmann::json&, const Tensors&) { return bounds; };
    for (const OutputSpec& spec : c.outputs) {
      if (!float_rule(spec) || !cf.expected.count(spec.name)) continue;
      INFO("output " << spec.name);
      output_checks(cc, cf.inputs, cf.params, cf.expected, spec, bounds, stage + " " + name);
    }
    // Every rung with a float64 function passes on every float output it computes.
    for (const Rung* rung : registry().stage(stage)) {
      if (!test::lab_runs(rung->id)) continue;
      // 04: a rung whose oracle is another function than the case's (int8 weights; dropping against a
      // dropless case or the reverse) is judged by its own oracle in tests/04-moe, not here.
      if (const auto* f = std::any_cast<moe::LayerFns>(&rung->function))
        if (f->int8 || f->dropping != (cf.expected.count("kept") > 0)) continue;
      Tensors out;
      try {
        out = run_rung(c, *rung, cf.inputs, cf.params, DType::F8);
      } catch (const Error& err) {  // no float64 function (CUDA), or a shape the rung refuses by name
        ++skipped;
        continue;
      }
      ++rungs_run;
      for (const auto& [oname, arr] : out) {
        if (!cf.expected.count(oname) || !float_rule(c.output(oname))) continue;
        INFO("rung " << rung->key() << " output " << oname);
        const CheckReport r = check(cc, cf.inputs, cf.params, cf.expected, oname, arr);
        if (stage == "01-softmax" && rung->id == "naive" && !r.pass)
          CHECK(r.text.find("NaN/inf position mismatch") != std::string::npos);  // its documented lesson
        else
          CHECK_MESSAGE(r.pass, r.text);
      }
    }
  }
  std::cout << stage << ": " << rungs_run << " float64 rung runs, " << skipped << " refused (no float64 function or shape)\n";
  CHECK(rungs_run > 0);
}

}  // namespace

TEST_CASE("01-softmax: float64 candidates by the derived bound") { stage_cases("01-softmax"); }
TEST_CASE("02-attention: float64 candidates by the derived bound") { stage_cases("02-attention"); }
TEST_CASE("03-mla: float64 candidates by the derived bound") { stage_cases("03-mla"); }
TEST_CASE("04-moe: float64 candidates by the derived bound") { stage_cases("04-moe"); }

// ---- the layouts: a case written by ladder, its bounds, and a float64 candidate computed another way ----
namespace {

void layout_case(const std::string& layout, const Tensors& in, const nlohmann::json& params, const Tensors& cand64,
                 const std::string& label) {
  const Contract& c = contract(layout);
  REQUIRE(static_cast<bool>(c.fp64_bound));
  const Tensors expected = run_oracle(c, in, params);
  const Tensors bounds = c.fp64_bound(in, params, expected);
  Contract cc = c;
  cc.fp64_bound = [&bounds](const Tensors&, const nlohmann::json&, const Tensors&) { return bounds; };
  int judged = 0;
  bool differs = false;  // (max_logits may match bit for bit: the same dot in the same order)
  for (const OutputSpec& spec : c.outputs) {
    if (!float_rule(spec) || !expected.count(spec.name)) continue;
    INFO(label << " output " << spec.name);
    output_checks(cc, in, params, expected, spec, bounds, label);
    REQUIRE(cand64.count(spec.name));
    REQUIRE(cand64.at(spec.name).dtype == DType::F8);
    const CheckReport r = check(cc, in, params, expected, spec.name, cand64.at(spec.name));
    CHECK_MESSAGE(r.pass, r.text);
    // Not the oracle's bits: the candidate's other order shows somewhere (else passing it would prove nothing).
    const Array<double> o = npy_as_double(expected.at(spec.name)), x = npy_as_double(cand64.at(spec.name));
    const Array<double> bd = npy_as_double(bounds.at(spec.name));
    double diff = 0, used = 0;
    for (int64_t i = 0; i < o.size(); ++i)
      if (std::isfinite(o.data[i]) && bd.data[i] > 0)
        diff = std::max(diff, std::abs(x.data[i] - o.data[i])),
        used = std::max(used, std::abs(x.data[i] - o.data[i]) / bd.data[i]);
    std::cout << "  " << label << " " << spec.name << ": the float64 candidate's largest |error| " << diff
              << ", at most " << used << " of its bound\n";
    differs |= diff > 0;
    ++judged;
  }
  CHECK(judged > 0);
  CHECK(differs);
}

// d of a grouped GEMM at float64 with k descending (the oracle's order is ascending).
Array<double> reverse_dot(const Array<float>& a, const Array<float>& b, const std::vector<int64_t>& expert, int64_t n,
                          int64_t k, const Shape& shape) {
  Array<double> d(shape);
  for (size_t i = 0; i < expert.size(); ++i)
    for (int64_t j = 0; j < n && expert[i] >= 0; ++j)
      for (int64_t t = k - 1; t >= 0; --t)
        d.data[static_cast<int64_t>(i) * n + j] += static_cast<double>(a.data[static_cast<int64_t>(i) * k + t]) *
                                                   b.data[(expert[i] * n + j) * k + t];
  return d;
}

}  // namespace

TEST_CASE("FlashMLA layouts: float64 candidates by the derived bound") {
  using namespace mla;
  for (const bool fp8 : {false, true}) {
    FlashMlaSpec s;
    s.h_q = 4, s.seqlens = {90, 33}, s.kv_fp8 = fp8;
    const Tensors in = flashmla_inputs(s);
    layout_case(kFlashMlaLayout, in, flashmla_params(s), flashmla_run_flash(in, flashmla_params(s), 1, FlashMlaBug::none,
                DType::F8), fp8 ? "flashmla fp8" : "flashmla");
  }
  FlashMlaSpec sp;
  sp.h_q = 4, sp.seqlens = {90, 33}, sp.topk = 40, sp.lonely = true, sp.topk_length = true, sp.sink = true;
  const Tensors in = flashmla_inputs(sp);
  const nlohmann::json p = flashmla_params(sp);
  layout_case(kFlashMlaLayout, in, p, flashmla_run_flash(in, p, 1, FlashMlaBug::none, DType::F8), "flashmla sparse");
  // A float64 candidate that ignores the sink fails by its bound (the bug, not the precision).
  const Tensors bad = flashmla_run_flash(in, p, 1, FlashMlaBug::sink_ignored, DType::F8);
  CHECK_FALSE(check(contract(kFlashMlaLayout), in, p, run_oracle(contract(kFlashMlaLayout), in, p), "o", bad.at("o")).pass);
  FlashMlaPrefillSpec ps;
  ps.h_q = 4, ps.s_q = 4, ps.topk = 48, ps.lonely = true, ps.topk_length = true, ps.sink = true;
  const Tensors pin = flashmla_prefill_inputs(ps);
  const nlohmann::json pp = flashmla_prefill_params(ps);
  layout_case(kFlashMlaSparsePrefillLayout, pin, pp, flashmla_prefill_run_flash(pin, pp, 1, FlashMlaBug::none, DType::F8),
              "flashmla prefill");
  CHECK_THROWS_WITH_AS(flashmla_run_flash(flashmla_inputs([] { FlashMlaSpec f; f.h_q = 2, f.kv_fp8 = true; return f; }()),
                                          p, 1, FlashMlaBug::scale_divide, DType::F8),
                       doctest::Contains("float32 values of FP8 records"), Error);
}

TEST_CASE("DeepGEMM f32 layouts: float64 candidates by the derived bound") {
  using namespace moe;
  DeepGemmSpec s;
  for (const bool masked : {false, true}) {
    const Tensors in = masked ? deepgemm_masked_inputs(s) : deepgemm_contiguous_inputs(s);
    const nlohmann::json p = deepgemm_params(s, masked);
    const Array<float> a = from_npy<float>(in.at("a"), "a"), b = from_npy<float>(in.at("b"), "b");
    const int64_t G = b.shape[0], n = b.shape[1], k = b.shape[2];
    std::vector<int64_t> expert;
    if (masked) {
      const Array<int64_t> mm = npy_as_int64(in.at("masked_m"), "masked_m");
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < a.shape[1]; ++i) expert.push_back(i < mm.data[g] ? g : -1);
    } else {
      expert = npy_as_int64(in.at("m_indices"), "m_indices").data;
    }
    const Shape shape = masked ? Shape{G, a.shape[1], n} : Shape{a.shape[0], n};
    layout_case(masked ? kDeepGemmMasked : kDeepGemmContiguous, in, p,
                {{"d", to_npy(reverse_dot(a, b, expert, n, k, shape))}}, masked ? "deepgemm masked" : "deepgemm contiguous");
  }
  DeepGemmKSpec ks;
  const Tensors in = deepgemm_k_grouped_inputs(ks);
  const Array<float> a = from_npy<float>(in.at("a"), "a"), b = from_npy<float>(in.at("b"), "b");
  const Array<float> c = from_npy<float>(in.at("c"), "c");
  const int64_t m = a.shape[1], n = b.shape[1];
  Array<double> d({static_cast<int64_t>(ks.ks.size()), m, n});
  int64_t r0 = 0;
  for (size_t g = 0; g < ks.ks.size(); r0 += ks.ks[g], ++g)  // c added last, rows descending
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t r = r0 + ks.ks[g] - 1; r >= r0; --r) acc += static_cast<double>(a.data[r * m + i]) * b.data[r * n + j];
        const int64_t at = (static_cast<int64_t>(g) * m + i) * n + j;
        d.data[at] = acc + c.data[at];
      }
  layout_case(kDeepGemmKGrouped, in, deepgemm_k_grouped_params(ks), {{"d", to_npy(d)}}, "deepgemm k_grouped");
}

TEST_CASE("DeepEP combine: float64 candidates by the derived bound") {
  using namespace moe;
  DeepEpSpec s;
  const Tensors in = deepep_inputs(s);
  const Array<float> x = from_npy<float>(in.at("x"), "x"), w = from_npy<float>(in.at("topk_weights"), "w");
  const Array<int64_t> idx = npy_as_int64(in.at("topk_idx"), "topk_idx");
  const Array<float> sc = from_npy<float>(in.at("expert_scale"), "expert_scale");
  const int64_t rows = x.shape[0] * x.shape[1], H = x.shape[2], K = idx.shape[2];
  for (const bool ll : {false, true}) {
    Array<double> y({x.shape[0], x.shape[1], H});
    for (int64_t g = 0; g < rows; ++g) {
      Mat<float> row(1, H);
      std::copy_n(&x.data[g * H], H, row.data());
      const quant::Quantized q = quant::tiles_1x128(row, quant::ScaleRule::amax);
      for (int64_t h = 0; h < H; ++h) {
        const double xv = ll ? static_cast<double>(q.element(0, h)) * q.scale_at(0, h) : x.data[g * H + h];
        for (int64_t j = K - 1; j >= 0; --j)  // entries descending; w (s x) where the oracle forms (w s) x
          if (const int64_t e = idx.data[g * K + j]; e >= 0) y.data[g * H + h] += w.data[g * K + j] * (sc.data[e] * xv);
      }
    }
    layout_case(ll ? kDeepEpLowLatency : kDeepEpNormal, in, deepep_params(s, ll), {{"combined_x", to_npy(y)}},
                ll ? "deepep low_latency" : "deepep normal");
  }
}
