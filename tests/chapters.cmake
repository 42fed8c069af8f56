# The chapters stand alone: no internal references, no dead links, a figure in each (test_chapters.py);
# the self-test plants each fault in a scratch copy and requires it to be reported.
if(NOT LADDER_LAB)
  add_test(NAME chapters.stand_alone COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_chapters.py)
  add_test(NAME chapters.selftest COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_chapters.py --selftest)
  set_tests_properties(chapters.stand_alone chapters.selftest PROPERTIES LABELS unit)
endif()
# The labs' report and hints (scripts/lab_report.py), and the hint and planted files of every lab.
if(NOT LADDER_LAB)
  add_test(NAME chapters.lab_report COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_lab_report.py)
  set_tests_properties(chapters.lab_report PROPERTIES LABELS unit)
endif()
