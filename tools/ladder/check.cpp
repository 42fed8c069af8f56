// tools/ladder/check.cpp -- `ladder check STAGE CASE_DIR CANDIDATE.npy`: the tolerance rule on a file.
//
// Exit 0: the candidate passes; 1: it fails (the full report is printed); 2: bad input (missing or
// corrupt file, wrong dtype or shape of a golden file) -- one line, via ladder::Error.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
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

// Stage 05: integer maps compared exactly with the case's expected file (--output, default the first
// output the case lists). Ties are broken as ladder's stable sort does (see chapters/05-eplb).
bool check_eplb(const fs::path& dir, const fs::path& cand_path, std::string output) {
  const nlohmann::json j = read_json(dir / "case.json");
  require(j.value("stage", "") == "05-eplb", "{}: case.json is for stage '{}', not 05-eplb", dir.string(),
          j.value("stage", ""));
  const auto outputs = j.value("outputs", std::vector<std::string>{});
  require(!outputs.empty(), "{}: case.json lists no outputs", dir.string());
  if (output.empty()) output = outputs.front();
  require(std::find(outputs.begin(), outputs.end(), output) != outputs.end(),
          "check: --output '{}' is not an output of this case (outputs: {})", output, fmt::join(outputs, ", "));
  const Array<int64_t> expected = load_npy<int64_t>(dir / (output + ".npy"));
  const NpyData raw = read_npy(cand_path);
  Array<int64_t> cand(raw.shape);
  if (raw.dtype == DType::I8) {
    cand = load_npy<int64_t>(cand_path);
  } else {
    require(raw.dtype == DType::I4, "{}: dtype {} where an integer dtype (<i4 or <i8) is required",
            cand_path.string(), dtype_name(raw.dtype));
    cand = load_npy<int32_t>(cand_path).cast<int64_t>();
  }
  const ExactReport r = compare_exact(expected, cand);
  fmt::print("{} vs {}/{}.npy: {}\n", cand_path.string(), dir.string(), output, r.text());
  return r.pass;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  struct Opts {
    std::string stage, case_dir, candidate, output;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("check", "apply the tolerance rule to a candidate output (exit 0 pass, 1 fail, 2 bad input)");
  cmd->add_option("stage", o->stage, "stage, e.g. 01-softmax")->required();
  cmd->add_option("case_dir", o->case_dir, "golden case folder (from `ladder golden`)")->required();
  cmd->add_option("candidate", o->candidate, "candidate output (.npy)")->required();
  cmd->add_option("--output", o->output, "which output the candidate is (05-eplb: phy2log, log2phy or logcnt)");
  cmd->callback([o, &exit_code] {
    require(fs::is_directory(o->case_dir), "check: CASE_DIR '{}' is not a folder", o->case_dir);
    if (o->stage == "01-softmax") {
      require(o->output.empty(), "check: 01-softmax has one output; --output is not used");
      exit_code = check_softmax(o->case_dir, o->candidate) ? 0 : 1;
      return;
    }
    if (o->stage == "05-eplb") {
      exit_code = check_eplb(o->case_dir, o->candidate, o->output) ? 0 : 1;
      return;
    }
    throw Error("check: stage '" + o->stage + "' has no file check yet (stages with one: 01-softmax, 05-eplb)");
  });
}

}  // namespace ladder::cli
