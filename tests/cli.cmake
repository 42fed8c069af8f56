# The `ladder` binary end to end (exit codes, one-line errors), driven from Python with numpy as another
# project would drive it.
if(TARGET ladder)
  add_test(NAME cli COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.py $<TARGET_FILE:ladder>)
  set_tests_properties(cli PROPERTIES LABELS unit)
endif()
