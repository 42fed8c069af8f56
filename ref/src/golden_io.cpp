// ref/src/golden_io.cpp -- JSON files (core/json.hpp) and the manifest every golden writer starts from
// (core/golden.hpp). Apart from the stage table (golden.cpp) so that a program that only reads case
// folders (the fuzz targets) does not link every stage's golden writer.
#include <fstream>

#include "ladder/core/error.hpp"
#include "ladder/core/golden.hpp"
#include "ladder/core/json.hpp"

namespace ladder {

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
