# Stage 05 (EPLB): README and code-reading examples exact, invariants on random and tie-heavy inputs,
# preconditions, thread-count independence, goldens (drift fails).
ladder_add_test(test_05_eplb
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_eplb.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_eplb_invariants.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_eplb_golden.cpp
  LIBS ladder_core)
# The CLI pieces (ladder eplb, ladder reproduce 05-eplb) through their entry points.
ladder_add_test(test_05_eplb_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_eplb_cli.cpp LIBS ladder_cli)
# The data-plane kernels (cuda/src/05-eplb/eplb.cu) through SIMT, in every schedule, vs the CPU loops.
ladder_add_test(test_05_eplb_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_eplb_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_eplb_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
