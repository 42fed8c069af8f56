// simt/detail/config.hpp -- run-time options of the SIMT layer and its one way of failing.
//
// Options come from the environment on first use and may be overridden in-process (tests do):
//   SIMT_SCHEDULE = forward | reverse | random[:SEED]   order in which a block's threads are run
//   SIMT_THREADS  = N                                   OS workers that blocks are spread over
//   SIMT_STACK_KB = N                                   fiber stack per CUDA thread (default 128)
// A kernel that breaks a CUDA rule (divergent barrier, bad warp mask, deadlock) cannot be continued
// meaningfully, so the layer prints "simt: error: ..." naming the source line and aborts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <source_location>
#include <sstream>
#include <string>

namespace simt {

enum class Schedule {
  forward,  // thread 0, 1, 2, ... : each runs until it blocks (barrier, warp collective) or exits
  reverse,  // the last thread first
  random,   // a permutation per block from the seed, drawn again after every __syncthreads
};

struct Config {
  Schedule schedule = Schedule::forward;
  std::uint64_t seed = 1;                // for Schedule::random
  int threads = 0;                       // OS workers; 0 = one per hardware thread
  std::size_t stack_bytes = 128 * 1024;  // per CUDA thread; large local arrays need more
};

namespace detail {

// Messages are streamed, not built with std::string '+': g++ 12 at -O3 warns falsely (-Wrestrict)
// on `"literal" + std::string`, and the project builds with -Werror.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::fprintf(stderr, "simt: error: %s\n", cat(parts...).c_str());
  std::fflush(stderr);
  std::abort();
}

inline std::string where(const std::source_location& at) { return cat(at.file_name(), ":", at.line()); }

inline long parse_integer(const char* name, const std::string& text, long min) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < min)
    fail(name, "=", text, " is not an integer >= ", min);
  return value;
}

inline Config from_environment() {
  Config c;
  if (const char* s = std::getenv("SIMT_SCHEDULE")) {
    const std::string v(s);
    if (v == "forward") {
      c.schedule = Schedule::forward;
    } else if (v == "reverse") {
      c.schedule = Schedule::reverse;
    } else if (v == "random" || v.rfind("random:", 0) == 0) {
      c.schedule = Schedule::random;
      if (v.size() > 7) c.seed = static_cast<std::uint64_t>(parse_integer("SIMT_SCHEDULE=random:SEED", v.substr(7), 0));
    } else {
      fail("SIMT_SCHEDULE=", v, " is not one of forward, reverse, random, random:SEED");
    }
  }
  if (const char* s = std::getenv("SIMT_THREADS")) c.threads = static_cast<int>(parse_integer("SIMT_THREADS", s, 1));
  if (const char* s = std::getenv("SIMT_STACK_KB"))
    c.stack_bytes = static_cast<std::size_t>(parse_integer("SIMT_STACK_KB", s, 16)) * 1024;
  return c;
}

struct ConfigStore {
  std::mutex mutex;
  Config value = from_environment();
};

inline ConfigStore& config_store() {
  static ConfigStore store;
  return store;
}

}  // namespace detail

// The options the next launch will use.
inline Config config() {
  auto& s = detail::config_store();
  std::lock_guard lock(s.mutex);
  return s.value;
}

// Override the options for later launches (not while a launch is running).
inline void set_config(const Config& c) {
  auto& s = detail::config_store();
  std::lock_guard lock(s.mutex);
  s.value = c;
}

}  // namespace simt
