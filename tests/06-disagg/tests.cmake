# Stage 06 (disaggregation): step models, data files, configs, goodput search, simulator invariants,
# the planted bugs, M/D/1 (test_06_disagg: the lab's test, any correct solution passes), and the
# goldens, exact (test_06_disagg_golden: drift of the reference fails).
ladder_add_test(test_06_disagg
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg.cpp ${CMAKE_CURRENT_LIST_DIR}/test_disagg_sim.cpp
  LIBS ladder_core)
# Disaggregated schedules traced by hand: joining a decode batch at the step boundary; the least-loaded decode worker.
ladder_add_test(test_06_disagg_schedule SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_schedule.cpp LIBS ladder_core)
# The simulator's fast path against the plain event queue, bit for bit (ties included).
ladder_add_test(test_06_disagg_fastpath SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_fastpath.cpp LIBS ladder_core)
ladder_add_test(test_06_disagg_golden SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_golden.cpp LIBS ladder_core)
# `ladder simulate` and `ladder reproduce 06-disagg` through their entry points.
ladder_add_test(test_06_disagg_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_cli.cpp LIBS ladder_cli)
# Chunked prefill on colocated workers (Sarathi-Serve) and the explicit request list.
ladder_add_test(test_06_disagg_chunked SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_chunked.cpp LIBS ladder_core)
# The case contract (ref/src/06-disagg/contract.cpp) in process, and `ladder describe / oracle / check 06-disagg`
# end to end from numpy (exit codes 0 / 1 / 2, one-line errors).
ladder_add_test(test_06_disagg_contract SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_disagg_contract.cpp LIBS ladder_core)
if(TARGET ladder)
  add_test(NAME cli.06_disagg COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_disagg_cli.py $<TARGET_FILE:ladder>)
  set_tests_properties(cli.06_disagg PROPERTIES LABELS unit)
endif()
