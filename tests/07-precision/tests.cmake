# Stage 07 (low precision): the recipes' exactness, the derived bounds, the wrong candidates of issue 40
# (each must fail) and right ones in other orders (each must pass), through the case contract; and lab 07's
# judge of the two kernels a student writes (test_fp8_kernels.cpp).
ladder_add_test(test_07_precision SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_precision.cpp
                ${CMAKE_CURRENT_LIST_DIR}/test_kv_attn.cpp
                ${CMAKE_CURRENT_LIST_DIR}/test_fp8_kernels.cpp ${CMAKE_CURRENT_LIST_DIR}/test_moe_quant.cpp
                ${CMAKE_CURRENT_LIST_DIR}/test_cpu_gemm.cpp ${CMAKE_CURRENT_LIST_DIR}/test_bf16_gemm.cpp
                LIBS ladder_core)
# `ladder check / describe / reproduce 07-precision` end to end (exit codes, one-line errors).
if(TARGET ladder)
  add_test(NAME cli_07_precision COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_precision_cli.py
           $<TARGET_FILE:ladder> ${LADDER_ROOT}/data/golden/07-precision)
  set_tests_properties(cli_07_precision PROPERTIES LABELS unit)
endif()
# The CUDA kernels (cuda/src/07-precision: int8 / E4M3 quantise and dequantise, the __dp4a GEMM) against the
# reference recipes bit for bit, and the CUDA a8w8 rung on the goldens through the contract: SIMT in every
# schedule and once under TSan (small shapes there); planted kernels (dp4a byte order, a missing barrier) caught.
ladder_add_test(test_07_precision_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_precision_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_precision_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The CUDA attn_bf16 rung (stage 02's tiled_bf16 on the bf16 attention recipe) on every attn_bf16 golden through the
# contract, the params it cannot honour refused; planted candidates rejected: the padded head dim's softmax scale, and
# P truncated in the kernel itself (Bf16Plant::p_truncate, on attn_bf16_ptrunc).
ladder_add_test(test_07_attn_bf16_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attn_bf16_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_attn_bf16_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The bf16 tensor-core GEMM (cuda/src/07-precision/bf16_gemm.cuh) against the fp64 oracle within its derived bound,
# the same way (every schedule, TSan, and on the device in the GPU build), in every tile configuration; mistakes
# planted in the kernel itself (an ldmatrix row off by one, a store mask off by one, no cp.async wait_group) each
# caught in each configuration, and a big configuration launched without its dynamic shared memory opt-in refused.
ladder_add_test(test_07_bf16_gemm_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bf16_gemm_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_bf16_gemm_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The A8W8 GEMM on tensor cores (cuda/src/07-precision/a8w8_mma.cuh): acc and y the reference's bits and the dp4a
# kernel's, the same way (every schedule, TSan, on the device in the GPU build); mistakes planted in the kernel itself
# (an A lane off by one, k32 fragment registers swapped, a store mask off by one, no cp.async wait_group) each caught.
ladder_add_test(test_07_a8w8_mma_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_a8w8_mma_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_a8w8_mma_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The FP8 block-scaled GEMM on tensor cores with promotion (cuda/src/07-precision/fp8_mma.cuh) and the E4M3 block /
# static quantisers: codes and scales the reference's bits, y the 24-bit recipe's bits on the emulator and within
# fp8_bound everywhere, the CUDA fp8_block rung on every fp8 golden case through the contract (every schedule, TSan,
# the device in the GPU build); mistakes planted in the kernel (an A lane off by one, a neighbour's scale, no fragment
# reset, no cp.async wait_group) each caught by the bound or by SIMT.
ladder_add_test(test_07_fp8_mma_cuda
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_fp8_mma_cuda.cpp ${CMAKE_CURRENT_LIST_DIR}/test_fp8_mma_cuda_planted.cu
  LIBS ladder_cuda ladder_core SIMT)
# The CPU GEMMs' automatic path capped to AVX2 (LADDER_CPU_PATH=avx2), as on a CPU without AVX-512 or VNNI.
# Registered where test_07_precision is built (not in the TSan build, which builds only the SIMT tests).
if(TARGET test_07_precision)
  add_test(NAME test_07_precision.cpu_avx2 COMMAND test_07_precision --test-case=cpu_gemm*)
  set_tests_properties(test_07_precision.cpu_avx2 PROPERTIES ENVIRONMENT LADDER_CPU_PATH=avx2 LABELS unit)
  # ... and capped below AMX (LADDER_CPU_PATH=avx512), as on an AVX-512 CPU without AMX.
  add_test(NAME test_07_precision.cpu_avx512 COMMAND test_07_precision --test-case=cpu_gemm*)
  set_tests_properties(test_07_precision.cpu_avx512 PROPERTIES ENVIRONMENT LADDER_CPU_PATH=avx512 LABELS unit)
endif()
