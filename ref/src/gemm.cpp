// gemm.cpp -- the one instantiation of ladder::gemm for float and double (lab builds declare them
// extern; see ladder/core/gemm.hpp).
#include "ladder/core/gemm.hpp"

namespace ladder {

LADDER_GEMM_INSTANCES(, float)
LADDER_GEMM_INSTANCES(, double)

}  // namespace ladder
