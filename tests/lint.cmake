# Host C++ never chooses device or host memory by __CUDACC__: g++ never defines it in the native GPU build,
# and under SIMT device memory is host memory, so no test on a CPU can tell (test_host_code.py; the
# self-test plants the fault in a scratch copy and requires it to be reported).
if(NOT LADDER_LAB)
  add_test(NAME lint.host_code COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_host_code.py)
  add_test(NAME lint.host_code.selftest COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_host_code.py --selftest)
  set_tests_properties(lint.host_code lint.host_code.selftest PROPERTIES LABELS unit)
endif()
# The README: at most 250 lines, its Layout naming every top-level folder (issue 37; test_readme.py, whose
# self-test plants a 251-line README and an unnamed folder).
if(NOT LADDER_LAB)
  add_test(NAME lint.readme COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_readme.py)
  add_test(NAME lint.readme.selftest COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_readme.py --selftest)
  set_tests_properties(lint.readme lint.readme.selftest PROPERTIES LABELS unit)
endif()
