// tools/ladder/04-moe/mutants.cpp -- the mutation catalogue's DeepGEMM part (mutants.hpp): stage 04's ragged dot in
// DeepGEMM's grouped-GEMM layouts (ladder/04-moe/deepgemm.hpp), each bug class as the candidate a port with that bug
// writes (stage 04's ragged_dot rung run on the inputs as the buggy port reads them), beside correct variants.
#include <fmt/format.h>

#include <limits>

#include "ladder/04-moe/deepep.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "mutants.hpp"

namespace ladder::mutants {
namespace {

struct Case {
  std::string layout;
  Tensors in;
  nlohmann::json params;
  Tensors expected;
};

Case make(bool masked) {
  moe::DeepGemmSpec s;
  s.n = 24;
  Case c{masked ? moe::kDeepGemmMasked : moe::kDeepGemmContiguous, {}, moe::deepgemm_params(s, masked), {}};
  c.in = masked ? moe::deepgemm_masked_inputs(s) : moe::deepgemm_contiguous_inputs(s);
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  return c;
}

Outcome judge(std::string name, bool mutant, std::string source, const Case& c, const Array<float>& d,
              const nlohmann::json& params) {
  const CheckReport r = check(contract(c.layout), c.in, params, c.expected, "d", to_npy(d));
  std::string first = r.pass ? "-" : r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front();
  return {std::move(name), mutant, std::move(source), r.pass, std::move(first)};
}


}  // namespace

void deepgemm_cases(std::vector<Outcome>& out) {
  const Case c = make(false);
  const std::vector<int64_t> idx = npy_as_int64(c.in.at("m_indices"), "m_indices").data;
  const Array<float> good = moe::deepgemm_ragged_d(c.layout, c.in, c.params);
  const int64_t n = good.shape[1], bm = c.params.at("block_m").get<int64_t>(), G = c.in.at("b").shape[0];
  out.push_back(judge("DeepGEMM contiguous: the ragged_dot rung in the layout", false, "stage 04's grouped product",
                      c, good, c.params));
  int64_t end = 0;  // expert 1's last row; the next row is padding
  while (idx[end + 1] == 1) ++end;
  Array<float> written = good;
  std::copy_n(&written.data[end * n], n, &written.data[(end + 1) * n]);
  out.push_back(judge("a padding row of the contiguous layout written", true, "a store one row past the segment", c,
                      written, c.params));
  nlohmann::json loose = c.params;
  loose["padding_rows"] = "unjudged";
  out.push_back(judge("DeepGEMM contiguous: padding row written, padding_rows unjudged", false,
                      "DeepGEMM's tests mask padding rows out", c, written, loose));
  std::vector<int64_t> wrap = idx;  // each M block's expert read from its last row, -1 wrapping to G - 1
  for (size_t i = 0; i < idx.size(); ++i)
    if (idx[i] >= 0) wrap[i] = idx[(i / bm + 1) * bm - 1] < 0 ? G - 1 : idx[(i / bm + 1) * bm - 1];
  out.push_back(judge("a padding row's group index (-1) taken as an expert", true, "negative index wraps (Python)", c,
                      moe::deepgemm_ragged_d(c.layout, moe::deepgemm_with_ints(c.in, "m_indices", wrap), c.params), c.params));
  Array<float> shifted = good;
  int64_t first = 0, last = 0;
  while (idx[first] != 3) ++first;
  for (last = first; idx[last + 1] == 3;) ++last;
  for (int64_t i = last; i >= first; --i) std::copy_n(&good.data[i * n], n, &shifted.data[(i + 1) * n]);
  std::fill_n(&shifted.data[first * n], n, 0.0f);
  out.push_back(judge("one expert's segment shifted by a row", true, "segment offsets off by one", c, shifted, c.params));

  const Case m = make(true);
  const std::vector<int64_t> mm = npy_as_int64(m.in.at("masked_m"), "masked_m").data;
  const Array<float> mgood = moe::deepgemm_ragged_d(m.layout, m.in, m.params);
  const int64_t M = mgood.shape[1], mn = mgood.shape[2], k = m.in.at("a").shape[2];
  Array<float> nan_past = mgood;
  for (size_t g = 0; g < mm.size(); ++g)
    std::fill(nan_past.data.begin() + (static_cast<int64_t>(g) * M + mm[g]) * mn,
              nan_past.data.begin() + (static_cast<int64_t>(g) + 1) * M * mn, std::numeric_limits<float>::quiet_NaN());
  out.push_back(judge("DeepGEMM masked: NaN in rows past masked_m", false, "rows DeepGEMM leaves unspecified", m,
                      nan_past, m.params));
  Array<float> a = from_npy<float>(m.in.at("a"), "a"), packed = a;
  int64_t off = 0;  // row i of group g read from flat row sum(masked_m[< g]) + i
  for (size_t g = 0; g < mm.size(); off += mm[g], ++g)
    std::copy_n(&a.data[off * k], mm[g] * k, &packed.data[static_cast<int64_t>(g) * M * k]);
  Tensors in = m.in;
  in["a"] = to_npy(packed);
  out.push_back(judge("masked buffer read as packed (rows past masked_m counted)", true, "masked vs contiguous offsets",
                      m, moe::deepgemm_ragged_d(m.layout, in, m.params), m.params));
  std::vector<int64_t> hint(mm.size(), std::min<int64_t>(m.params.at("expected_m").get<int64_t>(), M));
  out.push_back(judge("expected_m taken for masked_m", true, "the hint read as the count", m,
                      moe::deepgemm_ragged_d(m.layout, moe::deepgemm_with_ints(m.in, "masked_m", hint), m.params), m.params));
  deepgemm_fp8_cases(out);
}

// FP8 (04-moe/deepgemm_*_fp8): stage 07's fp8_block rung run on the scales as the buggy port reads them.
void deepgemm_fp8_cases(std::vector<Outcome>& out) {
  for (const bool masked : {false, true}) {
    moe::DeepGemmSpec s;
    s.n = 24, s.k = 300;  // three k blocks, each at its own magnitude
    s.scales = masked ? "fp32" : "ue8m0";
    Case c{masked ? moe::kDeepGemmMaskedFp8 : moe::kDeepGemmContiguousFp8, moe::deepgemm_fp8_inputs(s, masked),
           moe::deepgemm_fp8_params(s, masked), {}};
    c.expected = run_oracle(contract(c.layout), c.in, c.params);
    const std::string tag = fmt::format("DeepGEMM {} FP8", masked ? "masked" : "contig"), sc = s.scales + " scales";
    auto fp8 = [&](const Tensors& in, int acc_bits) {
      return from_npy<float>(moe::deepgemm_run_fp8(c.layout, in, c.params, acc_bits).at("d"), "d");
    };
    for (const int acc : {14, 24})
      out.push_back(judge(fmt::format("{}: fp8_block, {}-bit accumulator", tag, acc), false,
                          sc + ": stage 07's recipe, another accumulator", c, fp8(c.in, acc), c.params));
    // Activation scales read untransposed: logical (i, kb) read at flat i KB + kb of the [KB, ld] slab.
    const Array<float> sa = from_npy<float>(c.in.at("sa"), "sa");
    Array<float> flat = sa;
    const int64_t KB = sa.shape[sa.shape.size() - 2], ld = sa.shape.back(), slabs = masked ? sa.shape[0] : 1;
    for (int64_t q = 0; q < slabs; ++q)
      for (int64_t i = 0; i < ld; ++i)
        for (int64_t kb = 0; kb < KB; ++kb) flat.data[(q * KB + kb) * ld + i] = sa.data[q * KB * ld + i * KB + kb];
    for (float& v : flat.data) v = v > 0 ? v : 1.0f;  // the alignment padding read as scales: keep them valid
    Tensors un = c.in;
    un["sa"] = to_npy(flat);
    out.push_back(judge(fmt::format("{}: activation scales read untransposed", tag), true, sc + ": DeepGEMM's "
                        "MN-major (transposed) LHS scales", c, fp8(un, 14), c.params));
    // Weight scales of the wrong k block (k block off by one).
    const Array<float> sb = from_npy<float>(c.in.at("sb"), "sb");
    Array<float> shifted = sb;
    const int64_t SK = sb.shape[2];
    for (size_t i = 0; i < sb.data.size(); ++i) shifted.data[i] = sb.data[i - i % SK + (i % SK + 1) % SK];
    Tensors wk = c.in;
    wk["sb"] = to_npy(shifted);
    out.push_back(judge(fmt::format("{}: weight scales of the wrong k block", tag), true, sc + ": block-scaled GEMM ports", c,
                        fp8(wk, 14), c.params));
  }
  // SM100's packed UE8M0 scales: the rung on the packed case passes; a port reading the four bytes of each int32 in
  // the other order (k block 4 j + b from byte 3 - b) fails.
  moe::DeepGemmSpec s;
  s.n = 24, s.k = 520, s.scales = "ue8m0_packed";
  Case c{moe::kDeepGemmContiguousFp8, moe::deepgemm_fp8_inputs(s, false), moe::deepgemm_fp8_params(s, false), {}};
  c.expected = run_oracle(contract(c.layout), c.in, c.params);
  auto fp8 = [&](const Tensors& in) { return from_npy<float>(moe::deepgemm_run_fp8(c.layout, in, c.params).at("d"), "d"); };
  out.push_back(judge("DeepGEMM contig FP8, packed UE8M0: fp8_block", false, "int32-packed scales unpacked exactly", c,
                      fp8(c.in), c.params));
  Tensors swapped = c.in;
  for (const char* name : {"sa", "sb"}) {
    Array<int32_t> w = from_npy<int32_t>(c.in.at(name), name);
    for (int32_t& v : w.data) {
      const uint32_t u = static_cast<uint32_t>(v);
      v = static_cast<int32_t>((u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24));
    }
    swapped[name] = to_npy(w);
  }
  out.push_back(judge("DeepGEMM packed UE8M0: bytes in the wrong order", true, "SM100 ports packing big-endian", c,
                      fp8(swapped), c.params));
  // The k-grouped layout (weight gradient): rows summed in another order pass; a group boundary off by one fails.
  const moe::DeepGemmKSpec ks;
  Case k{moe::kDeepGemmKGrouped, moe::deepgemm_k_grouped_inputs(ks), moe::deepgemm_k_grouped_params(ks), {}};
  k.expected = run_oracle(contract(k.layout), k.in, k.params);
  auto kg = [&](int shift) { return from_npy<float>(moe::deepgemm_k_grouped_run(k.in, k.params, shift).at("d"), "d"); };
  out.push_back(judge("DeepGEMM k-grouped: K rows summed in reverse", false, "another summation order", k, kg(0),
                      k.params));
  out.push_back(judge("DeepGEMM k-grouped: a group boundary shifted by one row", true, "K offsets off by one", k, kg(1),
                      k.params));
  // Its FP8 form (per-channel scales per 128 rows of K): stage 07's rung and a dequantised float32 sum pass; a port
  // reading the neighbouring K block's scale, a boundary one row late, or the scales untransposed fails.
  moe::DeepGemmKSpec k8s = ks;  // (a copy: GCC 12 warns falsely on a second default-constructed spec)
  k8s.m = 26;
  Case k8{moe::kDeepGemmKGroupedFp8, moe::deepgemm_k_grouped_fp8_inputs(k8s), moe::deepgemm_k_grouped_fp8_params(k8s), {}};
  k8.expected = run_oracle(contract(k8.layout), k8.in, k8.params);
  auto kf = [&](moe::KFp8Bug bug) {
    return from_npy<float>(moe::deepgemm_k_grouped_fp8_run(k8.in, k8.params, bug).at("d"), "d");
  };
  out.push_back(judge("DeepGEMM k-grouped FP8: fp8_block, 14-bit accumulator", false, "stage 07's recipe per element",
                      k8, from_npy<float>(moe::deepgemm_k_grouped_fp8_rung(k8.in, k8.params).at("d"), "d"), k8.params));
  out.push_back(judge("DeepGEMM k-grouped FP8: dequantised, float32 sum in reverse", false, "another way and order", k8,
                      kf(moe::KFp8Bug::none), k8.params));
  out.push_back(judge("DeepGEMM k-grouped FP8: the scale of the neighbouring K block", true, "per-channel scale index "
                      "off by one block", k8, kf(moe::KFp8Bug::neighbour_block_scale), k8.params));
  out.push_back(judge("DeepGEMM k-grouped FP8: a group boundary shifted by one row", true, "K offsets off by one", k8,
                      kf(moe::KFp8Bug::boundary_shift), k8.params));
  out.push_back(judge("DeepGEMM k-grouped FP8: scales read untransposed", true, "[mn, K/128] for MN-major [K/128, mn]",
                      k8, kf(moe::KFp8Bug::scales_untransposed), k8.params));
}

void deepep_cases(std::vector<Outcome>& out) {
  for (const bool ll : {false, true}) {  // DeepEP's dispatch / combine (ladder/04-moe/deepep.hpp)
    const moe::DeepEpSpec s;
    const std::string layout = ll ? moe::kDeepEpLowLatency : moe::kDeepEpNormal;
    const Tensors in = moe::deepep_inputs(s);
    const nlohmann::json params = moe::deepep_params(s, ll);
    const Tensors expected = run_oracle(contract(layout), in, params);
    for (const moe::DeepEpVariant& v : moe::deepep_variants(layout, in, params)) {
      if (ll && v.mutant && v.name.find("FP8") == std::string::npos && v.name.find("recv_count") == std::string::npos)
        continue;  // the bug classes both modes share are listed once, for the normal mode
      std::string first = "-";
      for (const CheckReport& r : moe::deepep_check(layout, in, params, expected, v.candidate))
        if (!r.pass && first == "-")
          first = r.output + ": " + (r.failed.empty() ? r.text.substr(0, r.text.find('\n')) : r.failed.front());
      out.push_back({(ll ? "DeepEP low latency: " : "DeepEP normal: ") + v.name, v.mutant, v.source, first == "-",
                     first});
    }
  }
}

}  // namespace ladder::mutants
