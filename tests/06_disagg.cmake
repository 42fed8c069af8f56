# Stage 06 (disaggregation): step models, data files, configs, goodput search, simulator invariants,
# the planted bugs, M/D/1 (test_06_disagg: the lab's test, any correct solution passes), and the
# goldens, exact (test_06_disagg_golden: drift of the reference fails).
ladder_add_test(test_06_disagg
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_06_disagg.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_06_disagg_sim.cpp
  LIBS ladder_core)
ladder_add_test(test_06_disagg_golden SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_06_disagg_golden.cpp LIBS ladder_core)
# `ladder simulate` and `ladder reproduce 06-disagg` through their entry points.
ladder_add_test(test_06_disagg_cli SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_06_disagg_cli.cpp LIBS ladder_cli)
