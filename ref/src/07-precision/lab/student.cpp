// ref/src/07-precision/lab/student.cpp -- lab 07's student translation unit (lab builds only; cmake/lab.cmake).
//
// The one file of a lab build compiled against the student's header (the starter folder comes first on
// its include path): it emits the student's two functions. Everything else is compiled from the
// reference once and calls them out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); this object comes
// first on every link line, so its copies are the ones that run. A save recompiles this file alone.
#include "ladder/07-precision/fp8_kernels.hpp"

namespace ladder::precision {
namespace {
// An inline function is emitted only where it is used: taking its address emits the student's copy.
[[gnu::used]] constexpr auto* kEncodeE4m3 = &encode_e4m3;
[[gnu::used]] constexpr auto* kFp8BlockDot = &fp8_block_dot;
}  // namespace
}  // namespace ladder::precision
