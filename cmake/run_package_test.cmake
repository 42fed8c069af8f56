# cmake/run_package_test.cmake -- the package test (tests/package.cmake), run by ctest as cmake -P:
# stage an install of the build tree, build examples/consumer against it with find_package(ladder),
# run its check, and import the installed Python module.
#   -DBUILD=<ladder build tree> -DSTAGE=<scratch folder> -DSOURCE=<ladder source root> -DPYTHON=<python3>
foreach(v BUILD STAGE SOURCE PYTHON)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_package_test: -D${v}=... is required")
  endif()
endforeach()

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "package test: `${cmd}` failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${STAGE})
step(${CMAKE_COMMAND} --install ${BUILD} --prefix ${STAGE}/install)
foreach(f include/ladder/01-softmax/softmax.hpp include/ladder/simt/simt.hpp lib/cmake/ladder/ladderConfig.cmake bin/ladder
          lib/libladder.so)
  if(NOT EXISTS ${STAGE}/install/${f})
    message(FATAL_ERROR "package test: the install has no ${f}")
  endif()
endforeach()
# Only the staged install may satisfy find_package(ladder): the build tree is not on any path.
step(${CMAKE_COMMAND} -S ${SOURCE}/examples/consumer -B ${STAGE}/consumer -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_PREFIX_PATH=${STAGE}/install -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
step(${CMAKE_COMMAND} --build ${STAGE}/consumer -j 2)
step(${STAGE}/consumer/check_my_softmax)
step(${STAGE}/install/bin/ladder list)
if(EXISTS ${STAGE}/install/lib/ladder/python/ladder)
  step(${CMAKE_COMMAND} -E env PYTHONPATH=${STAGE}/install/lib/ladder/python
       ${PYTHON} -c "import ladder, numpy as np; y = ladder.softmax(np.ones((2, 3), np.float32)); assert abs(y.sum() - 2) < 1e-6")
endif()
message(STATUS "package test: consumer built against ${STAGE}/install and passed")
