// ladder/core/eigen.hpp -- Eigen, included once for the whole project (every ladder header and test
// includes Eigen through this file, so the diagnostic state below covers Eigen's SIMD paths).
//
// GCC 12 reports a false `'__Y' may be used uninitialized` (-Wmaybe-uninitialized), and where the
// path is certain `'__Y' is used uninitialized` (-Wuninitialized), inside its own avx512fintrin.h when
// Eigen's AVX-512 packet code is inlined (ptranspose in the GEMM packing; predux_max's
// _mm512_extractf32x4_ps in the vectorised softmax):
// the _mm512_undefined_* intrinsics initialise a vector with itself on purpose (GCC PR 105593, fixed
// in GCC 13). It fires only when the target has AVX-512 (e.g. -march=native on such a machine) and
// even though both headers are system headers; under -Werror it stops the build. The warnings are
// switched off for the inclusion of Eigen (which includes <immintrin.h>) and nowhere else: the
// diagnostic state GCC consults is the one at the intrinsic's line in that header.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Dense>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
