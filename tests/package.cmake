# The CMake package: `cmake --install` of this build into a scratch prefix, examples/consumer built
# against it with find_package(ladder) and run, the installed CLI and Python module used from there
# (cmake/run_package_test.cmake). Label "package".
if(NOT LADDER_TSAN AND NOT LADDER_LAB AND NOT LADDER_ASAN AND NOT LADDER_GPU)
  find_program(LADDER_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  add_test(NAME package
           COMMAND ${CMAKE_COMMAND} -DBUILD=${CMAKE_BINARY_DIR} -DSTAGE=${CMAKE_BINARY_DIR}/package-test
                   -DSOURCE=${LADDER_ROOT} -DPYTHON=${LADDER_PYTHON3} -P ${LADDER_ROOT}/cmake/run_package_test.cmake)
  set_tests_properties(package PROPERTIES LABELS package PROCESSORS 2 TIMEOUT 1200)
endif()
