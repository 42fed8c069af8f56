// ladder/core/cost.hpp -- what a rung costs, as a formula of its shape.
//
// bytes_read / bytes_written count traffic to the slow memory (DRAM on the CPU, HBM on a GPU) that
// the algorithm as written performs; extra_bytes is the scratch the rung must allocate beyond its
// inputs and outputs (naive attention's N x N score matrix, for example). Tiled rungs can also count
// the traffic they actually perform; a test checks that formula == count.
#pragma once
#include <string>

namespace ladder {

struct Cost {
  double flops = 0;          // floating-point operations (an exp counts as one)
  double bytes_read = 0;     // slow-memory reads
  double bytes_written = 0;  // slow-memory writes
  double extra_bytes = 0;    // scratch allocated beyond inputs and outputs

  double bytes() const { return bytes_read + bytes_written; }
  Cost& operator+=(const Cost& o) {
    flops += o.flops;
    bytes_read += o.bytes_read;
    bytes_written += o.bytes_written;
    extra_bytes += o.extra_bytes;
    return *this;
  }
  friend Cost operator+(Cost a, const Cost& b) { return a += b; }
  friend bool operator==(const Cost& a, const Cost& b) {  // spelled out: notebooks parse this as C++17
    return a.flops == b.flops && a.bytes_read == b.bytes_read && a.bytes_written == b.bytes_written &&
           a.extra_bytes == b.extra_bytes;
  }
};

}  // namespace ladder
