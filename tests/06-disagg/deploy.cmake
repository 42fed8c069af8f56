# Stage 06, part 2 (the deployment): layouts, per-card memory, collectives, module costs, two-stream
# overlap and `ladder plan` with its bad-input errors (test_06_deploy); MTP's verify rung, its seeded
# chi-square tests (k = 1 and the whole verify at k = 3) and the planted bugs they catch: resampling,
# row indexing, the bonus row (test_06_mtp).
ladder_add_test(test_06_deploy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_deploy.cpp LIBS ladder_cli)
ladder_add_test(test_06_mtp SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mtp.cpp LIBS ladder_core)
# Sharding rungs on P simulated ranks: TP FFN vs unsharded under the tolerance rule, counted bytes.
ladder_add_test(test_06_deploy_sharding SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_deploy_sharding.cpp LIBS ladder_core)
# The report's operating points beside the step model's prediction: every row, ratio, reported figures as printed.
ladder_add_test(test_06_operating SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_operating.cpp LIBS ladder_cli)
# The report's Sec. 5-6 techniques as switches: each one's direction and mechanism, the overlap graph's bounds,
# and planted wrong switches (a double-counting overlap, a FlashComm with the wrong byte factor) caught.
ladder_add_test(test_06_techniques SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_techniques.cpp LIBS ladder_cli)
# A serving deployment end to end (data/serving/*.json): the file's errors, MTP's drawn steps, the simulated TPOT
# against the step model, the concurrency search under the TPOT limit; planted: acceptance ignored, a search that
# returns the first concurrency above the limit.
ladder_add_test(test_06_serving SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_serving.cpp LIBS ladder_cli)
