# The comparator (core/compare.hpp) and the case contracts (core/contract.hpp): wrong candidates of
# every kind fail, correct ones pass; case folders, digests and the generic oracle / check.
ladder_add_test(test_compare SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_compare.cpp LIBS ladder_core)
# Stage 05: the oracle is eplb.py's float32 arithmetic (an independent re-implementation judges it).
ladder_add_test(test_05_eplb_float32 SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_05_eplb_float32.cpp LIBS ladder_core)
