// ref/src/99-rowsum/golden.cpp -- the template stage's golden cases (data/golden/99-rowsum/<case>/).
#include <map>

#include "ladder/core/contract.hpp"
#include "ladder/core/rng.hpp"
#include "ladder/core/stage.hpp"

namespace ladder::rowsum {

namespace {
struct CaseSpec {
  int64_t rows, cols;
  uint64_t seed;
};
const std::map<std::string, CaseSpec>& specs() {
  static const std::map<std::string, CaseSpec> s = {{"small", {3, 7, 901}}, {"wide", {4, 4099, 902}}};
  return s;
}
}  // namespace

std::vector<std::string> golden_case_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : specs()) n.push_back(k);
  return n;
}

void write_golden_case(const std::string& name, const std::filesystem::path& dir, bool /*full*/) {
  const auto it = specs().find(name);
  require(it != specs().end(), "99-rowsum: no golden case '{}'", name);
  const CaseSpec& cs = it->second;
  Array<float> x({cs.rows, cs.cols});
  Rng rng(cs.seed);
  for (auto& v : x.data) v = static_cast<float>(rng.normal());
  const Contract& c = contract("99-rowsum");
  const Tensors in{{"x", to_npy(x)}};
  write_case(c, dir, in, nlohmann::json::object(), run_oracle(c, in, nlohmann::json::object()),
             {{"case", name}, {"seed", cs.seed}});
}

}  // namespace ladder::rowsum
