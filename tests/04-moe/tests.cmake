# Stage 04 (MoE): the reference rungs vs the committed goldens and the planted bugs (the lab's test),
# the golden drift check (not in the lab: it judges the oracle itself).
ladder_add_test(test_04_moe
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_planted.cpp
  LIBS ladder_core ladder_lab_oracle)
ladder_add_test(test_04_moe_golden SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_golden.cpp LIBS ladder_core)
# The CUDA rungs (cuda/src/04-moe/*.cu) through SIMT in every schedule, and the removed-barrier plants.
ladder_add_test(test_04_moe_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_cuda_planted.cu
  LIBS ladder_cuda ladder_core ladder_lab_oracle SIMT)
# `ladder check / oracle / describe 04-moe` end to end (exit codes, one-line errors), candidates from numpy.
if(TARGET ladder)
  add_test(NAME cli_04_moe COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_moe_cli.py
           $<TARGET_FILE:ladder> ${LADDER_ROOT}/data/golden/04-moe)
  set_tests_properties(cli_04_moe PROPERTIES LABELS unit)
endif()
# Stage 04 in DeepGEMM's grouped-GEMM layouts (04-moe/deepgemm_contiguous, 04-moe/deepgemm_masked): the ragged_dot
# rung in each layout passes; mutants (padding row written, -1 taken as an expert, a segment shifted by a row, the
# masked buffer read as packed, expected_m for masked_m) fail; unjudged rows unjudged; bad layouts refused.
ladder_add_test(test_04_moe_deepgemm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepgemm.cpp
  LIBS ladder_core)
# SM100's packed int32 UE8M0 scales (scales = "ue8m0_packed"): the packing byte by byte, the round trip, verdicts
# equal to float32 UE8M0 scales; the bytes read in the other order fail.
ladder_add_test(test_04_moe_deepgemm_ue8m0
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepgemm_ue8m0.cpp
  LIBS ladder_core)
# DeepGEMM's K-grouped layout (weight gradient): semantics pinned, another order passes, a shifted group boundary fails.
ladder_add_test(test_04_moe_deepgemm_k_grouped
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepgemm_k_grouped.cpp
  LIBS ladder_core)
# Its FP8 form (04-moe/deepgemm_k_grouped_fp8): the oracle pinned, the rung and a dequantised candidate pass in every
# scale form, the neighbouring K block's scale, a boundary one row late and untransposed scales fail.
ladder_add_test(test_04_moe_deepgemm_k_grouped_fp8
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepgemm_k_grouped_fp8.cpp
  LIBS ladder_core)
# The same through the `ladder` binary and Python: write, ragged, check (exit 0); mutants fail (exit 1); unjudged
# rows pass; the Python verdicts equal the CLI's.
if(TARGET ladder)
  set(deepgemm_py "")
  if(TARGET ladder_python)
    set(deepgemm_py ${CMAKE_BINARY_DIR}/python)
  endif()
  add_test(NAME test_04_moe_deepgemm_cli COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepgemm_cli.py
           $<TARGET_FILE:ladder> ${deepgemm_py})
  set_tests_properties(test_04_moe_deepgemm_cli PROPERTIES LABELS unit)
endif()
# Stage 04 in DeepEP's dispatch / combine layouts (04-moe/deepep_normal, 04-moe/deepep_low_latency): the candidate
# computed another way (other receive orders) passes; each mutant (dropped / duplicated / misrouted token, mask,
# local index, counts, FP8 scale block, combine weights, -1 routed) fails with the output naming it; bad input refused.
ladder_add_test(test_04_moe_deepep SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepep.cpp LIBS ladder_core)
# The same through the `ladder` binary and Python: write, run, check (exit 0); shuffled rows pass; mutants fail
# (exit 1) naming the output; a buffer without recv_src is bad input; the Python verdicts equal the CLI's.
if(TARGET ladder)
  add_test(NAME test_04_moe_deepep_cli COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_moe_deepep_cli.py
           $<TARGET_FILE:ladder> ${deepgemm_py})
  set_tests_properties(test_04_moe_deepep_cli PROPERTIES LABELS unit)
endif()
