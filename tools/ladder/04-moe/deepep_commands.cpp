// tools/ladder/04-moe/deepep_commands.cpp -- `ladder deepep`: stage 04's expert parallelism in DeepEP's dispatch /
// combine layouts (the layout contracts "04-moe/deepep_normal" and "04-moe/deepep_low_latency",
// ladder/04-moe/deepep.hpp).
//
//   ladder deepep write --mode normal|low_latency --out DIR [--ranks 4] [--tokens 12] [--hidden 256] [--experts 16]
//                       [--topk 4] [--max-dispatch N] [--seed N]
//                                   a case: x, topk_idx, topk_weights, expert_scale per rank; params (case.json) and
//                                   every expected output (layout counts, receive buffers, combined_x)
//   ladder deepep run CASE_DIR --out DIR
//                                   the candidate computed another way (the senders' loop, rows in reverse order,
//                                   combine at float32): DIR/NAME.npy for every output
// A candidate's folder (yours, or run's) is judged output by output, the receive buffers matched by its recv_src.npy:
//   ladder check 04-moe/deepep_normal CASE_DIR DIR --output num_tokens_per_rank,...,combined_x
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "cli.hpp"
#include "ladder/04-moe/deepep.hpp"
#include "ladder/core/npy.hpp"

namespace ladder::cli {

namespace fs = std::filesystem;

void deepep_commands(CLI::App& app) {
  auto* top = app.add_subcommand("deepep", "stage 04's expert parallelism in DeepEP's dispatch / combine layouts: "
                                 "write cases, run a reference candidate (check with `ladder check 04-moe/deepep_MODE "
                                 "CASE DIR --output ...`)");
  top->require_subcommand(1);
  struct W {
    std::string out, mode = "normal";
    moe::DeepEpSpec spec;
  };
  auto w = std::make_shared<W>();
  auto* wr = top->add_subcommand("write", "write a case in a DeepEP layout with every expected output");
  wr->add_option("--mode", w->mode, "normal (get_dispatch_layout, dispatch, combine) | low_latency (FP8 dispatch, "
                 "weighted combine)")->capture_default_str();
  wr->add_option("--out", w->out, "case folder to write")->required();
  wr->add_option("--ranks", w->spec.num_ranks, "EP ranks")->capture_default_str();
  wr->add_option("--tokens", w->spec.num_tokens, "tokens per rank")->capture_default_str();
  wr->add_option("--hidden", w->spec.hidden, "hidden size (low_latency: a multiple of 128)")->capture_default_str();
  wr->add_option("--experts", w->spec.num_experts, "experts (a multiple of --ranks)")->capture_default_str();
  wr->add_option("--topk", w->spec.num_topk, "experts per token")->capture_default_str();
  wr->add_option("--max-dispatch", w->spec.num_max_dispatch_tokens_per_rank, "low_latency: "
                 "num_max_dispatch_tokens_per_rank (0: --tokens + 3)")->capture_default_str();
  wr->add_option("--seed", w->spec.seed, "RNG seed")->capture_default_str();
  wr->callback([w] {
    require(w->mode == "normal" || w->mode == "low_latency", "--mode {} violates normal | low_latency", w->mode);
    require(!fs::exists(w->out) || fs::is_directory(w->out), "--out {}: exists and is not a folder", w->out);
    const bool ll = w->mode == "low_latency";
    const Contract& c = contract(ll ? moe::kDeepEpLowLatency : moe::kDeepEpNormal);
    const Tensors in = moe::deepep_inputs(w->spec);
    const nlohmann::json params = moe::deepep_params(w->spec, ll);
    write_case(c, w->out, in, params, run_oracle(c, in, params));
    std::string names;
    for (const OutputSpec& o : c.outputs) names += (names.empty() ? "" : ",") + o.name;
    fmt::print("wrote a {} case to {} (run your dispatch / combine on each rank's x, topk_idx, topk_weights with "
               "case.json's params; write every output as DIR/NAME.npy, recv_src among them; check with `ladder check "
               "{} {} DIR --output {}`)\n", c.stage, w->out, c.stage, w->out, names);
  });
  struct R {
    std::string case_dir, out;
  };
  auto r = std::make_shared<R>();
  auto* rn = top->add_subcommand("run", "the reference candidate (senders' loop, another receive order): OUT/NAME.npy");
  rn->add_option("case_dir", r->case_dir, "case folder (from `ladder deepep write`)")->required();
  rn->add_option("--out", r->out, "folder for the outputs")->required();
  rn->callback([r] {
    require(!fs::exists(r->out) || fs::is_directory(r->out), "--out {}: exists and is not a folder", r->out);
    std::ifstream f(fs::path(r->case_dir) / "case.json");
    require(f.good(), "CASE_DIR {}: no case.json", r->case_dir);
    const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    const std::string stage = j.is_object() && j.contains("stage") && j["stage"].is_string() ? j["stage"].get<std::string>() : "";
    require(stage == moe::kDeepEpNormal || stage == moe::kDeepEpLowLatency, "CASE_DIR {}: case.json's stage '{}' is "
            "not a DeepEP layout (04-moe/deepep_*)", r->case_dir, stage);
    const CaseFolder cf = read_case(contract(stage), r->case_dir);
    fs::create_directories(r->out);
    for (const auto& [name, x] : moe::deepep_run(stage, cf.inputs, cf.params))
      write_npy(fs::path(r->out) / (name + ".npy"), x.dtype, x.shape, x.bytes.data());
    fmt::print("wrote the reference candidate's outputs ({}) to {}\n", stage, r->out);
  });
}

}  // namespace ladder::cli
