// tools/ladder/04-moe/commands.cpp -- `ladder deepgemm`: stage 04's ragged dot in DeepGEMM's grouped-GEMM layouts
// (the layout contracts "04-moe/deepgemm_contiguous", "_masked", "_k_grouped" and their "_fp8" forms,
// ladder/04-moe/deepgemm.hpp).
//
//   ladder deepgemm write --layout contiguous|masked --out DIR [--group-m 0,97,1,130,40] [--n 72] [--k 200]
//                         [--block-m 128] [--padding-rows zero|unjudged] [--max-m N] [--fp8 [--scales fp32|ue8m0|ue8m0_packed]]
//                         [--seed N]
//                                   a case in DeepGEMM's layout: a, b, m_indices (or masked_m), with --fp8 also the
//                                   scales sa, sb; params (case.json) and the expected d (fp64)
//   ladder deepgemm write --layout k_grouped --out DIR [--ks 256,0,128,384] [--m 24] [--n 72] [--k-alignment 128]
//                         [--no-c] [--fp8 [--scales fp32|ue8m0|ue8m0_packed]] [--seed N]
//                                   a weight-gradient case: a, b (groups stacked along K), ks, c (unless --no-c); with
//                                   --fp8 E4M3 values and per-channel scales sa, sb per 128 rows of K
//   ladder deepgemm ragged CASE_DIR --out DIR
//                                   stage 04's ragged_dot rung on the case at float32 (an FP8 case: stage 07's
//                                   fp8_block rung per expert; a k_grouped case: each group's rows summed in reverse;
//                                   a k_grouped --fp8 case: the fp8_block rung per element, plus c),
//                                   written into the layout: DIR/d.npy
// A candidate (yours, or the ragged rung's) is judged like any stage's output, DeepGEMM's calc_diff beside:
//   ladder check 04-moe/deepgemm_contiguous CASE_DIR DIR        (DIR/d.npy; or the .npy itself)
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli.hpp"
#include "ladder/04-moe/deepgemm.hpp"
#include "ladder/core/npy.hpp"

namespace ladder::cli {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> counts(const std::string& s, const char* option = "--group-m") {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long x = -1;
    try {
      x = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == item.size() && x >= 0, "{} {}: '{}' violates a list of integers >= 0", option, s, item);
    v.push_back(x);
  }
  require(!v.empty(), "{} '{}': empty list", option, s);
  return v;
}

std::string layout_id(const std::string& layout, bool fp8) {
  require(layout == "contiguous" || layout == "masked" || layout == "k_grouped",
          "--layout {} violates contiguous | masked | k_grouped", layout);
  if (layout == "k_grouped") return fp8 ? moe::kDeepGemmKGroupedFp8 : moe::kDeepGemmKGrouped;
  if (fp8) return layout == "masked" ? moe::kDeepGemmMaskedFp8 : moe::kDeepGemmContiguousFp8;
  return layout == "masked" ? moe::kDeepGemmMasked : moe::kDeepGemmContiguous;
}

}  // namespace

void deepep_commands(CLI::App& app);  // deepep_commands.cpp: `ladder deepep`

