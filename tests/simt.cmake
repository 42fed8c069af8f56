# SIMT self-tests: every primitive of the run-anywhere layer (cuda/simt) against expected values,
# planted barrier bugs that the schedules and TSan must catch, and the layer's diagnostics.
# Registered per schedule (forward, reverse, random:1) and once in the TSan build. The test kernels
# are also compiled by nvcc (nvcc_check) to show they are valid CUDA.
set(SIMT_TEST_KERNELS
    ${CMAKE_CURRENT_LIST_DIR}/simt/kernels_primitives.cu
    ${CMAKE_CURRENT_LIST_DIR}/simt/kernels_planted.cu
    ${CMAKE_CURRENT_LIST_DIR}/simt/kernels_diagnostics.cu
    ${CMAKE_CURRENT_LIST_DIR}/simt/kernels_shared.cu)
# Tensor cores (cuda/simt/tensor_core.hpp): the E4M3 mma needs sm_89, so nvcc compiles these for it too.
set(SIMT_MMA_KERNELS ${CMAKE_CURRENT_LIST_DIR}/simt/kernels_mma.cu)
ladder_add_test(test_simt SIMT
  SOURCES ${SIMT_TEST_KERNELS}
          ${SIMT_MMA_KERNELS}
          ${CMAKE_CURRENT_LIST_DIR}/simt/child_process.cpp
          ${CMAKE_CURRENT_LIST_DIR}/simt/test_simt_primitives.cpp
          ${CMAKE_CURRENT_LIST_DIR}/simt/test_simt_detection.cpp
          ${CMAKE_CURRENT_LIST_DIR}/simt/test_simt_mma.cpp
          ${CMAKE_CURRENT_LIST_DIR}/simt/test_simt_shared.cpp
  LIBS ladder_simt)
# What the PTX ISA defines of the tensor-core operations (fragments, ldmatrix, mma arithmetic, cp.async after
# its waits): on the emulator here, and on the device in the native GPU build (DEVICE), where it also
# measures how the hardware's mma bits differ from the emulation's.
ladder_add_test(test_tensor_core SIMT DEVICE
  SOURCES ${SIMT_MMA_KERNELS} ${CMAKE_CURRENT_LIST_DIR}/simt/test_tensor_core.cpp
  LIBS ladder_simt)
ladder_nvcc_check(simt_tests SOURCES ${SIMT_TEST_KERNELS})
ladder_nvcc_check(simt_mma SOURCES ${SIMT_MMA_KERNELS} ARCHS 80 89 90)
