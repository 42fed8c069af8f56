// tests/06-disagg/test_operating.cpp -- stage 06, part 3: the operating-points table of `ladder reproduce
// 06-disagg` (tools/ladder/06-disagg/operating.cpp). The reported values below are the figures as printed in
// the sources (Huawei report Sec. 7.1.1 Table 2, 7.1.2, 7.2, 8 and abstract; DeepSeek day-6 overview), typed
// here from the documents so that an edit of data/papers/06-disagg-deploy.json fails; the predictions are
// never typed: only their relation to the table (ratio = predicted / reported) and their sign are checked.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "06-disagg/plan.hpp"
#include "ladder/core/json.hpp"
#include "source_dir.hpp"

namespace {
using ladder::cli::deploy06::OperatingPoint;

const std::map<std::string, double> kPrinted = {
    {"op_a2_decode_2k2k", 723},   {"op_a2_decode_1k2k", 784},  {"op_a2_4pc_tpot", 30},
    {"op_cm384_8pc_tpot", 15},    {"op_cm384_tpot_limit", 50}, {"op_cm384_tokens", 1920},
    {"op_a2_prefill_ms", 631},    {"op_a2_prefill_tbo", 3095}, {"op_deepseek_prefill_node", 73700},
    {"op_deepseek_decode_node", 14800}};
}  // namespace

TEST_CASE("operating points: the reported figures in data/papers are the sources' printed numbers") {
  const nlohmann::json j =
      ladder::read_json(ladder::source_dir() / "data" / "papers" / "06-disagg-deploy.json");
  std::map<std::string, double> stored;
  for (const auto& e : j.at("entries")) stored[e.at("id").get<std::string>()] = e.at("value").get<double>();
  for (const auto& [id, v] : kPrinted) {
    CAPTURE(id);
    REQUIRE(stored.count(id) == 1);
    CHECK(stored.at(id) == v);
  }
}

TEST_CASE("operating points: every row, ratio = predicted / reported, reported from data/papers") {
  const auto rows = ladder::cli::deploy06::operating_points();
  REQUIRE(rows.size() == kPrinted.size());
  for (const OperatingPoint& p : rows) {
    CAPTURE(p.id);
    REQUIRE(kPrinted.count(p.id) == 1);
    CHECK(p.reported == kPrinted.at(p.id));
    CHECK(std::isfinite(p.predicted));
    CHECK(p.predicted > 0);
    CHECK(p.ratio == p.predicted / p.reported);  // the same division, so exact
    CHECK(!p.how.empty());
    CHECK(!p.term.empty());
  }
  const std::string md = ladder::cli::deploy06::operating_points_table();
  for (const OperatingPoint& p : rows) {
    CAPTURE(p.point);
    CHECK(md.find("| " + p.point + " |") != std::string::npos);
  }
  CHECK(md.find("reproduc") == std::string::npos);  // nothing here is a reproduction
}
