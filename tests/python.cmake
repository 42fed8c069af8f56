# tests/python.cmake -- the `ladder` Python module's pytest tests (python/tests) and the example test
# of an outside project (examples/pytest), run with Debian's /usr/bin/python3 against the build tree's
# module (PYTHONPATH=<build>/python, as the README says).
if(NOT TARGET ladder_python)
  return()
endif()
foreach(suite python/tests examples/pytest)
  string(REPLACE "/" "." name "pytest.${suite}")
  add_test(NAME ${name} COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${LADDER_ROOT}/${suite})
  set_tests_properties(${name} PROPERTIES LABELS "python" TIMEOUT 600
                       ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
endforeach()
