# cmake/ladder_fuzz_test.cmake -- the ctest "fuzz" (label fuzz, tests/fuzz.cmake): build fuzz/ (libFuzzer
# targets for the .npy parser and the case.json reader, clang++-19 with ASan + UBSan) in BINARY, then run
# each for a fixed number of inputs from its committed corpus. Any crash, sanitizer report, leak,
# allocation beyond the RSS limit or hang fails the test. libFuzzer writes the inputs it finds into the
# FIRST corpus folder: that is a scratch folder in BINARY, the committed corpus is read only.
#   cmake -DSOURCE=<root> -DBINARY=<dir> -DCXX=clang++-19 [-DJOBS=2] [-DNPY_RUNS=N] [-DCASE_RUNS=N] -P ladder_fuzz_test.cmake
foreach(v SOURCE BINARY CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ladder_fuzz_test: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED JOBS)
  set(JOBS 2)
endif()
if(NOT DEFINED NPY_RUNS)
  set(NPY_RUNS 300000)
endif()
if(NOT DEFINED CASE_RUNS)
  set(CASE_RUNS 10000)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE}/fuzz -B ${BINARY} -DCMAKE_CXX_COMPILER=${CXX}
                        -DCMAKE_BUILD_TYPE=Release -DLADDER_ROOT=${SOURCE} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz: configuring fuzz/ with ${CXX} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} -j ${JOBS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz: building the fuzz targets failed (${rc})")
endif()
foreach(pair "fuzz_npy;npy;${NPY_RUNS}" "fuzz_case_json;case_json;${CASE_RUNS}")
  list(GET pair 0 target)
  list(GET pair 1 corpus)
  list(GET pair 2 runs)
  file(REMOVE_RECURSE ${BINARY}/found/${corpus})
  file(MAKE_DIRECTORY ${BINARY}/found/${corpus})
  execute_process(COMMAND ${BINARY}/${target} -runs=${runs} -rss_limit_mb=2048 -timeout=60 -seed=1
                          -artifact_prefix=${BINARY}/
                          ${BINARY}/found/${corpus} ${SOURCE}/fuzz/corpus/${corpus}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX MATCH "Done [0-9]+ runs in [0-9]+ second" done "${err}")
  if(NOT rc EQUAL 0 OR NOT done)
    message(FATAL_ERROR "fuzz: ${target} failed (exit ${rc}); the input that failed is written beside "
                        "${BINARY}/${target} as crash-*, leak-*, oom-* or timeout-*:\n${err}")
  endif()
  message(STATUS "fuzz: ${target}: ${done}s, no crash, no sanitizer report, no leak, no hang")
endforeach()
