# Stage 03 (MLA): every rung vs the fp64 CD oracle on the goldens (drift fails), the rungs vs each other,
# wrong candidates caught, model pieces (config file, RoPE layouts, RMSNorm), counted FLOPs == Cost, errors,
# and bits independent of the paged pool's layout (contiguous, shuffled, interleaved blocks).
ladder_add_test(test_03_mla
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_model.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_cost.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_placement.cpp
  LIBS ladder_cuda ladder_core ladder_lab_oracle)
# The CUDA rungs (cuda/src/03-mla/*.cu) through SIMT in every schedule (and once under TSan), tiny shapes.
ladder_add_test(test_03_mla_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The GEMM kernels (cuda/src/03-mla/mla_gemm.cu) vs Eigen, the same way: every schedule, and once under TSan.
ladder_add_test(test_03_mla_cuda_gemm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda_gemm.cpp
  LIBS ladder_cuda ladder_core SIMT)
# A chunk of q_len tokens per sequence on a cached prefix (prefill.hpp): the decompressed prefill and the
# absorbed chunk vs CD decoding the tokens one at a time, cache rows, the mask caught, FLOPs == chunk_cost.
ladder_add_test(test_03_mla_prefill
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_prefill.cpp
  LIBS ladder_core ladder_lab_oracle)
