# cmake/lab.cmake -- the student's side of a course lab build (LADDER_LAB, see scripts/lab).
#
# Everything else in a lab build is compiled from the reference headers (ladder_core, ladder_cuda, the
# judge in tests/lab_oracle.cmake, the test sources), once. Compiled against the starter's headers
# (found first) are only:
#   ladder_lab_student   the library sources listed in LADDER_LAB_SOURCES: for labs 02-07 the
#                        stage's thin student units ref/src/<NN-stage>/lab/*.cpp, which instantiate exactly
#                        the functions the student writes (those marked LADDER_LAB_ENTRY); for lab 01
#                        the stage's registry (ref/src/<NN-stage>/registry.cpp) -- and the starter's .cu files (the
#                        student's kernels, which replace the reference's);
#   LADDER_LAB_TEST_SOURCES  listed test sources (tests/; no lab lists one at present): tests/CMakeLists.txt
#                        gives each one the starter's headers ahead of the reference's and puts it first
#                        in its target.
# An edit of a starter file therefore recompiles only these.
#
# The one-definition rule: a reference source that includes a student's header (the registry, the
# tests, a golden generator) instantiates the same inline functions and templates, under the same
# names, with the reference's bodies. The linker keeps the FIRST copy it meets, so ladder_lab_student's
# objects are put ahead of every other object and library on the link line of everything that links
# ladder_core (link options precede the objects): every out-of-line call, from either side, runs the
# student's copy. A call the compiler inlined would run the reference's body instead, so everything
# compiled against the headers (ladder_ref) sees LADDER_LAB_READY -- in every g++ build of the project,
# ref/CMakeLists.txt: it turns LADDER_LAB_ENTRY into GCC's noipa (ladder/core/lab.hpp), and every caller
# then calls the student's functions out of line. (The judge cannot be affected: it lives in namespace
# ladder_oracle.) Since the main build compiles everything else with the same commands, a lab build's
# library and tests come from ccache; only the student's objects are compiled, without -Werror.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(FATAL_ERROR "a lab build needs g++ (GCC's noipa attribute, ladder/core/lab.hpp); CMAKE_CXX_COMPILER is "
                      "${CMAKE_CXX_COMPILER_ID}")
endif()
set(lab_include ${LADDER_ROOT}/${LADDER_LAB}/ref/include)
set(lab_library_sources)
set(LADDER_LAB_TEST_SOURCES)
foreach(src ${LADDER_LAB_SOURCES})
  if(src MATCHES "^(ref|cuda)/src/[0-9][0-9]-[a-z]+/(lab/)?[^/]+\\.cpp$")
    list(APPEND lab_library_sources ${LADDER_ROOT}/${src})
  elseif(src MATCHES "^tests/([0-9][0-9]-[a-z]+/)?[^/]+\\.(cpp|cu)$")
    list(APPEND LADDER_LAB_TEST_SOURCES ${LADDER_ROOT}/${src})
  else()
    message(FATAL_ERROR "LADDER_LAB_SOURCES: ${src} violates 'a ref/src/<NN-stage>/[lab/]*.cpp, cuda/src/<NN-stage>/*.cpp or tests/[<NN-stage>/]*.{cpp,cu} path'")
  endif()
endforeach()
file(GLOB lab_kernels ${LADDER_ROOT}/${LADDER_LAB}/cuda/src/*/*.cu)
if(lab_library_sources OR lab_kernels)
  add_library(ladder_lab_student OBJECT ${lab_library_sources} ${lab_kernels})
  if(lab_kernels)
    set_source_files_properties(${lab_kernels} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS -xc++)
    # A starter kernel's quoted includes look beside it first (the starter's copies: the header the student
    # edits), then in the reference's folder of the same name (the stage's other .cuh files).
    foreach(k ${lab_kernels})
      file(RELATIVE_PATH rel ${LADDER_ROOT}/${LADDER_LAB} ${k})
      get_filename_component(ref_dir ${LADDER_ROOT}/${rel} DIRECTORY)
      set_property(SOURCE ${k} APPEND PROPERTY COMPILE_OPTIONS -iquote ${ref_dir})
    endforeach()
  endif()
  if(IS_DIRECTORY ${lab_include})
    target_include_directories(ladder_lab_student BEFORE PRIVATE ${lab_include})
  endif()
  target_link_libraries(ladder_lab_student PRIVATE ladder_simt ladder_warnings)
  # A starter's TODOs leave unused names: warnings, not errors, in the student's files (a source's own
  # options come after the target's on the command line, so this follows ladder_warnings' -Werror).
  set_property(SOURCE ${lab_library_sources} ${lab_kernels} APPEND PROPERTY COMPILE_OPTIONS -Wno-error)
  add_dependencies(ladder_core ladder_lab_student)
  target_link_options(ladder_core INTERFACE $<TARGET_OBJECTS:ladder_lab_student>)
  set_property(TARGET ladder_core APPEND PROPERTY INTERFACE_LINK_DEPENDS $<TARGET_OBJECTS:ladder_lab_student>)
endif()
