// tools/ladder/03-mla/commands.cpp -- `ladder flashmla`: stage 03 in FlashMLA's interface (the layout contract
// "03-mla/flashmla", ladder/03-mla/flashmla.hpp).
//
//   ladder flashmla write --out DIR [--seqlens 130,77] [--s-q 2] [--h-q 16] [--d 576] [--dv 512] [--no-causal]
//                         [--seed N]       a case in FlashMLA's layouts: q, kcache, block_table, cache_seqlens,
//                                          params (case.json) and the expected o, lse (fp64)
//   ladder flashmla flash CASE_DIR --out DIR [--split-blocks N]
//                                          stage 03's flash_mla rung (split-KV, merged by lse) on the case at
//                                          float32: DIR/o.npy, DIR/lse.npy, a candidate computed another way
// A candidate (yours, or the flash rung's) is judged like any stage's output, FlashMLA's cos_diff beside:
//   ladder check 03-mla/flashmla CASE_DIR FOLDER --output o,lse
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <sstream>

#include "cli.hpp"
#include "ladder/03-mla/flashmla.hpp"
#include "ladder/core/npy.hpp"

namespace ladder::cli {
namespace {

namespace fs = std::filesystem;

std::vector<int64_t> int_list(const std::string& s, const char* what) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == item.size() && x >= 1, "{} {}: '{}' violates a list of integers >= 1", what, s, item);
    v.push_back(x);
  }
  require(!v.empty(), "{} '{}': empty list", what, s);
  return v;
}

}  // namespace

void commands_03_mla(CLI::App& app) {
  auto* top = app.add_subcommand("flashmla", "stage 03 in FlashMLA's interface: write cases, run the flash_mla rung "
                                 "(check with `ladder check 03-mla/flashmla CASE FOLDER --output o,lse`)");
  top->require_subcommand(1);
  struct W {
    std::string out, seqlens = "130,77";
    mla::FlashMlaSpec spec;
    bool no_causal = false;
  };
  auto w = std::make_shared<W>();
  auto* wr = top->add_subcommand("write", "write a case in FlashMLA's layouts with its fp64 expected o and lse");
  wr->add_option("--out", w->out, "case folder to write")->required();
  wr->add_option("--seqlens", w->seqlens, "cache_seqlens, one per sequence (b = their count)")->capture_default_str();
  wr->add_option("--s-q", w->spec.s_q, "query tokens per sequence (MTP: s_q > 1)")->capture_default_str();
  wr->add_option("--h-q", w->spec.h_q, "query heads")->capture_default_str();
  wr->add_option("--d", w->spec.d, "head dim of q and the cache (576)")->capture_default_str();
  wr->add_option("--dv", w->spec.dv, "head_dim_v (512)")->capture_default_str();
  wr->add_option("--seed", w->spec.seed, "RNG seed")->capture_default_str();
  wr->add_flag("--no-causal", w->no_causal, "causal = false (every query token sees every cached row)");
  wr->callback([w] {
    require(!fs::exists(w->out) || fs::is_directory(w->out), "--out {}: exists and is not a folder", w->out);
    w->spec.seqlens = int_list(w->seqlens, "--seqlens");
    w->spec.causal = !w->no_causal;
    const Contract& c = contract(mla::kFlashMlaLayout);
    const Tensors in = mla::flashmla_inputs(w->spec);
    const nlohmann::json params = mla::flashmla_params(w->spec);
    write_case(c, w->out, in, params, run_oracle(c, in, params));
    fmt::print("wrote a {} case to {} (run your kernel on q, kcache, block_table, cache_seqlens with case.json's "
               "params; check with `ladder check {} {} FOLDER --output o,lse`)\n", c.stage, w->out, c.stage, w->out);
  });
  struct F {
    std::string case_dir, out;
    int64_t split_blocks = 4;
  };
  auto f = std::make_shared<F>();
  auto* fl = top->add_subcommand("flash", "stage 03's flash_mla rung on a case at float32: OUT/o.npy, OUT/lse.npy");
  fl->add_option("case_dir", f->case_dir, "case folder (from `ladder flashmla write`)")->required();
  fl->add_option("--out", f->out, "folder for o.npy and lse.npy")->required();
  fl->add_option("--split-blocks", f->split_blocks, "pages per split-KV chunk (the number of splits follows)")
      ->capture_default_str();
  fl->callback([f] {
    require(!fs::exists(f->out) || fs::is_directory(f->out), "--out {}: exists and is not a folder", f->out);
    const CaseFolder cf = read_case(contract(mla::kFlashMlaLayout), f->case_dir);
    const Tensors o = mla::flashmla_run_flash(cf.inputs, cf.params, f->split_blocks);
    fs::create_directories(f->out);
    for (const auto& [name, d] : o) write_npy(fs::path(f->out) / (name + ".npy"), d.dtype, d.shape, d.bytes.data());
    fmt::print("wrote o.npy, lse.npy of the flash_mla rung (split_blocks {}) to {}\n", f->split_blocks, f->out);
  });
}

}  // namespace ladder::cli
