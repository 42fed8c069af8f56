// ref/src/lab/02_attention.cpp -- lab 02's student translation unit (lab builds only; cmake/lab.cmake).
//
// The one file of a lab build compiled against the student's headers (the starter folder comes first
// on its include path): it instantiates the functions the student writes, for every type the library
// and the tests call them with. Everything else is compiled from the reference once and calls these
// out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); this object comes first on every link line, so
// its copies are the ones that run. A save of a student header recompiles this file alone.
#include "ladder/attention/recompute.hpp"
#include "ladder/attention/tiled.hpp"

namespace ladder::attention {

template void tiled_forward<float>(const Problem&, const float*, const float*, const float*, float*, float*, float*,
                                   Tiles, Traffic*);
template void tiled_forward<double>(const Problem&, const double*, const double*, const double*, double*, double*,
                                    double*, Tiles, Traffic*);
template void recompute_backward<float>(const Problem&, const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*, float*, Tiles, Traffic*);
template void recompute_backward<double>(const Problem&, const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*, double*, Tiles,
                                         Traffic*);

}  // namespace ladder::attention
