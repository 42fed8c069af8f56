# cmake/ladder_gpu_build_test.cmake -- the ctest "gpu_build" (label gpu-build, tests/gpu.cmake): configure
# the native GPU build (LADDER_CUDA=GPU) in BINARY and compile and link the targets a device would run:
# every .cu by nvcc (CMake's CUDA language), every host file with LADDER_GPU=1, libladder.so, the CLI,
# the CUDA test binaries and bench_gpu (target gpu_check, cmake/ladder_gpu.cmake). No device is needed
# to link. One architecture (ARCH) keeps it cheap; nvcc_check covers sm_80 and sm_90 in the same CI.
#   cmake -DSOURCE=<root> -DBINARY=<dir> -DARCH=90 [-DLAUNCHER=ccache] [-DJOBS=2] -P ladder_gpu_build_test.cmake
foreach(v SOURCE BINARY ARCH)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ladder_gpu_build_test: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()
set(args -S ${SOURCE} -B ${BINARY} -DCMAKE_BUILD_TYPE=Release -DLADDER_CUDA=GPU -DCMAKE_CUDA_ARCHITECTURES=${ARCH}
         -DLADDER_REQUIRE_ALL_TESTS=OFF)
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER} -DCMAKE_CUDA_COMPILER_LAUNCHER=${LAUNCHER})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu_build: configuring LADDER_CUDA=GPU failed (${rc})")
endif()
# What the check must prove: the CUDA side compiles for a device and links with the CUDA runtime --
# ladder_cuda (every .cu by nvcc, the host API with LADDER_GPU=1), libladder.so (everything linked
# together) and gpu_check (every CUDA test binary, bench_gpu, gpu_probe). The CLI is left out: its
# sources have no GPU code and compile as in the default build; scripts/gpu-check builds it on a device.
set(targets ladder_cuda ladder_shared gpu_check)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} -j ${JOBS} --target ${targets} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu_build: compiling the GPU build failed (${rc})")
endif()
message(STATUS "gpu_build: LADDER_CUDA=GPU configured and compiled for sm_${ARCH}: ${targets}")
