# The native GPU build (LADDER_CUDA=GPU, cmake/ladder_gpu.cmake), configured and compiled from the CPU
# build wherever nvcc is used (the ci preset): ctest -L gpu-build. Running its tests needs a device:
# scripts/gpu-check. In the GPU build itself the CUDA tests carry the label "gpu".
if(TARGET nvcc_check AND NOT LADDER_LAB)
  set(launcher "")
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    set(launcher -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  add_test(NAME gpu_build
           COMMAND ${CMAKE_COMMAND} -DSOURCE=${LADDER_ROOT} -DBINARY=${CMAKE_BINARY_DIR}-gpu -DARCH=90 -DJOBS=2
                   ${launcher} -P ${LADDER_ROOT}/cmake/ladder_gpu_build_test.cmake)
  # Its folder is a sibling of this build's (build -> build-gpu), not inside it: ccache's base_dir makes
  # paths relative to the compiling folder, so only a folder at the same depth as this build's gets the
  # same compile commands for the objects the two builds share (ladder_core, most host files) and takes them
  # from the cache. build/gpu-build compiled all of them again (584 s on a fresh machine).
  # PROCESSORS 1 although it compiles with two jobs: most of its objects come from ccache and its
  # configure step and links use one core, which ctest fills with short tests meanwhile.
  set_tests_properties(gpu_build PROPERTIES LABELS gpu-build PROCESSORS 1 TIMEOUT 3600)
endif()
# The tolerance rule's device-math allowance (ladder/core/device_math.hpp): v1_naive's kernel with an
# expf moved by CUDA's documented 2-ulp bound passes the CUDA rule; 8x the bound and a dropped term
# fail. SIMT only (the moved expf emulates a device library; the GPU build leaves it out).
ladder_add_test(test_device_math SIMT SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_math_planted.cu
                LIBS ladder_cuda ladder_core)
