// ref/src/04-moe/lab/student.cpp -- lab 04's student translation unit (lab builds only; cmake/lab.cmake).
//
// The one file of a lab build compiled against the student's headers (the starter folder comes first
// on its include path): it instantiates the functions the student writes, for every type the library
// and the tests call them with. Everything else is compiled from the reference once and calls these
// out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); this object comes first on every link line, so
// its copies are the ones that run. A save of a student header recompiles this file alone.
#include "ladder/04-moe/dispatch.hpp"
#include "ladder/04-moe/ragged_dot.hpp"
#include "ladder/04-moe/sorted.hpp"

namespace ladder::moe {

template void ragged_dot<float>(const float*, Index, Index, const float*, Index, Index, const Index*, float*);
template void ragged_dot<double>(const double*, Index, Index, const double*, Index, Index, const Index*, double*);
template Mat<float> unsort_combine<float>(const Mat<float>&, const Permutation&, const Routing<float>&, Index, Index);
template Mat<double> unsort_combine<double>(const Mat<double>&, const Permutation&, const Routing<double>&, Index,
                                            Index);

namespace {
// An inline function is emitted only where it is used: taking its address emits the student's copy.
[[gnu::used]] constexpr auto* kSortByKey = &sort_by_key;
}  // namespace

}  // namespace ladder::moe
