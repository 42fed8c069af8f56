// tools/ladder/paper.hpp -- what a stage's section of `ladder reproduce` compares with and prints: the sources'
// figures (data/papers/<stage>.json, the one place they are written down) and the Markdown report that the
// section prints to stdout and returns for --out.
#pragma once
#include <fmt/format.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ladder/core/json.hpp"
#include "source_dir.hpp"

namespace ladder::cli {

// data/papers/STAGE.json's entries by id: each entry's "value" (values_only) or the whole entry.
inline std::map<std::string, nlohmann::json> paper_entries(const std::string& stage, bool values_only = true) {
  const auto j = read_json(ladder::source_dir() / "data" / "papers" / (stage + ".json"));
  std::map<std::string, nlohmann::json> m;
  for (const auto& e : j.at("entries")) m[e.at("id").get<std::string>()] = values_only ? e.at("value") : e;
  return m;
}

// A section's text: each line printed as it is made and kept as Markdown (a paragraph; a block in a code fence).
struct MarkdownReport {
  std::string md;
  void line(const std::string& s) {
    fmt::print("{}\n", s);
    md += s + "\n\n";
  }
  void block(const std::string& s) {
    fmt::print("{}", s);
    md += "```\n" + s + "```\n\n";
  }
};

}  // namespace ladder::cli
