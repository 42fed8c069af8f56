# Stage 04 (MoE): the reference rungs vs the committed goldens and the planted bugs (the lab's test),
# the golden drift check (not in the lab: it judges the oracle itself).
ladder_add_test(test_04_moe
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_04_moe.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_04_moe_planted.cpp
  LIBS ladder_core)
ladder_add_test(test_04_moe_golden SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_04_moe_golden.cpp LIBS ladder_core)
# The CUDA rungs (cuda/src/04_moe*.cu) through SIMT in every schedule, and the removed-barrier plants.
ladder_add_test(test_04_moe_cuda
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_04_moe_cuda.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_04_moe_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
