# cmake/install.cmake -- `cmake --install` and the CMake package (find_package(ladder)).
#
# Installs the headers (ref/include/ladder, cuda/include/ladder/cuda, the SIMT layer under
# include/ladder/simt), the static libraries behind ladder::core and ladder::cuda, libladder.so
# (ladder::shared: the notebooks' library), the `ladder` CLI, the Python package (lib/ladder/python,
# put it on PYTHONPATH) and lib/cmake/ladder/ladderConfig.cmake exporting
#   ladder::ref   header-only references (Eigen, fmt, nlohmann_json, OpenMP)
#   ladder::core  + npy I/O, registry tables, golden cases, case contracts (libladder_core.a)
#   ladder::cuda  + the CUDA rungs and their host API, on SIMT fibers (libladder_cuda.a, Boost.Context);
#                 ladder::registry() (every rung) lives here
# A consumer compiles the headers with the -march the library was built with (ladder::ref carries it
# in the install interface): Eigen's alignment differs between targets, and headers and library must agree.
# The default, native, means "this machine's CPU": an installed tree then serves this machine (or identical
# CPUs); for one that moves between machines, configure -DLADDER_MARCH=portable or an explicit target.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LADDER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ladder)

target_include_directories(ladder_ref INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(ladder_simt INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/ladder/simt>)
if(LADDER_MARCH AND NOT LADDER_MARCH STREQUAL "portable")
  target_compile_options(ladder_ref INTERFACE $<INSTALL_INTERFACE:$<$<COMPILE_LANGUAGE:CXX>:-march=${LADDER_MARCH}>>)
endif()

set_target_properties(ladder_ref PROPERTIES EXPORT_NAME ref)
set_target_properties(ladder_simt PROPERTIES EXPORT_NAME simt)
set_target_properties(ladder_core PROPERTIES EXPORT_NAME core)
set_target_properties(ladder_cuda PROPERTIES EXPORT_NAME cuda)
set_target_properties(ladder_shared PROPERTIES EXPORT_NAME shared)

install(DIRECTORY ${LADDER_ROOT}/ref/include/ladder DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${LADDER_ROOT}/cuda/include/ladder/cuda DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ladder)
install(FILES ${LADDER_ROOT}/cuda/simt/simt.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ladder/simt)
install(DIRECTORY ${LADDER_ROOT}/cuda/simt/detail DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ladder/simt)

install(TARGETS ladder_ref ladder_simt ladder_core ladder_cuda ladder_shared EXPORT ladderTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ladder RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET ladder_python)
  install(TARGETS ladder_python LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/ladder/python/ladder)
  install(DIRECTORY ${LADDER_ROOT}/python/ladder/ DESTINATION ${CMAKE_INSTALL_LIBDIR}/ladder/python/ladder
          FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
endif()

install(EXPORT ladderTargets NAMESPACE ladder:: DESTINATION ${LADDER_CMAKE_DIR})
set(LADDER_CONFIG_GPU ${LADDER_GPU})
configure_package_config_file(${LADDER_ROOT}/cmake/ladderConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cmake/ladderConfig.cmake INSTALL_DESTINATION ${LADDER_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/ladderConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/ladderConfig.cmake ${CMAKE_BINARY_DIR}/cmake/ladderConfigVersion.cmake
        DESTINATION ${LADDER_CMAKE_DIR})
