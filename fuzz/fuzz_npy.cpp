// fuzz/fuzz_npy.cpp -- libFuzzer target: the .npy parser (ladder::parse_npy) on arbitrary bytes.
//
// The contract: any byte string either parses into an NpyData whose byte count matches its dtype and
// shape, or raises ladder::Error. Anything else -- another exception, a crash, an out-of-bounds read
// (ASan), undefined behaviour (UBSan), a leak, an allocation beyond -rss_limit_mb (a huge declared
// shape allocated before it is checked) or a hang -- is a bug libFuzzer reports.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ladder/core/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const ladder::NpyData d = ladder::parse_npy(bytes, "fuzz.npy");
    if (d.bytes.size() != static_cast<size_t>(ladder::numel(d.shape)) * ladder::dtype_size(d.dtype)) std::abort();
  } catch (const ladder::Error&) {
  }
  return 0;
}
