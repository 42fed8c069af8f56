// tests/golden_util.hpp -- helpers the stage tests share: golden folders, temp dirs, thread counts.
#pragma once
#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include "source_dir.hpp"

namespace ladder::test {

inline std::filesystem::path golden_dir(const std::string& stage) {
  return ladder::source_dir() / "data" / "golden" / stage;
}

// A fresh temporary folder, removed when the object goes out of scope.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("ladder-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Runs f with the OpenMP thread count set to n, restoring it afterwards.
template <class F>
void with_threads(int n, F&& f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  f();
  omp_set_num_threads(old);
}

// Whether the golden tests run rung `id` on every case: always, except in a course lab's test run, where
// scripts/lab sets LADDER_LAB_RUNGS to the rungs the student writes (lab.json "rungs", comma-separated):
// the other rungs are the reference's own code, the same in the lab as in the normal build, which tests
// them all. The student's rungs meet the same cases, oracle and tolerance either way.
inline bool lab_runs(const std::string& id) {
  const char* env = std::getenv("LADDER_LAB_RUNGS");
  if (env == nullptr || *env == '\0') return true;
  std::stringstream list(env);
  for (std::string r; std::getline(list, r, ',');)
    if (r == id) return true;
  return false;
}

}  // namespace ladder::test
