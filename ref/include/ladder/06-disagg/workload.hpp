// ladder/06-disagg/workload.hpp -- stage 06: seeded request streams for the event simulator.
//
//   06 disagg   step-time model -> [event simulator] -> KV-cache migration
//
// Arrivals are a renewal process: gaps of mean 1 / rate drawn as gamma(shape 1/cv^2) -- cv = 1 is
// Poisson (exponential gaps), DistServe's setting. The unit-rate gaps come from their own stream and
// are divided by the rate, so two runs at different rates see the same requests at scaled times
// (common random numbers: attainment vs rate is then smooth and bisection is well posed). Lengths
// come from a second stream: fixed, uniform in [lo, hi], or a trace cycled in order. A workload may
// instead list its requests explicitly (Workload::arrivals: the 06-disagg case contract's input), in
// which case rate, cv, lengths and seed are not used and nothing is drawn.
// Only +, *, /, sqrt, std::log and (cv > 1 only) std::exp are used: ladder/core/rng.hpp's rule.
#pragma once
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ladder/core/error.hpp"
#include "ladder/core/rng.hpp"

namespace ladder::disagg {

struct LengthDist {
  enum class Kind { fixed, uniform, trace } kind = Kind::fixed;
  int64_t lo = 1, hi = 1;  // fixed: lo == hi
  static LengthDist fixed(int64_t n) { return {Kind::fixed, n, n}; }
  static LengthDist uniform(int64_t lo, int64_t hi) { return {Kind::uniform, lo, hi}; }
};

struct Arrival {
  int64_t id = 0;
  double t_ms = 0;
  int64_t input = 0, output = 0;
};

struct Workload {
  double rate = 1.0;  // requests per second
  double cv = 1.0;    // coefficient of variation of the gaps; 1 = Poisson
  LengthDist input = LengthDist::fixed(512), output = LengthDist::fixed(64);
  std::vector<std::pair<int64_t, int64_t>> trace;  // (input, output) when kind == trace
  int64_t requests = 1000;
  uint64_t seed = 1;
  std::vector<Arrival> arrivals;  // explicit requests (ids 0..n-1 in order); empty: drawn from the streams
};

inline void check_workload(const Workload& w) {
  if (!w.arrivals.empty()) {
    require(w.requests == static_cast<int64_t>(w.arrivals.size()), "workload: requests = {} violates == {} (the listed "
            "requests)", w.requests, w.arrivals.size());
    double last = 0;
    for (size_t i = 0; i < w.arrivals.size(); ++i) {
      const Arrival& a = w.arrivals[i];
      require(a.id == static_cast<int64_t>(i), "workload: request {} has id {} violates id == its index", i, a.id);
      require(std::isfinite(a.t_ms) && a.t_ms >= last, "workload: arrival_ms[{}] = {} violates finite and >= {} "
              "(arrivals non-decreasing from 0)", i, a.t_ms, last);
      require(a.input >= 1 && a.output >= 1, "workload: request {} (input {}, output {}) violates input >= 1 and "
              "output >= 1", i, a.input, a.output);
      last = a.t_ms;
    }
    return;
  }
  require(std::isfinite(w.rate) && w.rate > 0, "workload: rate = {} violates rate > 0", w.rate);
  require(std::isfinite(w.cv) && w.cv > 0, "workload: cv = {} violates cv > 0", w.cv);
  require(w.requests >= 1, "workload: requests = {} violates requests >= 1", w.requests);
  for (const auto* d : {&w.input, &w.output}) {
    const char* which = d == &w.input ? "input" : "output";
    if (d->kind == LengthDist::Kind::trace) {
      require(!w.trace.empty(), "workload: {} = trace needs a non-empty trace", which);
      continue;
    }
    require(d->lo >= 1 && d->hi >= d->lo, "workload: {} lengths [{}, {}] violate 1 <= lo <= hi", which, d->lo, d->hi);
  }
  for (const auto& [i, o] : w.trace)
    require(i >= 1 && o >= 1, "workload: trace row ({}, {}) violates input >= 1 and output >= 1", i, o);
}

// The longest input + output the workload can produce (the KV capacity must hold it).
inline int64_t max_request_tokens(const Workload& w) {
  using K = LengthDist::Kind;
  if (!w.arrivals.empty()) {
    int64_t m = 0;
    for (const Arrival& a : w.arrivals) m = std::max(m, a.input + a.output);
    return m;
  }
  int64_t both = 0, in = w.input.hi, out = w.output.hi;
  for (const auto& [i, o] : w.trace) {
    both = std::max(both, i + o);
    if (w.input.kind == K::trace) in = std::max(in, i);
    if (w.output.kind == K::trace) out = std::max(out, o);
  }
  return w.input.kind == K::trace && w.output.kind == K::trace ? both : in + out;
}

class ArrivalStream {
 public:
  explicit ArrivalStream(const Workload& w)
      : w_(w), gaps_(w.seed), lens_(w.seed ^ 0x9e3779b97f4a7c15ull), shape_(1.0 / (w.cv * w.cv)) {
    check_workload(w);
  }
  bool done() const { return next_id_ >= w_.requests; }
  Arrival next() {
    if (!w_.arrivals.empty()) return w_.arrivals[static_cast<size_t>(next_id_++)];
    unit_t_ += gap();
    Arrival a;
    a.id = next_id_++;
    a.t_ms = unit_t_ * 1e3 / w_.rate;
    const size_t row = w_.trace.empty() ? 0 : static_cast<size_t>(a.id) % w_.trace.size();
    a.input = length(w_.input, row, true);
    a.output = length(w_.output, row, false);
    return a;
  }

 private:
  // Gamma(shape k, scale 1/k): mean 1, cv = 1/sqrt(k). Marsaglia & Tsang (2000) for k >= 1; for k < 1
  // the boost G(k) = G(k + 1) U^(1/k). k = 1 is the exponential -log(1 - U).
  double gap() {
    if (shape_ == 1.0) return -std::log(1.0 - gaps_.uniform());
    const double k = shape_ < 1.0 ? shape_ + 1.0 : shape_;
    const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    double g = 0;
    for (;;) {
      const double x = gaps_.normal(), v0 = 1.0 + c * x;
      if (v0 <= 0) continue;
      const double v = v0 * v0 * v0, u = gaps_.uniform();
      if (u > 0 && std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) {
        g = d * v;
        break;
      }
    }
    if (shape_ < 1.0) g *= std::exp(std::log(1.0 - gaps_.uniform()) / shape_);
    return g / shape_;
  }
  int64_t length(const LengthDist& d, size_t row, bool input) {
    switch (d.kind) {
      case LengthDist::Kind::fixed: return d.lo;
      case LengthDist::Kind::uniform: return d.lo + static_cast<int64_t>(lens_.uniform_int(static_cast<uint64_t>(d.hi - d.lo + 1)));
      case LengthDist::Kind::trace: return input ? w_.trace[row].first : w_.trace[row].second;
    }
    return d.lo;
  }
  Workload w_;
  Rng gaps_, lens_;
  double shape_, unit_t_ = 0;
  int64_t next_id_ = 0;
};

}  // namespace ladder::disagg
