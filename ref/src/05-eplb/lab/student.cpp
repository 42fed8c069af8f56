// ref/src/05-eplb/lab/student.cpp -- lab 05's student translation unit (lab builds only; cmake/lab.cmake).
//
// The one file of a lab build compiled against the student's headers (the starter folder comes first
// on its include path): it instantiates the functions the student writes, for every type the library
// and the tests call them with. Everything else is compiled from the reference once and calls these
// out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); this object comes first on every link line, so
// its copies are the ones that run. A save of a student header recompiles this file alone.
#include "ladder/05-eplb/algorithm.hpp"

namespace ladder::eplb {

template Packing balanced_packing<float>(const Mat<float>&, Index);
template Packing balanced_packing<double>(const Mat<double>&, Index);
template Replication replicate_experts<float>(const Mat<float>&, Index);
template Replication replicate_experts<double>(const Mat<double>&, Index);

}  // namespace ladder::eplb
