# The oracle's bits do not depend on the machine (ladder/core/gemm.hpp, ladder/core/math.hpp):
# every stage's goldens regenerated under other Eigen cache sizes and thread counts must be byte-identical
# to the committed files, and again with glibc forced onto its non-FMA code paths (a CPU without FMA
# gets other exp/log/sin/cos bits from glibc; the oracle must not use them).
ladder_add_test(test_math SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_math.cpp LIBS ladder_core)
ladder_add_test(test_golden_determinism SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_golden_determinism.cpp LIBS ladder_cuda ladder_core)
if(TARGET test_golden_determinism)
  add_test(NAME test_golden_determinism.no_fma COMMAND test_golden_determinism)
  set_tests_properties(test_golden_determinism.no_fma PROPERTIES LABELS unit
                       ENVIRONMENT "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4")
endif()
