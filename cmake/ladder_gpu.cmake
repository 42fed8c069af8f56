# cmake/ladder_gpu.cmake -- LADDER_CUDA=GPU, the native GPU build (included by the top CMakeLists.txt
# before any target exists).
#
# The same CUDA rungs, host API, registry, CUDA tests, CLI, libladder.so and benchmarks as the default
# build, for a real device:
#   - cuda/src/*.cu are CUDA sources compiled by nvcc (CMake's CUDA language) for
#     CMAKE_CUDA_ARCHITECTURES (default 80;90, override with -DCMAKE_CUDA_ARCHITECTURES=89 or native);
#   - every translation unit that can include ladder/cuda/device.hpp -- everything linked with ladder_simt,
#     whose include path is the only way to it -- sees LADDER_GPU=1, g++- or nvcc-compiled:
#     device.hpp then hands out cudaMalloc memory and sync() surfaces launch errors (switching on
#     __CUDACC__ would give g++-compiled host code host memory while nvcc's kernels expect device
#     memory). The CPU-only library (ladder_core) is compiled exactly as in the default build, so the
#     GPU build's compile check (ctest gpu_build) takes its objects from ccache;
#   - one CUDA runtime, the shared libcudart, for nvcc's and g++'s objects alike;
#   - emulator-only tests (tests/simt/, *_planted.cu: they drive simt::Schedule and the emulator's
#     diagnostics) are left out; every other test is registered once (no SIMT schedules);
#   - Boost.Context (the emulator's fibers) is not needed.
# The default build (SIMT + the nvcc compile check) does not include this file.

if(LADDER_TSAN OR LADDER_ASAN)
  message(FATAL_ERROR "LADDER_CUDA=GPU is a native device build: it does not combine with LADDER_TSAN or "
                      "LADDER_ASAN (use compute-sanitizer, see scripts/gpu-check)")
endif()
set(LADDER_GPU ON)

# gpu_check: every binary a device run needs -- the CUDA test binaries (ladder_gpu_add_test ... SIMT adds
# each), bench_gpu and gpu_probe (bench/gpu) -- so `--target gpu_check` (the ctest gpu_build; the quick
# device run GPU_CHECK_TARGETS=gpu_check scripts/gpu-check) cannot miss a test binary added later.
add_custom_target(gpu_check)

if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(LADDER_GPU_NVCC nvcc PATHS /usr/local/cuda/bin)
  if(NOT LADDER_GPU_NVCC)
    message(FATAL_ERROR "LADDER_CUDA=GPU: nvcc not found in PATH or /usr/local/cuda/bin (set CUDACXX or "
                        "CMAKE_CUDA_COMPILER)")
  endif()
  set(CMAKE_CUDA_COMPILER ${LADDER_GPU_NVCC})
endif()
if(NOT CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX})
  set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})  # nvcc's host side = the project's g++
endif()
set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures of LADDER_CUDA=GPU (80 A100, 90 H100/H200)")

# CMake 3.25 (Debian 12) knows nvcc's -std flags only up to C++17 and refuses CUDA_STANDARD 20 ("does
# not know the compile flags to use"); nvcc >= 12 accepts -std=c++20. Tell CMake the flag before the
# language is enabled, so its compile-feature check records cuda_std_20 and CUDA_STANDARD 20 works
# the normal way (one -std flag, no "redefining -std" warning). Newer CMake sets the same itself.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
enable_language(CUDA)
if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
  message(FATAL_ERROR "LADDER_CUDA=GPU needs nvcc >= 12.0 (C++20); found ${CMAKE_CUDA_COMPILER_VERSION}")
endif()
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)

# fmt 9 turns constexpr off when it sees __NVCC__, leaving functions it still declares constexpr calling
# non-constexpr ones, which g++ (nvcc's host compiler) rejects.
add_compile_definitions($<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)

# ladder_gpu_host_flags(<target>) -- the target's INTERFACE_COMPILE_OPTIONS (written for g++) become
# g++-only, and reach nvcc's host compiler through -Xcompiler (nvcc rejects -Wall, -ffp-contract=off,
# -fstack-clash-protection). Entries that already select a language are kept as they are.
function(ladder_gpu_host_flags target)
  get_target_property(opts ${target} INTERFACE_COMPILE_OPTIONS)
  if(NOT opts)
    return()
  endif()
  set(out)
  foreach(o IN LISTS opts)
    if(o MATCHES "COMPILE_LANGUAGE")
      list(APPEND out "${o}")
    else()
      list(APPEND out "$<$<COMPILE_LANGUAGE:CXX>:${o}>" "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${o}>")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES INTERFACE_COMPILE_OPTIONS "${out}")
endfunction()

# ladder_gpu_add_test(<name> SOURCES ... LIBS ... [SIMT] [DEVICE]) -- ladder_add_test (tests/CMakeLists.txt)
# in the GPU build: emulator-only tests and sources left out, the rest registered once. Label "gpu" for
# tests of CUDA rungs (they need a device), "unit" for the others. DEVICE marks a test of tests/simt/
# whose checks hold on hardware too (test_tensor_core: what the PTX ISA defines, not what the emulator adds).
function(ladder_gpu_add_test name)
  cmake_parse_arguments(T "SIMT;DEVICE" "" "SOURCES;LIBS;LABELS" ${ARGN})
  set(sources)
  foreach(src IN LISTS T_SOURCES)
    if(src MATCHES "/tests/simt/" AND NOT T_DEVICE)
      return()  # the emulator's self-tests
    elseif(NOT src MATCHES "_planted\\.cu$")  # planted bugs found through simt::Schedule diagnostics
      list(APPEND sources ${src})
    endif()
  endforeach()
  if(NOT sources)
    return()  # nothing but emulator-only sources
  endif()
  add_executable(${name} ${sources})
  target_include_directories(${name} PRIVATE ${LADDER_ROOT}/tests)  # the shared test headers
  target_link_libraries(${name} PRIVATE ladder_test_main ladder_warnings ${T_LIBS})
  target_link_libraries(${name} PRIVATE ladder_source_dir)
  add_test(NAME ${name} COMMAND ${name})
  if(T_SIMT)
    set_tests_properties(${name} PROPERTIES LABELS gpu)
    add_dependencies(gpu_check ${name})
  elseif(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  else()
    set_tests_properties(${name} PROPERTIES LABELS unit)
  endif()
endfunction()
