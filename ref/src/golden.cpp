// ref/src/golden.cpp -- the table of stages with golden cases, and case.json I/O.
#include "ladder/core/golden.hpp"

#include <fstream>
#include <sstream>

#include "ladder/core/error.hpp"
#include "ladder/golden_cases.hpp"

namespace ladder {

const std::vector<GoldenStage>& golden_stages() {
  static const std::vector<GoldenStage> stages = {
      {"01-softmax", &softmax::golden_case_names, &softmax::write_golden_case},
      {"02-attention", &attention::golden_case_names, &attention::write_golden_case},
      {"03-mla", &mla::golden_case_names, &mla::write_golden_case},
      {"04-moe", &moe::golden_case_names, &moe::write_golden_case},
      {"05-eplb", &eplb::golden_case_names,
       [](const std::string& n, const std::filesystem::path& d, bool) { eplb::write_golden_case(n, d); }},
      {"06-disagg", &disagg::golden_case_names, &disagg::write_golden_case},
  };
  return stages;
}

const GoldenStage& golden_stage(const std::string& stage) {
  std::string known;
  for (const auto& s : golden_stages()) {
    if (s.stage == stage) return s;
    known += (known.empty() ? "" : ", ") + s.stage;
  }
  throw Error("stage '" + stage + "' has no golden cases (stages with goldens: " + known + ")");
}

nlohmann::json case_manifest(const std::string& stage, const std::vector<std::string>& rungs, uint64_t seed,
                             const nlohmann::json& shapes, const nlohmann::json& dtypes,
                             const nlohmann::json& tolerance) {
  return nlohmann::json{{"format_version", kGoldenFormatVersion},
                        {"stage", stage},
                        {"rungs", rungs},
                        {"seed", seed},
                        {"shapes", shapes},
                        {"dtype", dtypes},
                        {"generator", std::string("ladder ") + kVersion},
                        {"tolerance", tolerance}};
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  require(out.good(), "{}: cannot open for writing", path.string());
  out << j.dump(2) << "\n";
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  require(in.good(), "{}: cannot open file", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

}  // namespace ladder
