// ref/src/03-mla/lab/f32.cpp -- lab 03's student translation units (lab builds only; cmake/lab.cmake):
// absorb_output, attend_latent_me and absorbed_output at float.
//
// The only files of a lab build compiled against the student's headers (the starter folder comes first
// on their include path): together they instantiate the functions the student writes, for every type the
// library and the tests call them with. Everything else is compiled from the reference once and calls
// these out of line (LADDER_LAB_ENTRY, ladder/core/lab.hpp); these objects come first on every link
// line, so their copies are the ones that run. One unit per precision, so that a save recompiles the two
// side by side on two cores.
#include "ladder/03-mla/absorbed.hpp"
#include "ladder/03-mla/step.hpp"

namespace ladder::mla {

template Mat<float> absorb_output<float>(const Weights<float>&, const Mat<float>&);
template void attend_latent_me<float>(const Config&, const Mat<float>&, const Mat<float>&, const Array<float>&, int64_t,
                                      int64_t, Output<float>&, Mat<float>&);
template void absorbed_output<float>(const Weights<float>&, const Mat<float>&, Output<float>&);

}  // namespace ladder::mla
