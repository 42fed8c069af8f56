# The fuzz targets of the parsers an outside user reaches with their own files (fuzz/: the .npy parser
# and the case.json reader), built with clang++-19's libFuzzer under ASan + UBSan and run for a fixed
# number of inputs: ctest -L fuzz (cmake/ladder_fuzz_test.cmake).
if(NOT LADDER_TSAN AND NOT LADDER_LAB AND NOT LADDER_ASAN)
  find_program(LADDER_CLANGXX_19 clang++-19)
  if(LADDER_CLANGXX_19)
    add_test(NAME fuzz
             COMMAND ${CMAKE_COMMAND} -DSOURCE=${LADDER_ROOT} -DBINARY=${CMAKE_BINARY_DIR}/fuzz
                     -DCXX=${LADDER_CLANGXX_19} -DJOBS=2 -P ${LADDER_ROOT}/cmake/ladder_fuzz_test.cmake)
    # PROCESSORS 1 although it compiles with two jobs: its configure step and the fuzzing runs use one
    # core, and ctest fills the other with short tests meanwhile.
    set_tests_properties(fuzz PROPERTIES LABELS fuzz PROCESSORS 1 TIMEOUT 1800)
  elseif(LADDER_REQUIRE_ALL_TESTS)
    message(FATAL_ERROR "clang++-19 not found: the fuzz targets cannot be built. It ships in Debian's clang-19 "
                        "package with libFuzzer in libclang-rt-19-dev (scripts/setup installs both); or configure "
                        "with -DLADDER_REQUIRE_ALL_TESTS=OFF.")
  else()
    message(WARNING "clang++-19 not found (Debian package clang-19): the fuzz targets are NOT built or run")
  endif()
endif()
