// tools/ladder/check.cpp -- `ladder check`, `ladder oracle`, `ladder describe`: every stage through its
// case contract (ladder/core/contract.hpp); no per-stage code here.
//
//   ladder describe [STAGE]                                    the contract: files, dtypes, shapes, rules
//   ladder oracle STAGE --inputs DIR --out DIR [--params F]    fp64 expected outputs of your inputs + case.json
//   ladder check STAGE CASE_DIR CANDIDATE.npy [--output NAME] [--rule NAME] [--ftz] [--device [--no-ftz]]
//   ladder check STAGE CASE_DIR FOLDER --output A,B,C      several outputs, FOLDER/A.npy ...: pass if all pass
// Exit 0: pass; 1: fail (the full report is printed); 2: bad input -- one line, via ladder::Error.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ladder/core/contract.hpp"
#include "ladder/core/json.hpp"
#include "ladder/core/npy.hpp"

namespace ladder::cli {
namespace fs = std::filesystem;
namespace {

NpyData read_candidate(const std::string& path, const std::string& what) {
  require(fs::exists(path), "{} {}: no such file", what, path);
  require(!fs::is_directory(path), "{} {}: is a folder, a .npy file is required", what, path);
  return read_npy(path);
}

// Where --out may be written: a folder or nothing yet; checked before any work is done.
void require_out_dir(const std::string& out) {
  require(!out.empty(), "--out DIR is required");
  require(!fs::exists(out) || fs::is_directory(out), "--out {}: exists and is not a folder", out);
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  struct Opts {
    std::string stage, case_dir, candidate, output, rule;
    bool ftz = false, no_ftz = false, device = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("check", "judge a candidate output by the stage's contract (exit 0 pass, 1 fail, 2 bad input)");
  cmd->add_option("stage", o->stage, "stage, e.g. NN-name (see `ladder describe`)")->required();
  cmd->add_option("case_dir", o->case_dir, "case folder (from `ladder golden` or `ladder oracle`)")->required();
  cmd->add_option("candidate", o->candidate, "candidate output (.npy), or a folder of NAME.npy (the --output names, "
                  "default the first output)")
      ->required();
  cmd->add_option("--output", o->output, "which output the candidate is (default: the contract's first); a list "
                  "A,B,C judges FOLDER/A.npy, FOLDER/B.npy, ... each");
  cmd->add_option("--rule", o->rule, "another rule the contract offers (see `ladder describe STAGE`)");
  auto* ftz = cmd->add_flag("--ftz", o->ftz, "flush-to-zero: a subnormal expected value matched by 0 counts as "
                            "equal (a GPU's fast-math or FTZ kernel)");
  cmd->add_flag("--device", o->device, "the candidate came from a GPU: the device math library's documented error "
                "is allowed where the contract derives it (`ladder describe`), and FTZ is on; the report says so");
  cmd->add_flag("--no-ftz", o->no_ftz, "with --device: judge without flush-to-zero")->excludes(ftz);
  cmd->callback([o, &exit_code] {
    const Contract& c = contract(o->stage);
    std::vector<std::string> outputs;  // one, or the --output list
    for (size_t pos = 0; pos <= o->output.size();) {
      const size_t comma = std::min(o->output.find(',', pos), o->output.size());
      outputs.push_back(o->output.substr(pos, comma - pos));
      pos = comma + 1;
    }
    for (const std::string& name : outputs)
      if (!name.empty() || outputs.size() > 1) c.output(name);  // names the known outputs if not one
    const bool list = outputs.size() > 1;
    if (list) require(fs::is_directory(o->candidate), "CANDIDATE {}: --output lists {} outputs, so a folder of "
                      "NAME.npy files is required", o->candidate, outputs.size());
    const CaseFolder cf = read_case(c, o->case_dir);
    if (!cf.note.empty()) fmt::print("note: {}\n", cf.note);
    bool all = true;
    for (const std::string& name : outputs) {
      // A folder with one output named (or none: the first): FOLDER/NAME.npy, as with a list.
      const std::string file = (name.empty() ? c.outputs.front().name : name) + ".npy";
      const std::string path = list || fs::is_directory(o->candidate) ? (fs::path(o->candidate) / file).string()
                                                                      : o->candidate;
      require(list || !fs::is_directory(o->candidate) || fs::is_regular_file(path), "CANDIDATE {} is a folder without "
              "{} (a folder is read as NAME.npy per output)", o->candidate, file);
      const NpyData cand = read_candidate(path, "CANDIDATE");
      Tensors companions;  // the candidate's other outputs beside it, for rules that judge them together
      if (!o->rule.empty() || c.canonical)  // a layout that matches rows by their source reads it beside them
        for (const OutputSpec& s : c.outputs) {
          const fs::path p = fs::path(path).parent_path() / (s.name + ".npy");
          if (s.name != name && fs::is_regular_file(p) && !fs::equivalent(p, path)) companions[s.name] = read_npy(p);
        }
      const std::optional<bool> ftz_opt = o->ftz ? std::optional<bool>(true)
                                           : o->no_ftz ? std::optional<bool>(false) : std::nullopt;
      const CheckReport r = check(c, cf.inputs, cf.params, cf.expected, name, cand, o->rule, companions, ftz_opt,
                                  o->device);
      fmt::print("{} vs {} ({}): {}\n", path, o->case_dir, r.output, r.text);
      all = all && r.pass;
    }
    exit_code = all ? 0 : 1;
  });
}

void add_oracle_command(CLI::App& app) {
  struct Opts {
    std::string stage, inputs, out, params;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("oracle", "fp64 expected outputs of YOUR inputs, as a case folder `ladder check` reads");
  cmd->add_option("stage", o->stage, "stage (see `ladder describe STAGE` for the files)")->required();
  cmd->add_option("--inputs", o->inputs, "folder with one NAME.npy per contract input")->required();
  cmd->add_option("--out", o->out, "folder to write the expected outputs and case.json into")->required();
  cmd->add_option("--params", o->params, "JSON object of the contract's params (default: INPUTS/params.json if any)");
  cmd->callback([o] {
    const Contract& c = contract(o->stage);
    require(fs::is_directory(o->inputs), "--inputs {}: not a folder", o->inputs);
    require_out_dir(o->out);
    Tensors in;
    for (const TensorSpec& s : c.inputs) {
      const fs::path p = fs::path(o->inputs) / (s.name + ".npy");
      if (s.optional && !fs::exists(p)) continue;  // an optional input left out (its doc says what that means)
      require(fs::is_regular_file(p), "--inputs {}: {}.npy is missing ({} {} {}: see `ladder describe {}`)", o->inputs,
              s.name, s.name, s.dtype, s.shape, c.stage);
      in[s.name] = read_npy(p);
    }
    nlohmann::json params = nlohmann::json::object();
    const fs::path pf = o->params.empty() ? fs::path(o->inputs) / "params.json" : fs::path(o->params);
    if (!o->params.empty() || fs::exists(pf)) {
      require(fs::is_regular_file(pf), "--params {}: no such file", pf.string());
      params = read_json(pf);
      require(params.is_object(), "{}: params violate a JSON object", pf.string());
    }
    const Tensors out = run_oracle(c, in, params);
    write_case(c, o->out, in, params, out);
    fmt::print("wrote {} expected outputs of {} to {} (check with `ladder check {} {} CANDIDATE.npy`)\n", c.stage,
               o->inputs, o->out, c.stage, o->out);
  });
}

void add_describe_command(CLI::App& app) {
  auto stage = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("describe", "print a stage's case contract: input/output files, dtypes, shapes, rules");
  cmd->add_option("stage", *stage, "stage (default: every stage)");
  cmd->callback([stage] {
    if (!stage->empty()) return fmt::print("{}", describe(contract(*stage)));
    for (const Contract& c : contracts()) fmt::print("{}\n", describe(c));
  });
}

}  // namespace ladder::cli
