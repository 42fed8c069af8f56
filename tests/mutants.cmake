# The mutation score (issue 41, deliverable 5): real bug classes as mutant candidates, each caught by
# ladder's checks, beside correct variants (other summation orders, split counts, block orders) that pass.
# The catalogue is tools/ladder/mutants.cpp, shared with `ladder mutants`.
ladder_add_test(test_mutants SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mutants.cpp LIBS ladder_cli)
