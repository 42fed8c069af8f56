// ladder/06-disagg/step_model.hpp -- stage 06, rung 1: how long one engine step takes.
//
//   06 disagg   [step-time model] -> event simulator -> KV-cache migration
//
// One interface for every model: a batch description in, milliseconds out. The simulator only ever
// sees BatchStats, so a fitted formula, a roofline built from the stages' Cost, and a table a user
// measured are interchangeable (a per-layout model would be one more StepModel).
//   prefill batch: n requests of new lengths l_i   -> sum_tokens = sum l_i, sum_sq = sum l_i^2
//   decode batch:  B requests at context ctx_i     -> sum_tokens = sum ctx_i (tokens the step attends to)
// ctx_i = input_i + tokens generated so far (the token this step feeds is the last one generated).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ladder/core/error.hpp"

namespace ladder::disagg {

inline constexpr const char* kStage = "06-disagg";

struct BatchStats {
  int64_t n = 0;          // requests in the batch (B for decode)
  double sum_tokens = 0;  // prefill: sum of new tokens; decode: sum of contexts
  double sum_sq = 0;      // prefill: sum of squared lengths (attention pairs grow as l^2)
};

class StepModel {
 public:
  virtual ~StepModel() = default;
  virtual double prefill_ms(const BatchStats& b) const = 0;
  virtual double decode_ms(const BatchStats& b) const = 0;
  virtual std::string describe() const = 0;
};

// DistServe's fitted form (OSDI'24, simdistserve): prefill a + b sum(l) + c sum(l^2);
// decode a + b sum(ctx) + c B. Coefficients in ms; data/disagg/distserve-opt-13b-a100.json holds the
// published OPT-13B TP1 A100 ones with their source. Their simulator adds a per-step overhead; ours
// does not (simdistserve's decode adds "+2 + 1e-4 sum(ctx)" ms), so ours is the fitted form alone.
struct DistServeCoefficients {
  double prefill[3] = {0, 0, 0};
  double decode[3] = {0, 0, 0};
};

class DistServeModel final : public StepModel {
 public:
  explicit DistServeModel(const DistServeCoefficients& c) : c_(c) {
    for (int i = 0; i < 3; ++i) {
      require(c.prefill[i] >= 0, "distserve model: prefill[{}] = {} violates >= 0", i, c.prefill[i]);
      require(c.decode[i] >= 0, "distserve model: decode[{}] = {} violates >= 0", i, c.decode[i]);
    }
    require(c.prefill[0] + c.prefill[1] > 0, "distserve model: prefill a + b = 0 violates > 0 (zero-time steps)");
    require(c.decode[0] + c.decode[2] > 0, "distserve model: decode a + c = 0 violates > 0 (zero-time steps)");
  }
  double prefill_ms(const BatchStats& b) const override {
    return c_.prefill[0] + c_.prefill[1] * b.sum_tokens + c_.prefill[2] * b.sum_sq;
  }
  double decode_ms(const BatchStats& b) const override {
    return c_.decode[0] + c_.decode[1] * b.sum_tokens + c_.decode[2] * static_cast<double>(b.n);
  }
  std::string describe() const override {
    return fmt::format("distserve fitted: prefill {} + {} sum(l) + {} sum(l^2) ms; decode {} + {} sum(ctx) + {} B ms",
                       c_.prefill[0], c_.prefill[1], c_.prefill[2], c_.decode[0], c_.decode[1], c_.decode[2]);
  }
  const DistServeCoefficients& coefficients() const { return c_; }

 private:
  DistServeCoefficients c_;
};

// A table the user measured: rows (phase, batch, tokens, ms). For a batch of n requests the rows of
// the phase with the smallest batch >= n are used (the largest batch if none is that large), and ms is
// interpolated linearly in tokens between the two nearest rows (extrapolated from the two end rows).
struct TableRow {
  int64_t batch = 1;
  double tokens = 0, ms = 0;
};

class TableModel final : public StepModel {
 public:
  TableModel(std::vector<TableRow> prefill, std::vector<TableRow> decode, std::string source)
      : prefill_(group(std::move(prefill), "prefill")), decode_(group(std::move(decode), "decode")),
        source_(std::move(source)) {}
  double prefill_ms(const BatchStats& b) const override { return lookup(prefill_, b); }
  double decode_ms(const BatchStats& b) const override { return lookup(decode_, b); }
  std::string describe() const override { return "measured table " + source_; }

 private:
  using Groups = std::map<int64_t, std::vector<TableRow>>;  // batch -> rows sorted by tokens
  static Groups group(std::vector<TableRow> rows, const char* phase) {
    require(!rows.empty(), "table model: no {} rows (need at least one row per phase)", phase);
    Groups g;
    for (const TableRow& r : rows) {
      require(r.batch >= 1, "table model: {} row batch = {} violates batch >= 1", phase, r.batch);
      require(r.tokens >= 0, "table model: {} row tokens = {} violates tokens >= 0", phase, r.tokens);
      require(r.ms > 0, "table model: {} row ms = {} violates ms > 0", phase, r.ms);
      g[r.batch].push_back(r);
    }
    for (auto& [batch, v] : g) {
      std::stable_sort(v.begin(), v.end(), [](const TableRow& a, const TableRow& b) { return a.tokens < b.tokens; });
      for (size_t i = 1; i < v.size(); ++i)
        require(v[i].tokens > v[i - 1].tokens, "table model: {} batch {} has two rows at tokens = {}", phase, batch,
                v[i].tokens);
    }
    return g;
  }
  static double lookup(const Groups& g, const BatchStats& b) {
    auto it = g.lower_bound(b.n);
    if (it == g.end()) it = std::prev(g.end());
    const std::vector<TableRow>& v = it->second;
    if (v.size() == 1) return v[0].ms;
    size_t hi = 1;
    while (hi + 1 < v.size() && v[hi].tokens < b.sum_tokens) ++hi;
    const TableRow &p = v[hi - 1], &q = v[hi];
    const double ms = p.ms + (q.ms - p.ms) * (b.sum_tokens - p.tokens) / (q.tokens - p.tokens);
    return std::max(ms, 1e-6);  // extrapolating below the table must not yield a free or negative step
  }
  Groups prefill_, decode_;
  std::string source_;
};

// The CSV a user supplies: header "phase,batch,tokens,ms", phase in {prefill, decode}.
TableModel load_table_model(const std::string& path);  // ref/src/06-disagg/models.cpp

}  // namespace ladder::disagg
