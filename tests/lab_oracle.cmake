# The judge's reference side (tests/lab_oracle.hpp): baselines and in-process oracles compiled from
# ref/include alone -- never from a lab's starter folder -- with `ladder` renamed to `ladder_oracle`,
# so they cannot be merged with the student's same-named inline functions at link time. The stage
# sources it needs (npy I/O, the stage-03 golden loaders) are compiled again under that name.
add_library(ladder_lab_oracle STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/lab_oracle.cpp ${LADDER_ROOT}/ref/src/npy.cpp ${LADDER_ROOT}/ref/src/03-mla/golden.cpp)
target_include_directories(ladder_lab_oracle PRIVATE ${LADDER_ROOT}/ref/include)
target_include_directories(ladder_lab_oracle INTERFACE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(ladder_lab_oracle PRIVATE ladder=ladder_oracle)
target_compile_options(ladder_lab_oracle PRIVATE -ffp-contract=off)
target_link_libraries(ladder_lab_oracle PUBLIC Eigen3::Eigen PRIVATE fmt::fmt nlohmann_json::nlohmann_json
                      OpenMP::OpenMP_CXX ladder_warnings)
