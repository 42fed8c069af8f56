# The comparator (core/compare.hpp) and the case contracts (core/contract.hpp): wrong candidates of
# every kind fail, correct ones pass; case folders, digests and the generic oracle / check.
ladder_add_test(test_compare SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_compare.cpp LIBS ladder_core)
# Stage 05: the oracle is eplb.py's float32 arithmetic (an independent re-implementation judges it).
ladder_add_test(test_05_eplb_float32 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/05-eplb/test_eplb_float32.cpp LIBS ladder_core)
# A stage is one declaration (ladder/core/stage.hpp): every stage folder is a registered stage, and each
# record's promised parts exist (tests/test_stages.cpp). Links the CUDA rungs to check `cuda_rungs`.
ladder_add_test(test_stages SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_stages.cpp LIBS ladder_cuda ladder_core)
# The tolerance rule per independent slice: one head, sequence or token corrupted fails on every golden case.
ladder_add_test(test_slices SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_slices.cpp LIBS ladder_core)
# Low-precision formats (ladder/core/formats.hpp): every 8/16-bit pattern, every rounding boundary, and the
# CPU's F16C / AVX512_BF16 conversions on all 2^32 float32 inputs where the build has them.
ladder_add_test(test_formats SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_formats.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_formats_hw.cpp LIBS ladder_ref)
# Quantisers (ladder/core/quant.hpp): every granularity within the derived per-element bound; transposed or
# neighbouring scales fail it; zero tiles; the same bits for any thread count; SmoothQuant's smoothing.
ladder_add_test(test_quant SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant.cpp LIBS ladder_ref)
# A float64 candidate by its derived bound (core/fp64_bound.hpp): every float64 rung passes on every golden of
# 01-04, a float32 answer as <f8 fails, a 1e-12 error fails where the bound is tighter (the rest is printed).
ladder_add_test(test_fp64_bound SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fp64_bound.cpp LIBS ladder_cuda ladder_core)
