ladder_add_test(test_core SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_core.cpp LIBS ladder_core)
ladder_add_test(test_01_softmax SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cpp ${CMAKE_CURRENT_LIST_DIR}/test_softmax_long.cpp LIBS ladder_cuda ladder_core ladder_lab_oracle)
ladder_add_test(test_01_softmax_cuda SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax_cuda.cpp LIBS ladder_cuda ladder_core ladder_lab_oracle SIMT)
