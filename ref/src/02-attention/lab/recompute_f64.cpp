// ref/src/02-attention/lab/recompute_f64.cpp -- lab 02's student translation units (lab builds only;
// cmake/lab.cmake): recompute_backward, at double.
//
// The only files of a lab build compiled against the student's headers (the starter folder comes first
// on their include path): together they instantiate the functions the student writes, for every type the
// library and the tests call them with. Everything else is compiled from the reference once and calls
// these out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); these objects come first on every link
// line, so their copies are the ones that run. The functions are split by header and by precision -- one
// unit per header and type; the tile products are not here but compiled once in the library,
// ladder/02-attention/tile_ops.hpp -- so a save of recompute.hpp recompiles its two units, side by side on two
// cores, and a save of the other header none of them.
#include "ladder/02-attention/recompute.hpp"

namespace ladder::attention {

template void recompute_backward<double>(const Problem&, const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*, double*, Tiles,
                                         Traffic*);

}  // namespace ladder::attention
