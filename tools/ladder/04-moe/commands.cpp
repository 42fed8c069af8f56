// tools/ladder/04-moe/commands.cpp -- `ladder deepgemm`: stage 04's ragged dot in DeepGEMM's grouped-GEMM layouts
// (the layout contracts "04-moe/deepgemm_contiguous" and "04-moe/deepgemm_masked", ladder/04-moe/deepgemm.hpp).
//
//   ladder deepgemm write --layout contiguous|masked --out DIR [--group-m 0,97,1,130,40] [--n 72] [--k 200]
//                         [--block-m 128] [--padding-rows zero|unjudged] [--max-m N] [--fp8 [--scales fp32|ue8m0|ue8m0_packed]]
//                         [--seed N]
//                                   a case in DeepGEMM's layout: a, b, m_indices (or masked_m), with --fp8 also the
//                                   scales sa, sb; params (case.json) and the expected d (fp64)
//   ladder deepgemm ragged CASE_DIR --out DIR
//                                   stage 04's ragged_dot rung on the case at float32 (an FP8 case: stage 07's
//                                   fp8_block rung per expert), written into the layout: DIR/d.npy
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

std::vector<int64_t> counts(const std::string& s) {
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
    require(used == item.size() && x >= 0, "--group-m {}: '{}' violates a list of integers >= 0", s, item);
    v.push_back(x);
  }
  require(!v.empty(), "--group-m '{}': empty list", s);
  return v;
}

std::string layout_id(const std::string& layout, bool fp8) {
  require(layout == "contiguous" || layout == "masked", "--layout {} violates contiguous | masked", layout);
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
    std::string out, layout = "contiguous", group_m = "0,97,1,130,40";
    moe::DeepGemmSpec spec;
    bool fp8 = false;
  };
  auto w = std::make_shared<W>();
  auto* wr = top->add_subcommand("write", "write a case in a DeepGEMM layout with its fp64 expected d");
  wr->add_option("--layout", w->layout, "contiguous (prefill: segments along M) | masked (decode: masked_m)")
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
  wr->add_flag("--fp8", w->fp8, "E4M3 values with 1 x 128 / 128 x 128 scales (layout 04-moe/deepgemm_LAYOUT_fp8)");
  wr->add_option("--scales", w->spec.scales, "with --fp8: fp32 | ue8m0 (powers of two) | ue8m0_packed (SM100: four UE8M0 "
                 "bytes to an int32)")->capture_default_str();
  wr->add_option("--seed", w->spec.seed, "RNG seed")->capture_default_str();
  wr->callback([w] {
    require(!fs::exists(w->out) || fs::is_directory(w->out), "--out {}: exists and is not a folder", w->out);
    const std::string id = layout_id(w->layout, w->fp8);
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
  auto* rg = top->add_subcommand("ragged", "stage 04's ragged_dot rung on a case at float32, in its layout: OUT/d.npy");
  rg->add_option("case_dir", r->case_dir, "case folder (from `ladder deepgemm write`)")->required();
  rg->add_option("--out", r->out, "folder for d.npy")->required();
  rg->callback([r] {
    require(!fs::exists(r->out) || fs::is_directory(r->out), "--out {}: exists and is not a folder", r->out);
    std::ifstream f(fs::path(r->case_dir) / "case.json");
    require(f.good(), "CASE_DIR {}: no case.json", r->case_dir);
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    const std::string stage = j.is_object() && j.contains("stage") && j["stage"].is_string() ? j["stage"].get<std::string>() : "";
    const bool fp8 = stage == moe::kDeepGemmContiguousFp8 || stage == moe::kDeepGemmMaskedFp8;
    require(fp8 || stage == moe::kDeepGemmContiguous || stage == moe::kDeepGemmMasked, "CASE_DIR {}: case.json's "
            "stage '{}' is not a DeepGEMM layout (04-moe/deepgemm_*)", r->case_dir, stage);
    const CaseFolder cf = read_case(contract(stage), r->case_dir);
    const Tensors d = fp8 ? moe::deepgemm_run_fp8(stage, cf.inputs, cf.params)
                          : moe::deepgemm_run_ragged(stage, cf.inputs, cf.params);
    fs::create_directories(r->out);
    const NpyData& x = d.at("d");
    write_npy(fs::path(r->out) / "d.npy", x.dtype, x.shape, x.bytes.data());
    fmt::print("wrote d.npy of the {} rung ({}) to {}\n", fp8 ? "fp8_block" : "ragged_dot", stage, r->out);
  });
}

}  // namespace ladder::cli
