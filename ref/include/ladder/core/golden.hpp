// ladder/core/golden.hpp -- golden cases: data/golden/NN-stage/<case>/{*.npy, case.json}.
//
// Each stage provides the names of its cases and a writer that computes a case from its seed with the
// fp64 reference. `ladder golden --regenerate` rewrites every case; the stage's test regenerates each
// case into a temporary folder and fails on drift from the committed files.
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ladder/core/json.hpp"  // read_json, write_json

namespace ladder {

inline constexpr const char* kVersion = "0.1.0";
inline constexpr int kGoldenFormatVersion = 1;

struct GoldenStage {
  std::string stage;  // "NN-name"
  std::function<std::vector<std::string>()> case_names;
  // Writes case `name` into `dir` (created). full = also write arrays that the committed copy samples
  // (cases too large for the repository store a sample; `ladder golden --case` writes them whole).
  std::function<void(const std::string& name, const std::filesystem::path& dir, bool full)> write_case;
};

// Every stage with goldens (ref/src/golden.cpp).
const std::vector<GoldenStage>& golden_stages();
const GoldenStage& golden_stage(const std::string& stage);

// The case.json every case carries (fields listed in the README's oracle section); callers add
// stage-specific fields.
nlohmann::json case_manifest(const std::string& stage, const std::vector<std::string>& rungs, uint64_t seed,
                             const nlohmann::json& shapes, const nlohmann::json& dtypes,
                             const nlohmann::json& tolerance);

}  // namespace ladder