void commands_04_moe(CLI::App& app) {
  deepep_commands(app);
  auto* top = app.add_subcommand("deepgemm", "stage 04's ragged dot in DeepGEMM's grouped-GEMM layouts: write cases, "
                                 "run the ragged_dot rung (check with `ladder check 04-moe/deepgemm_LAYOUT CASE DIR`)");
  top->require_subcommand(1);
  struct W {
    std::string out, layout = "contiguous", group_m = "0,97,1,130,40", ks = "256,0,128,384";
    moe::DeepGemmSpec spec;
    moe::DeepGemmKSpec kspec;
    bool fp8 = false, no_c = false;
  };
  auto w = std::make_shared<W>();
  auto* wr = top->add_subcommand("write", "write a case in a DeepGEMM layout with its fp64 expected d");
  wr->add_option("--layout", w->layout, "contiguous (prefill: segments along M) | masked (decode: masked_m) | "
                 "k_grouped (weight gradient: groups along K)")
      ->capture_default_str();
  wr->add_option("--out", w->out, "case folder to write")->required();
  wr->add_option("--group-m", w->group_m, "valid rows of each expert (num_groups = their count)")->capture_default_str();
  wr->add_option("--n", w->spec.n, "output columns n")->capture_default_str();
  wr->add_option("--k", w->spec.k, "reduction length k")->capture_default_str();
  wr->add_option("--block-m", w->spec.block_m, "contiguous: the M block size each segment is padded to")
      ->capture_default_str();
  wr->add_option("--padding-rows", w->spec.padding_rows, "contiguous: zero (d's padding rows must stay 0) | unjudged")
      ->capture_default_str();
  wr->add_option("--max-m", w->spec.max_m, "masked: rows per group (0: the largest --group-m + 5)")->capture_default_str();
  wr->add_flag("--fp8", w->fp8, "E4M3 values with 1 x 128 / 128 x 128 scales (k_grouped: per-channel, per 128 rows of "
               "K) (layout 04-moe/deepgemm_LAYOUT_fp8)");
  wr->add_option("--scales", w->spec.scales, "with --fp8: fp32 | ue8m0 (powers of two) | ue8m0_packed (SM100: four UE8M0 "
                 "bytes to an int32)")->capture_default_str();
  wr->add_option("--ks", w->ks, "k_grouped: each group's K (multiples of --k-alignment; 0: an empty group)")
      ->capture_default_str();
  wr->add_option("--m", w->kspec.m, "k_grouped: rows m of d[g]")->capture_default_str();
  wr->add_option("--k-alignment", w->kspec.k_alignment, "k_grouped: the alignment of each K")->capture_default_str();
  wr->add_flag("--no-c", w->no_c, "k_grouped: no accumulator input c (d[g] = a[K_g]^T b[K_g])");
  wr->add_option("--seed", w->spec.seed, "RNG seed")->capture_default_str();
  wr->callback([w] {
    require(!fs::exists(w->out) || fs::is_directory(w->out), "--out {}: exists and is not a folder", w->out);
    const std::string id = layout_id(w->layout, w->fp8);
    if (id == moe::kDeepGemmKGrouped || id == moe::kDeepGemmKGroupedFp8) {
      moe::DeepGemmKSpec& k = w->kspec;
      k.ks = counts(w->ks, "--ks");
      k.n = w->spec.n;
      k.accumulate = !w->no_c;
      k.seed = w->spec.seed;
      k.scales = w->spec.scales;
      const Contract& c = contract(id);
      const Tensors in = w->fp8 ? moe::deepgemm_k_grouped_fp8_inputs(k) : moe::deepgemm_k_grouped_inputs(k);
      const nlohmann::json params = w->fp8 ? moe::deepgemm_k_grouped_fp8_params(k) : moe::deepgemm_k_grouped_params(k);
      write_case(c, w->out, in, params, run_oracle(c, in, params));
      fmt::print("wrote a {} case to {} (run your kernel on a, b, ks{}{} with case.json's params; check with `ladder "
                 "check {} {} DIR` where DIR holds d.npy)\n", c.stage, w->out, k.accumulate ? ", c" : "",
                 w->fp8 ? ", sa, sb" : "", c.stage, w->out);
      return;
    }
    const bool masked = w->layout == "masked";
    w->spec.group_m = counts(w->group_m);
    const Contract& c = contract(id);
    const Tensors in = w->fp8 ? moe::deepgemm_fp8_inputs(w->spec, masked)
                       : masked ? moe::deepgemm_masked_inputs(w->spec) : moe::deepgemm_contiguous_inputs(w->spec);
    const nlohmann::json params = w->fp8 ? moe::deepgemm_fp8_params(w->spec, masked) : moe::deepgemm_params(w->spec, masked);
    write_case(c, w->out, in, params, run_oracle(c, in, params));
    fmt::print("wrote a {} case to {} (run your kernel on a, b, {}{} with case.json's params{}; check with `ladder "
               "check {} {} DIR` where DIR holds d.npy)\n", c.stage, w->out, masked ? "masked_m" : "m_indices",
               w->fp8 ? ", sa, sb" : "",
               masked ? "" : ", d zero-initialised", c.stage, w->out);
  });
  struct R {
    std::string case_dir, out;
  };
  auto r = std::make_shared<R>();
  auto* rg = top->add_subcommand("ragged", "stage 04's ragged_dot rung on a case at float32, in its layout: OUT/d.npy "
                                 "(k_grouped: a float32 candidate summing each group's rows in reverse)");
  rg->add_option("case_dir", r->case_dir, "case folder (from `ladder deepgemm write`)")->required();
  rg->add_option("--out", r->out, "folder for d.npy")->required();
  rg->callback([r] {
    require(!fs::exists(r->out) || fs::is_directory(r->out), "--out {}: exists and is not a folder", r->out);
    std::ifstream f(fs::path(r->case_dir) / "case.json");
    require(f.good(), "CASE_DIR {}: no case.json", r->case_dir);
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    const std::string stage = j.is_object() && j.contains("stage") && j["stage"].is_string() ? j["stage"].get<std::string>() : "";
    const bool fp8 = stage == moe::kDeepGemmContiguousFp8 || stage == moe::kDeepGemmMaskedFp8;
    const bool kg = stage == moe::kDeepGemmKGrouped, kg8 = stage == moe::kDeepGemmKGroupedFp8;
    require(fp8 || kg || kg8 || stage == moe::kDeepGemmContiguous || stage == moe::kDeepGemmMasked,
            "CASE_DIR {}: case.json's stage '{}' is not a DeepGEMM layout (04-moe/deepgemm_*)", r->case_dir, stage);
    const CaseFolder cf = read_case(contract(stage), r->case_dir);
    const Tensors d = kg8 ? moe::deepgemm_k_grouped_fp8_rung(cf.inputs, cf.params)
                      : kg  ? moe::deepgemm_k_grouped_run(cf.inputs, cf.params)
                      : fp8 ? moe::deepgemm_run_fp8(stage, cf.inputs, cf.params)
                            : moe::deepgemm_run_ragged(stage, cf.inputs, cf.params);
    fs::create_directories(r->out);
    const NpyData& x = d.at("d");
    write_npy(fs::path(r->out) / "d.npy", x.dtype, x.shape, x.bytes.data());
    fmt::print("wrote d.npy of the {} ({}) to {}\n", kg ? "k-grouped float32 candidate" : fp8 || kg8 ? "fp8_block rung"
               : "ragged_dot rung", stage, r->out);
  });
}

}  // namespace ladder::cli
