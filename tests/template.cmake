# tests/template.cmake -- adding a stage edits no shared file: the template stage (examples/stage-template/,
# stage 99-rowsum) built from its one folder in a second build directory, then listed, described, its
# goldens written, its rungs run and checked from the CLI and Python (tests/test_template_stage.py).
if(TARGET ladder AND NOT LADDER_TSAN AND NOT LADDER_ASAN AND NOT LADDER_LAB)
  add_test(NAME stages.template COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_template_stage.py
                                        ${CMAKE_BINARY_DIR})
  set_tests_properties(stages.template PROPERTIES LABELS unit PROCESSORS 2 TIMEOUT 1200)
endif()
