// fuzz/fuzz_case_json.cpp -- libFuzzer target: the case.json reader (ladder::read_case) on arbitrary text.
//
// Input: the bytes are written as case.json into a folder that holds a valid case of each stage with a
// contract (a copy of its first committed golden case that read_case accepts), then read_case runs
// -- JSON parsing, field and type checks, digests, the oracle on the folder's inputs with the file's
// params. Any outcome but a result or ladder::Error (another exception, a crash, ASan/UBSan report,
// leak, an allocation beyond -rss_limit_mb, a hang) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <iterator>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ladder/core/contract.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path& root() {
  static const fs::path r = fs::temp_directory_path() / ("ladder-fuzz-case-" + std::to_string(::getpid()));
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One folder per stage with a contract: a copy of its first committed case that read_case accepts as it
// is (with the sibling folders it names, 03-mla's model_small). The harness refuses to start if the
// untouched case.json is not accepted: a fuzzer whose every input is rejected early tests nothing.
struct Folder {
  const ladder::Contract* contract;
  fs::path dir;
};

std::vector<Folder> stage_folders() {
  std::vector<Folder> r;
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(root(), ec);
  });
  for (const ladder::Contract& c : ladder::contracts()) {
    const fs::path src = fs::path(LADDER_ROOT) / "data" / "golden" / c.stage;
    if (!fs::is_directory(src)) continue;
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(src))
      if (fs::is_regular_file(e.path() / "case.json")) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const fs::path& cs : cases) {
      const fs::path dst = root() / c.stage;
      fs::remove_all(dst);
      fs::create_directories(dst);
      fs::copy(src, dst, fs::copy_options::recursive);
      const fs::path dir = dst / cs.filename();
      try {
        (void)ladder::read_case(c, dir);
      } catch (const ladder::Error&) {
        continue;  // a sampled case, or one this stage's contract does not read: try the next
      }
      r.push_back({&c, dir});
      break;
    }
  }
  if (r.empty()) {
    std::fprintf(stderr, "fuzz_case_json: no committed case folder under %s is readable\n", LADDER_ROOT);
    std::abort();
  }
  for (const Folder& f : r) std::fprintf(stderr, "fuzz_case_json: seed folder %s\n", f.dir.string().c_str());
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto folders = stage_folders();
  // The same text as every stage's case.json: the corpus (fuzz/corpus/case_json, the committed cases'
  // own case.json files) then needs no stage index, and a mutation of one stage's file is tried on
  // the others too.
  for (const Folder& f : folders) {
    {
      std::ofstream out(f.dir / "case.json", std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    try {
      (void)ladder::read_case(*f.contract, f.dir);
    } catch (const ladder::Error&) {
    }
  }
  return 0;
}
