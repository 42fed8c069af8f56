# cmake/unity.cmake -- ladder_unity(TARGET [BATCH n]): compile a target's C++ sources in batches, each batch one
# translation unit that #includes its members (a "unity" build).
#
# Why: most of a fresh build's time is the same headers (Eigen, fmt, nlohmann/json, doctest, the reference
# templates) parsed and instantiated again in every unit. Measured with no ccache, every compile timed in CPU seconds
# (issue 37): the main build 2642 -> 1728 CPU-s; ladder_core 555 CPU-s in 51 units -> 277 in 14 batches, the CLI
# 483 in 23 -> 180 in 9, the tests 1048 in 78 -> 751 in 64 (most test executables have one source file).
#
# Why not CMake's own UNITY_BUILD: CMake 3.25 writes absolute paths into its batch files, so a second clone of the
# same commit (CI's fresh clone) would miss ccache on every batch. These batch files name their members by a path
# relative to the batch file, and the build folders all sit at the tree's root (build, build-tsan, build-lab-*), so
# every clone and every lab build writes the same bytes and shares the cache.
#
# Left out of every batch, in every build (so a lab build's batches equal the main build's, byte for byte):
#   - the files a lab's student may replace (chapters/*/lab/lab.json "student_sources"): a lab build compiles
#     them against the starter's headers, alone;
#   - sources with options of their own (COMPILE_OPTIONS, COMPILE_DEFINITIONS, INCLUDE_DIRECTORIES,
#     SKIP_UNITY_BUILD_INCLUSION), generated sources and anything that is not a .cpp file (.cu on SIMT: -xc++).
# A member must not rely on being alone: within a folder, no file-scope `using namespace` that another file's names
# could meet, no two files with the same name in one anonymous namespace (the compiler finds these, batch by batch).
#
# -DLADDER_UNITY=OFF compiles every source on its own (a quicker edit-compile loop for one file).
option(LADDER_UNITY "Compile the large targets' sources in batches (unity build; a third less CPU for a fresh build)" ON)
set(LADDER_UNITY_BATCH 8 CACHE STRING "Sources per unity batch")

# The student-replaceable sources of every lab (absolute paths), read once.
function(ladder_unity_student_sources out)
  file(GLOB labs ${LADDER_ROOT}/chapters/*/lab/lab.json)
  set(result)
  foreach(lab ${labs})
    file(READ ${lab} text)
    string(JSON n ERROR_VARIABLE err LENGTH "${text}" student_sources)
    if(err OR n EQUAL 0)
      continue()
    endif()
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON src GET "${text}" student_sources ${i})
      list(APPEND result ${LADDER_ROOT}/${src})
    endforeach()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

function(ladder_unity target)
  if(NOT LADDER_UNITY)
    return()
  endif()
  cmake_parse_arguments(U "" "BATCH" "" ${ARGN})
  if(NOT U_BATCH)
    set(U_BATCH ${LADDER_UNITY_BATCH})
  endif()
  get_property(students GLOBAL PROPERTY LADDER_UNITY_STUDENT_SOURCES)
  get_property(read GLOBAL PROPERTY LADDER_UNITY_STUDENT_SOURCES_READ)
  if(NOT read)
    ladder_unity_student_sources(students)
    set_property(GLOBAL PROPERTY LADDER_UNITY_STUDENT_SOURCES ${students})
    set_property(GLOBAL PROPERTY LADDER_UNITY_STUDENT_SOURCES_READ ON)
  endif()
  get_target_property(srcs ${target} SOURCES)
  get_target_property(src_dir ${target} SOURCE_DIR)
  set(members)
  set(rest)
  foreach(src ${srcs})
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${src_dir})
    set(alone OFF)
    foreach(prop COMPILE_OPTIONS COMPILE_DEFINITIONS INCLUDE_DIRECTORIES SKIP_UNITY_BUILD_INCLUSION GENERATED)
      get_source_file_property(v ${src} ${prop})
      if(v)
        set(alone ON)
      endif()
    endforeach()
    if(alone OR NOT abs MATCHES "\\.cpp$" OR abs IN_LIST students)
      list(APPEND rest ${src})
    else()
      list(APPEND members ${abs})
    endif()
  endforeach()
  # Batches never span two folders: a stage's batches hold only its own files, so one stage's `using namespace`
  # or helper names cannot meet another's, and adding a file to one stage leaves every other batch (and its
  # cached object) as it was. Within a folder: ceil(n / U_BATCH) batches of near-equal size.
  set(dirs)
  foreach(abs ${members})
    get_filename_component(d ${abs} DIRECTORY)
    list(APPEND dirs ${d})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/unity)
  set(batch_files)
  foreach(d ${dirs})
    set(group)
    foreach(abs ${members})
      get_filename_component(ad ${abs} DIRECTORY)
      if(ad STREQUAL d)
        list(APPEND group ${abs})
      endif()
    endforeach()
    list(LENGTH group n)
    if(n LESS 2)
      list(APPEND rest ${group})
      continue()
    endif()
    file(RELATIVE_PATH tag ${src_dir} ${d})
    if(tag MATCHES "^\\.\\.")  # a folder outside the target's own: named from the tree's root
      file(RELATIVE_PATH tag ${LADDER_ROOT} ${d})
    endif()
    string(REGEX REPLACE "[^A-Za-z0-9_-]" "_" tag "${tag}")
    if(tag STREQUAL "")
      set(tag top)
    endif()
    math(EXPR batches "(${n} + ${U_BATCH} - 1) / ${U_BATCH}")
    set(i 0)
    foreach(b RANGE 1 ${batches})
      math(EXPR end "(${n} * ${b}) / ${batches}")
      set(text "// Generated by cmake/unity.cmake: a batch of ${target}'s sources, compiled as one unit.\n")
      while(i LESS end)
        list(GET group ${i} abs)
        file(RELATIVE_PATH rel ${dir} ${abs})
        string(APPEND text "#include \"${rel}\"\n")
        math(EXPR i "${i} + 1")
      endwhile()
      set(file ${dir}/${target}_${tag}_${b}.cpp)
      file(CONFIGURE OUTPUT ${file} CONTENT "${text}")  # rewritten only when its bytes change
      list(APPEND batch_files ${file})
    endforeach()
  endforeach()
  # The members leave the target's sources; `make` still rebuilds a batch when one of them changes (the
  # compiler's depfile lists every file a batch includes).
  set_property(TARGET ${target} PROPERTY SOURCES ${rest} ${batch_files})
endfunction()
