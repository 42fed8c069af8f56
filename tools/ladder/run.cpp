// tools/ladder/run.cpp -- `ladder run`: any registered rung on a case folder's inputs, through the stage's
// contract (Contract::run_rung); no per-stage code here.
//
//   ladder run STAGE RUNG --case DIR --out DIR [--backend ref|cuda] [--precision float32|float64]
// writes each output the rung computes as OUT/NAME.npy, ready for `ladder check STAGE DIR OUT/NAME.npy
// --output NAME`. Exit 0; 2: bad input -- one line, via ladder::Error.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/core/registry.hpp"

namespace ladder::cli {
namespace fs = std::filesystem;

void add_run_command(CLI::App& app) {
  struct Opts {
    std::string stage, rung, case_dir, out, backend = "ref", precision = "float32";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "run one registered rung on a case folder's inputs; write its outputs as .npy");
  cmd->add_option("stage", o->stage, "stage (see `ladder list`)")->required();
  cmd->add_option("rung", o->rung, "rung id (see `ladder list STAGE`)")->required();
  cmd->add_option("--case", o->case_dir, "case folder (from `ladder golden` or `ladder oracle`)")->required();
  cmd->add_option("--out", o->out, "folder to write NAME.npy per output into")->required();
  cmd->add_option("--backend", o->backend, "ref (the Eigen reference) or cuda (the kernel, SIMT on the CPU)")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision, "float32 or float64 (reference rungs)")->capture_default_str();
  cmd->callback([o] {
    const Contract& c = contract(o->stage);
    require(o->backend == "ref" || o->backend == "cuda", "--backend {} violates backend in {{ref, cuda}}", o->backend);
    require(o->precision == "float32" || o->precision == "float64",
            "--precision {} violates precision in {{float32, float64}}", o->precision);
    require(!fs::exists(o->out) || fs::is_directory(o->out), "--out {}: exists and is not a folder", o->out);
    const Rung& rung = registry().find(c.stage, o->backend, o->rung);
    const CaseFolder cf = read_case(c, o->case_dir);
    const Tensors out = run_rung(c, rung, cf.inputs, cf.params, o->precision == "float32" ? DType::F4 : DType::F8);
    fs::create_directories(o->out);
    for (const auto& [name, d] : out) write_npy(fs::path(o->out) / (name + ".npy"), d.dtype, d.shape, d.bytes.data());
    std::string names;
    for (const auto& [name, d] : out) names += (names.empty() ? "" : ", ") + name;
    fmt::print("wrote {} ({} {} {} on {}) to {}\n", names, rung.key(), o->precision, c.stage, o->case_dir, o->out);
  });
}

}  // namespace ladder::cli
