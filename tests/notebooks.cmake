# Notebooks: every notebooks/*.ipynb is executed cell by cell with clang-repl-19 (scripts/run-notebook);
# they load build/lib/libladder.so, so they run only in the default build folder. A self-test proves the
# runner fails on a compile error, on a failing check and on an invalid file.
if(NOT LADDER_TSAN AND NOT LADDER_LAB AND CMAKE_BINARY_DIR STREQUAL "${LADDER_ROOT}/build")
  find_program(LADDER_CLANG_REPL clang-repl-19)
  if(LADDER_CLANG_REPL)
    file(GLOB LADDER_NOTEBOOKS CONFIGURE_DEPENDS ${LADDER_ROOT}/notebooks/*.ipynb)
    foreach(nb ${LADDER_NOTEBOOKS})
      get_filename_component(name ${nb} NAME_WE)
      add_test(NAME notebook.${name} COMMAND ${LADDER_ROOT}/scripts/run-notebook ${nb})
      set_tests_properties(notebook.${name} PROPERTIES LABELS notebook)
    endforeach()
    add_test(NAME notebook.outputs_stored COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_notebook_outputs.py
             ${LADDER_NOTEBOOKS})
    set_tests_properties(notebook.outputs_stored PROPERTIES LABELS notebook)
    add_test(NAME notebook.runner_selftest COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_run_notebook.py)
    set_tests_properties(notebook.runner_selftest PROPERTIES LABELS notebook)
  elseif(LADDER_REQUIRE_ALL_TESTS)
    # The README promises every notebook executed: in CI (and `make test`) a missing runner is an error,
    # never a silent skip that still reports "100% passed".
    message(FATAL_ERROR "clang-repl-19 not found: the notebooks cannot be executed. It ships in Debian's "
                        "clang-tools-19 package (scripts/setup installs it); or configure with "
                        "-DLADDER_REQUIRE_ALL_TESTS=OFF to build without the notebook tests.")
  else()
    message(WARNING "clang-repl-19 not found (Debian package clang-tools-19): notebooks are NOT executed")
  endif()
endif()
