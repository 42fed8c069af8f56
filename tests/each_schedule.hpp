// tests/each_schedule.hpp -- run a test body once in each of SIMT's three thread schedules (forward, reverse,
// random), as ctest runs every CUDA test: for the planted-mistake tests, which must see their mistake caught in
// every order. The process's SIMT configuration is restored afterwards, also when a REQUIRE inside throws.
//   ladder::test::each_schedule([&](simt::Schedule s) { ... });      // the configured thread count
//   ladder::test::each_schedule([&](simt::Schedule) { ... }, 1);     // one OS thread (a fixed block order)
#pragma once
#include <doctest/doctest.h>
#include <simt.hpp>

namespace ladder::test {

template <class F>
void each_schedule(F body, int threads = 0) {
  struct Restore {
    simt::Config saved = simt::config();
    ~Restore() { simt::set_config(saved); }
  } restore;
  for (simt::Schedule s : {simt::Schedule::forward, simt::Schedule::reverse, simt::Schedule::random}) {
    CAPTURE(static_cast<int>(s));
    simt::Config c = restore.saved;
    c.schedule = s;
    if (threads > 0) c.threads = threads;
    simt::set_config(c);
    body(s);
  }
}

}  // namespace ladder::test
