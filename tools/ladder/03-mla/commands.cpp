// tools/ladder/03-mla/commands.cpp -- `ladder flashmla`: stage 03 in FlashMLA's interface (the layout contract
// "03-mla/flashmla", ladder/03-mla/flashmla.hpp).
//
//   ladder flashmla write --out DIR [--seqlens 130,77] [--s-q 2] [--h-q 16] [--d 576] [--dv 512] [--no-causal]
//                         [--kv-fp8] [--topk K [--lonely] [--topk-length] [--sink]] [--seed N]
//                                          a case in FlashMLA's layouts: q, kcache (--kv-fp8: uint8 FP8 with scale
//                                          records [num_blocks, 64, 1, 656]), block_table, cache_seqlens (--topk:
//                                          sparse decode, indices [b, s_q, K]; --lonely: token (0, 0) all -1, o = 0
//                                          and lse = +inf; --topk-length, --sink: inputs topk_length, attn_sink),
//                                          params (case.json), expected o, lse
//   ladder flashmla flash CASE_DIR --out DIR [--split-blocks N] [--plant BUG]
//                                          stage 03's flash_mla rung (split-KV, merged by lse) on the case at
//                                          float32: DIR/o.npy, DIR/lse.npy, a candidate computed another way
//                                          (--plant: with a port's bug, a mutant the check must reject)
//   ladder flashmla prefill-write --out DIR [--s-q 6] [--s-kv 300] [--topk 96] [--h-q 16] [--d 576] [--dv 512]
//                                 [--lonely] [--topk-length] [--sink]
//   ladder flashmla prefill-flash CASE_DIR --out DIR [--split-blocks N] [--plant BUG]
//                                          the same for sparse prefill (flash_mla_sparse_fwd): out, max_logits, lse
// A candidate (yours, or the flash rung's) is judged like any stage's output, FlashMLA's cos_diff beside:
//   ladder check 03-mla/flashmla CASE_DIR FOLDER --output o,lse
//   ladder check 03-mla/flashmla_sparse_prefill CASE_DIR FOLDER --output out,max_logits,lse
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
  auto save = [](const std::string& out, const Tensors& o) {
    fs::create_directories(out);
    for (const auto& [name, d] : o) write_npy(fs::path(out) / (name + ".npy"), d.dtype, d.shape, d.bytes.data());
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
  wr->add_flag("--kv-fp8", w->spec.kv_fp8, "kcache as FP8 with scale records, uint8 [num_blocks, 64, 1, 656]");
  wr->add_option("--topk", w->spec.topk, "sparse decode: indices [b, s_q, topk] (-1 entries, duplicates; causal "
                 "false)")->capture_default_str();
  auto extras = [](CLI::App* cmd, bool& lonely, bool& topk_length, bool& sink) {
    cmd->add_flag("--lonely", lonely, "query token 0's indices all invalid (FlashMLA: o = 0, lse = +inf)");
    cmd->add_flag("--topk-length", topk_length, "input topk_length: only the leftmost entries of indices are read");
    cmd->add_flag("--sink", sink, "input attn_sink [h_q]: a logit per head in the softmax denominator");
  };
  extras(wr, w->spec.lonely, w->spec.topk_length, w->spec.sink);
  wr->callback([w] {
    require(!fs::exists(w->out) || fs::is_directory(w->out), "--out {}: exists and is not a folder", w->out);
    require(w->spec.topk > 0 || !(w->spec.lonely || w->spec.topk_length || w->spec.sink), "--lonely, --topk-length, "
            "--sink need --topk > 0 (FlashMLA takes them in sparse decode only)");
    w->spec.seqlens = int_list(w->seqlens, "--seqlens");
    w->spec.causal = !w->no_causal;
    const Contract& c = contract(mla::kFlashMlaLayout);
    const Tensors in = mla::flashmla_inputs(w->spec);
    const nlohmann::json params = mla::flashmla_params(w->spec);
    write_case(c, w->out, in, params, run_oracle(c, in, params));
    require(w->spec.topk >= 0, "--topk {} violates >= 0", w->spec.topk);
    fmt::print("wrote a {}{}{} case to {} (run your kernel on q, kcache, {} with case.json's params; check with "
               "`ladder check {} {} FOLDER --output o,lse`)\n", c.stage, w->spec.kv_fp8 ? " FP8-cache" : "",
               w->spec.topk > 0 ? " sparse" : "", w->out, w->spec.topk > 0 ? "indices" : "block_table, cache_seqlens",
               c.stage, w->out);
  });
  struct F {
    std::string case_dir, out;
    int64_t split_blocks = 4;
    std::string plant = "none";
    bool f64 = false;
  };
  auto f = std::make_shared<F>();
  auto* fl = top->add_subcommand("flash", "stage 03's flash_mla rung on a case at float32 (or --float64): OUT/o.npy, "
                                 "OUT/lse.npy");
  fl->add_option("case_dir", f->case_dir, "case folder (from `ladder flashmla write`)")->required();
  fl->add_option("--out", f->out, "folder for o.npy and lse.npy")->required();
  fl->add_option("--split-blocks", f->split_blocks, "pages per split-KV chunk (the number of splits follows)")
      ->capture_default_str();
  const std::string plant_doc = "a port's bug planted (a mutant): none, scale_neighbour, rope_as_fp8, scale_divide "
                                "(FP8 records), invalid_as_row0, dedup (indices), lonely_nan, topk_length_ignored, "
                                "sink_ignored";
  fl->add_option("--plant", f->plant, plant_doc)->capture_default_str();
  const std::string f64_doc = "the same algorithm at float64 (<f8 outputs: a float64 candidate, judged by the derived "
                              "fp64 bound)";
  fl->add_flag("--float64", f->f64, f64_doc);
  fl->callback([f, save] {
    require(!fs::exists(f->out) || fs::is_directory(f->out), "--out {}: exists and is not a folder", f->out);
    const CaseFolder cf = read_case(contract(mla::kFlashMlaLayout), f->case_dir);
    save(f->out, mla::flashmla_run_flash(cf.inputs, cf.params, f->split_blocks, mla::flashmla_bug(f->plant),
                                         f->f64 ? DType::F8 : DType::F4));
    fmt::print("wrote o.npy, lse.npy of the flash_mla rung ({}, split_blocks {}, bug {}) to {}\n",
               f->f64 ? "float64" : "float32", f->split_blocks, f->plant, f->out);
  });
  struct P {
    std::string out;
    mla::FlashMlaPrefillSpec spec;
  };
  auto pw = std::make_shared<P>();
  auto* pwr = top->add_subcommand("prefill-write", "write a sparse prefill case (flash_mla_sparse_fwd's layouts) with "
                                  "its fp64 expected out, max_logits, lse (base 2)");
  pwr->add_option("--out", pw->out, "case folder to write")->required();
  pwr->add_option("--s-q", pw->spec.s_q, "query tokens")->capture_default_str();
  pwr->add_option("--s-kv", pw->spec.s_kv, "kv rows")->capture_default_str();
  pwr->add_option("--topk", pw->spec.topk, "indices per query token (>= 3: one -1, one >= s_kv, one duplicate)")
      ->capture_default_str();
  pwr->add_option("--h-q", pw->spec.h_q, "query heads")->capture_default_str();
  pwr->add_option("--d", pw->spec.d, "d_qk (576)")->capture_default_str();
  pwr->add_option("--dv", pw->spec.dv, "d_v (512)")->capture_default_str();
  pwr->add_option("--seed", pw->spec.seed, "RNG seed")->capture_default_str();
  extras(pwr, pw->spec.lonely, pw->spec.topk_length, pw->spec.sink);
  pwr->callback([pw] {
    require(!fs::exists(pw->out) || fs::is_directory(pw->out), "--out {}: exists and is not a folder", pw->out);
    const Contract& c = contract(mla::kFlashMlaSparsePrefillLayout);
    const Tensors in = mla::flashmla_prefill_inputs(pw->spec);
    const nlohmann::json params = mla::flashmla_prefill_params(pw->spec);
    write_case(c, pw->out, in, params, run_oracle(c, in, params));
    fmt::print("wrote a {} case to {} (run your kernel on q, kv, indices; check with `ladder check {} {} FOLDER "
               "--output out,max_logits,lse`)\n", c.stage, pw->out, c.stage, pw->out);
  });
  auto pf = std::make_shared<F>();
  auto* pfl = top->add_subcommand("prefill-flash", "the flash_mla rung on a sparse prefill case at float32 (or "
                                  "--float64): OUT/out.npy, "
                                  "OUT/max_logits.npy, OUT/lse.npy");
  pfl->add_option("case_dir", pf->case_dir, "case folder (from `ladder flashmla prefill-write`)")->required();
  pfl->add_option("--out", pf->out, "folder for the outputs")->required();
  pfl->add_option("--split-blocks", pf->split_blocks, "64-row pages per split-KV chunk")->capture_default_str();
  pfl->add_option("--plant", pf->plant, plant_doc)->capture_default_str();
  pfl->add_flag("--float64", pf->f64, f64_doc);
  pfl->callback([pf, save] {
    require(!fs::exists(pf->out) || fs::is_directory(pf->out), "--out {}: exists and is not a folder", pf->out);
    const CaseFolder cf = read_case(contract(mla::kFlashMlaSparsePrefillLayout), pf->case_dir);
    save(pf->out, mla::flashmla_prefill_run_flash(cf.inputs, cf.params, pf->split_blocks, mla::flashmla_bug(pf->plant),
                                                  pf->f64 ? DType::F8 : DType::F4));
    fmt::print("wrote out.npy, max_logits.npy, lse.npy of the flash_mla rung ({}, bug {}) to {}\n",
               pf->f64 ? "float64" : "float32", pf->plant, pf->out);
  });
}

}  // namespace ladder::cli
