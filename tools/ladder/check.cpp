// tools/ladder/check.cpp -- `ladder check STAGE CASE_DIR CANDIDATE.npy`: the tolerance rule on a file.
//
// Exit 0: the candidate passes; 1: it fails (the full report is printed); 2: bad input (missing or
// corrupt file, wrong dtype or shape of a golden file) -- one line, via ladder::Error.
#include <fmt/format.h>

#include <filesystem>

#include "commands.hpp"
#include "ladder/core/compare.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/npy.hpp"
#include "ladder/softmax.hpp"

namespace ladder::cli {
namespace fs = std::filesystem;
namespace {

// Stage 01: oracle = the case's y.npy; baseline = safe softmax of x.npy in the candidate's precision.
bool check_softmax(const fs::path& dir, const fs::path& cand_path) {
  const nlohmann::json j = read_json(dir / "case.json");
  require(j.value("stage", "") == "01-softmax", "{}: case.json is for stage '{}', not 01-softmax", dir.string(),
          j.value("stage", ""));
  require(j.value("stored", "full") == "full",
          "{}: this case is committed as a sample; write it whole with `ladder golden 01-softmax --case {} --out DIR`",
          dir.string(), j.value("case", "?"));
  const Array<float> x = load_npy<float>(dir / "x.npy");
  const Array<double> y = load_npy<double>(dir / "y.npy");
  require(x.shape == y.shape, "{}: x.npy shape {} differs from y.npy shape {}", dir.string(), shape_str(x.shape),
          shape_str(y.shape));
  const NpyData raw = read_npy(cand_path);
  CompareReport r;
  if (raw.dtype == DType::F4) {
    const Array<float> c = load_npy<float>(cand_path);
    r = compare(y, c, softmax::apply(&softmax::safe_rows<float>, x), Tolerance{2, 4, 0x1p-23});
  } else if (raw.dtype == DType::F8) {
    const Array<double> c = load_npy<double>(cand_path);
    r = compare(y, c, softmax::apply(&softmax::safe_rows<double>, x.cast<double>()), Tolerance{2, 4, 0x1p-52});
  } else {
    throw Error(cand_path.string() + ": dtype " + dtype_name(raw.dtype) + " where <f4 or <f8 is required");
  }
  fmt::print("{} vs {}: {}\n", cand_path.string(), dir.string(), r.text());
  return r.pass;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  struct Opts {
    std::string stage, case_dir, candidate;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("check", "apply the tolerance rule to a candidate output (exit 0 pass, 1 fail, 2 bad input)");
  cmd->add_option("stage", o->stage, "stage, e.g. 01-softmax")->required();
  cmd->add_option("case_dir", o->case_dir, "golden case folder (from `ladder golden`)")->required();
  cmd->add_option("candidate", o->candidate, "candidate output (.npy)")->required();
  cmd->callback([o, &exit_code] {
    require(fs::is_directory(o->case_dir), "check: CASE_DIR '{}' is not a folder", o->case_dir);
    if (o->stage == "01-softmax") {
      exit_code = check_softmax(o->case_dir, o->candidate) ? 0 : 1;
      return;
    }
    throw Error("check: stage '" + o->stage + "' has no file check yet (stages with one: 01-softmax)");
  });
}

}  // namespace ladder::cli
