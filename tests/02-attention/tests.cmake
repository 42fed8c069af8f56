# Stage 02 (attention): every rung vs the fp64 oracle on the goldens (drift fails), finite differences,
# defined masked rows, deliberately broken candidates, thread-count independence, errors, costs.
ladder_add_test(test_02_attention
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_attention_numerics.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_attention_cost.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_attention_shapes.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_tile_simd.cpp
  LIBS ladder_cuda ladder_core)
# `ladder reproduce 02-attention --quick` through its entry point.
ladder_add_test(test_02_attention_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_cli.cpp LIBS ladder_cli)
# The CUDA rungs (cuda/src/02-attention/*.cu) through SIMT in every schedule (and once under TSan), small shapes.
ladder_add_test(test_02_attention_cuda SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_attention_cuda_planted.cu LIBS ladder_cuda ladder_core SIMT)
# The tensor-core forward (cuda/src/02-attention/attention_bf16.cuh) on bf16 inputs vs the fp64 oracle under its
# derived bound, and its planted mistakes, through SIMT in every schedule (and once under TSan).
ladder_add_test(test_02_attention_bf16
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_bf16.cpp ${CMAKE_CURRENT_LIST_DIR}/test_attention_bf16_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
