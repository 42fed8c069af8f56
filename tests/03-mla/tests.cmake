# Stage 03 (MLA): every rung vs the fp64 CD oracle on the goldens (drift fails), the rungs vs each other,
# wrong candidates caught, model pieces (config file, RoPE layouts, RMSNorm), counted FLOPs == Cost, errors,
# bits independent of the paged pool's layout (contiguous, shuffled, interleaved blocks), and decode reusing
# the storage of the Outputs that died (core/recycle.hpp) with fresh storage's bits.
ladder_add_test(test_03_mla
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_model.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_cost.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_placement.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_recycle.cpp
  LIBS ladder_cuda ladder_core ladder_lab_oracle)
# The CUDA rungs (cuda/src/03-mla/*.cu) through SIMT in every schedule (and once under TSan), tiny shapes; the CUDA
# chunk rungs (prefill, chunk_absorbed) on the chunk goldens through the contract, a planted mask off by one each
# caught.
ladder_add_test(test_03_mla_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda_planted.cu
          ${CMAKE_CURRENT_LIST_DIR}/test_mla_cuda_prefill.cpp
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
# The chunk shape through the contract: s_q = 2, 4 and ragged prefill goldens, every rung by run_rung and
# check; planted wrong masks and rows fail; a prefill in three chunks == one pass byte for byte; bad q_lens /
# prefix refused naming the input.
ladder_add_test(test_03_mla_chunk
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_chunk.cpp
  LIBS ladder_core ladder_lab_oracle)
# The same through the `ladder` binary: run + check pass (exit 0); a q_len off by one fails (exit 1).
if(TARGET ladder)
  add_test(NAME test_03_mla_chunk_cli COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_mla_chunk_cli.py
           $<TARGET_FILE:ladder>)
  set_tests_properties(test_03_mla_chunk_cli PROPERTIES LABELS unit)
endif()
# Stage 03 in FlashMLA's interface (layout contract 03-mla/flashmla): the flash_mla rung at several split sizes
# passes, the oracle ignores num_splits bit for bit, mutants (wrong block_table entry, lse in log2, o's [s_q, h_q]
# swapped, causal ignored) fail.
ladder_add_test(test_03_mla_flashmla
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_flashmla.cpp
  LIBS ladder_core ladder_lab_oracle)
# FlashMLA's FP8 "with scale" cache, sparse decode and sparse prefill (base-2 lse): the rung passes, the semantics
# are pinned, the planted bugs (scale of the neighbouring group, RoPE as FP8, scale divided, -1 as row 0, dedup, lse
# in ln) fail.
ladder_add_test(test_03_mla_flashmla_sparse
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_flashmla_sparse.cpp
  LIBS ladder_core)
# FlashMLA's sparse extras: a lonely token (o = 0, lse = +inf, judged exactly), topk_length, attn_sink; the planted
# bugs (lonely token NaN / -inf, topk_length ignored, sink ignored) fail.
ladder_add_test(test_03_mla_flashmla_sinks
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mla_flashmla_sinks.cpp
  LIBS ladder_core)
# The same through the `ladder` binary and Python: write, flash, check (exit 0); a mutant fails (exit 1); the
# Python verdicts equal the CLI's.
if(TARGET ladder)
  set(flashmla_py "")
  if(TARGET ladder_python)
    set(flashmla_py ${CMAKE_BINARY_DIR}/python)
  endif()
  add_test(NAME test_03_mla_flashmla_cli COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_mla_flashmla_cli.py
           $<TARGET_FILE:ladder> ${flashmla_py})
  set_tests_properties(test_03_mla_flashmla_cli PROPERTIES LABELS unit)
endif()
