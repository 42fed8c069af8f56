// ladder/core/stage.hpp -- a stage is one declaration: its Stage record.
//
// Each stage lives in folders named by its id (NN-name: two digits, '-', lower-case letters) inside the
// fixed top-level folders, and declares ONE record in ref/src/<id>/stage.cpp:
//
//   namespace ladder::stage_records {
//   Stage stage_NN_name() {                // the id with '-' as '_', prefixed "stage_"
//     Stage s;
//     s.id = "NN-name";
//     s.title = "first rung -> second rung -> ...";
//     s.contract = &name_contract;         // inputs, outputs, each output's rule (k, floor, baseline)
//     s.ref_rungs = &register_name;        // the reference rungs
//     s.golden_cases = ...; s.write_golden_case = ...;
//     s.cuda_rungs = true; s.bench = true;
//     return s;
//   }
//   }
//
// (chapters/adding-a-stage.md walks through it, with the smallest stage as its example.)
//
// Nothing in core or in the shared tools names a stage: CMake generates the list of records from the
// folders ref/src/NN-name/ (cmake/stages.cmake), and likewise the CUDA rungs from cuda/src/NN-name/
// registry.cpp and the CLI's reproduce sections from tools/ladder/NN-name/. tests/test_stages.cpp fails
// when a stage folder anywhere is not a registered stage, or a record lacks a part it promises.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ladder/core/contract.hpp"
#include "ladder/core/registry.hpp"

namespace ladder {

struct Stage {
  std::string id;     // "NN-name": the one spelling (folders, case.json, registry, CLI, Python)
  std::string title;  // one line: the rungs of the ladder, "naive -> safe -> online"
  // The case contract: inputs, params, outputs and each output's rule (exact, or the tolerance rule
  // with its k and baseline), the fp64 oracle. `ladder golden / check / oracle / describe / run`, the
  // tests, the lab judge and Python all read the rule from here.
  std::function<Contract()> contract;
  // The stage in other projects' interfaces (layouts): contracts named "<id>/<layout>" (03-mla/flashmla), found
  // by contract() beside the stage's own, not listed by contracts() (they have no goldens of their own).
  std::vector<std::function<Contract()>> layouts = {};
  // Adds the stage's reference rungs (backend "ref") to the registry.
  std::function<void(Registry&)> ref_rungs;
  // The golden cases: their names, and the writer of one case into a folder (full = also the arrays
  // that the committed copy of a large case only samples).
  std::function<std::vector<std::string>()> golden_cases;
  std::function<void(const std::string& name, const std::filesystem::path& dir, bool full)> write_golden_case;
  // Promises about the other folders, checked by tests/test_stages.cpp. Every stage has its chapter
  // (chapters/<id>/README.md), notebook (notebooks/<id>.ipynb), goldens (data/golden/<id>/) and
  // reproduce section (tools/ladder/<id>/reproduce.cpp).
  bool cuda_rungs = false;          // cuda/src/<id>/registry.cpp registers rungs of backend "cuda"
  bool lab = true;                  // chapters/<id>/lab/lab.json
  bool bench = false;               // it has a benchmark program: bench/<id>/bench.cpp, built as bench_<NN_name>
};

// Every stage, in ladder order: the list CMake generates from the folders ref/src/NN-name/.
const std::vector<Stage>& stages();
// The stage `id`; Error "no stage 'x' (did you mean 'y'? stages: ...)" otherwise.
const Stage& stage(const std::string& id);

}  // namespace ladder
