// ref/src/06-disagg/lab/student.cpp -- lab 06's student translation unit (lab builds only; cmake/lab.cmake).
//
// The one file of a lab build compiled against the student's headers (the starter folder comes first
// on its include path): it emits the functions the student writes. Everything else is compiled from
// the reference once and calls these out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); this object
// comes first on every link line, so its copies are the ones that run. A save of a student header
// recompiles this file alone.
#include "ladder/06-disagg/decode_step.hpp"
#include "ladder/06-disagg/goodput.hpp"

namespace ladder::disagg {
namespace {
// An inline function is emitted only where it is used: taking its address emits the student's copy.
[[gnu::used]] constexpr auto* kCanAdmit = &can_admit;
[[gnu::used]] constexpr auto* kFinishDecodeStep = &finish_decode_step;
[[gnu::used]] constexpr auto* kFindGoodput = &find_goodput;
}  // namespace
}  // namespace ladder::disagg
