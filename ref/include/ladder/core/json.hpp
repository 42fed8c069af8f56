// ladder/core/json.hpp -- JSON files: read one (Error naming the file and the parse error) and write one
// (sorted keys, two-space indent, newline-terminated: the bytes the goldens' case.json files hold).
#pragma once
#include <nlohmann/json.hpp>

#include <filesystem>

namespace ladder {

void write_json(const std::filesystem::path& path, const nlohmann::json& j);
nlohmann::json read_json(const std::filesystem::path& path);

}  // namespace ladder
