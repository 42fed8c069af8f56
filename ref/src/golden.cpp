// ref/src/golden.cpp -- the table of stages with golden cases (case.json I/O: ref/src/golden_io.cpp).
#include "ladder/core/golden.hpp"

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

}  // namespace ladder
