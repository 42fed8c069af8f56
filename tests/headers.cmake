# Every public header compiles on its own (tests/test_headers.py): one translation unit per header of
# ref/include, cuda/include, cuda/simt and mpi/include, -fsyntax-only, and a selftest with a planted
# header that leans on its includer. Not in sanitizer or lab builds (nothing of theirs is checked).
if(NOT LADDER_TSAN AND NOT LADDER_ASAN AND NOT LADDER_LAB AND NOT LADDER_GPU)
  find_package(MPI COMPONENTS CXX QUIET)
  set(flags --flag=-I${LADDER_ROOT}/ref/include --flag=-I${LADDER_ROOT}/cuda/include --flag=-I${LADDER_ROOT}/cuda/simt
            --flag=-I${LADDER_ROOT}/mpi/include --flag=-fopenmp --flag=-Wall --flag=-Wextra --flag=-Werror)
  get_target_property(eigen_dirs Eigen3::Eigen INTERFACE_INCLUDE_DIRECTORIES)
  foreach(d ${eigen_dirs})
    list(APPEND flags --flag=-isystem${d})
  endforeach()
  set(dirs ref/include cuda/include cuda/simt)
  if(MPI_CXX_FOUND)
    foreach(d ${MPI_CXX_INCLUDE_DIRS})
      list(APPEND flags --flag=-isystem${d})
    endforeach()
    list(APPEND dirs mpi/include)
  endif()
  # Through the build's compiler launcher (ccache) when it has one, in a fixed folder: an unchanged header
  # costs no compile on the next run, in this clone or another (test_headers.py --workdir says how).
  set(launcher)
  if(CMAKE_CXX_COMPILER_LAUNCHER)
    set(launcher --launcher=${CMAKE_CXX_COMPILER_LAUNCHER} --workdir=${CMAKE_BINARY_DIR}/headers)
  endif()
  add_test(NAME headers.stand_alone
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_headers.py --cxx ${CMAKE_CXX_COMPILER} --jobs 2
                   ${launcher} ${flags} ${LADDER_ROOT} ${dirs})
  add_test(NAME headers.selftest
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_headers.py --selftest --cxx ${CMAKE_CXX_COMPILER})
  set_tests_properties(headers.stand_alone PROPERTIES LABELS unit PROCESSORS 2 TIMEOUT 900)
  set_tests_properties(headers.selftest PROPERTIES LABELS unit)
endif()
