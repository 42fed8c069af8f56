// ladder/core/registry.hpp -- the one registry of rungs.
//
// Every rung of every stage is registered once: {stage, id, name, doc, backend, function, cost}.
// Tests iterate it (and assert every registered rung was exercised), the CLI lists and runs from it,
// benchmarks and notebooks enumerate it. The function is stored type-erased (std::any); each stage
// documents the function type it stores (in its header) and reads it back with fn<F>().
#pragma once
#include <any>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ladder/core/cost.hpp"
#include "ladder/core/error.hpp"
#include "ladder/core/tensor.hpp"

namespace ladder {

struct Rung {
  std::string stage;    // "NN-name"
  std::string id;       // "online" (unique within stage + backend)
  std::string name;     // "online softmax (notes Alg. 3)"
  std::string doc;      // one line
  std::string backend;  // "ref" (Eigen CPU reference) or "cuda" (CUDA kernel; SIMT on the CPU)
  std::any function;    // stage-specific callable, see the stage header
  std::function<Cost(const Shape&)> cost;  // formula of the shape the stage documents
  std::string cost_doc;                    // the formula in words, for `ladder list`

  std::string key() const { return stage + "/" + backend + "/" + id; }

  template <class F>
  const F& fn() const {
    const F* f = std::any_cast<F>(&function);
    require(f != nullptr, "registry: rung {} does not hold the function type the caller asked for", key());
    return *f;
  }
};

class Registry {
 public:
  void add(Rung r) {
    for (const auto& o : rungs_)
      require(o.key() != r.key(), "registry: rung {} registered twice", r.key());
    rungs_.push_back(std::move(r));
  }
  const std::vector<Rung>& all() const { return rungs_; }
  std::vector<const Rung*> stage(const std::string& stage, const std::string& backend = "") const {
    std::vector<const Rung*> r;
    for (const auto& x : rungs_)
      if (x.stage == stage && (backend.empty() || x.backend == backend)) r.push_back(&x);
    return r;
  }
  const Rung& find(const std::string& stage, const std::string& backend, const std::string& id) const {
    for (const auto& x : rungs_)
      if (x.stage == stage && x.backend == backend && x.id == id) return x;
    throw Error("registry: no rung " + stage + "/" + backend + "/" + id);
  }
  std::vector<std::string> stages() const {
    std::vector<std::string> s;
    for (const auto& x : rungs_)
      if (std::find(s.begin(), s.end(), x.stage) == s.end()) s.push_back(x.stage);
    return s;
  }

 private:
  std::vector<Rung> rungs_;
};

// The full registry (ref/src/stage.cpp): every stage's reference rungs, then, in a program linked with
// the ladder_cuda library, every CUDA rung.
const Registry& registry();

// Coverage: tests call mark_exercised(rung) and finally assert that every rung of a stage was run.
class Coverage {
 public:
  void mark(const Rung& r) { seen_.insert(r.key()); }
  std::vector<std::string> missing(const Registry& reg, const std::string& stage, const std::string& backend) const {
    std::vector<std::string> m;
    for (const Rung* r : reg.stage(stage, backend))
      if (!seen_.count(r->key())) m.push_back(r->key());
    return m;
  }

 private:
  std::set<std::string> seen_;
};

}  // namespace ladder
