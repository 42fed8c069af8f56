// ladder/core/lab.hpp -- LADDER_LAB_ENTRY, the mark on every function whose body a course lab's student
// writes (the functions holding a `// lab:todo` region; see scripts/lab and cmake/lab.cmake).
//
// For a header-only user (an installed ladder::ref, a notebook, clang) it is empty: the functions stay
// ordinary inline functions and templates, inlined wherever the compiler likes.
//
// Every g++ build of this project is lab-ready (ref/CMakeLists.txt defines LADDER_LAB_READY for everything
// compiled against the headers), the main build as much as a lab build, so the two compile the library
// and the tests with the same commands. In a lab build (cmake/lab.cmake) the library, the registries and
// the tests are compiled ONCE from the reference headers -- ccache hands over the main build's objects --
// and one thin
// translation unit per stage (ref/src/<NN-stage>/lab/*.cpp) is compiled against the student's headers and
// instantiates exactly the student's functions. For the student's copy to be the one that runs, no
// reference-compiled caller may inline the reference body, clone it for constant arguments or draw
// conclusions from it (pure, no side effects, ...). GCC's noipa does exactly that: the caller is
// optimised as if the body were not visible and always calls the out-of-line symbol, and the linker
// keeps the first copy of that symbol it meets -- the student's, whose objects come first on every link
// line. So a save recompiles only the thin unit, and the reference is never run in the student's place.
// In the main build the mark changes no bit (-ffp-contract=off: where a function is compiled does not
// change its arithmetic; the golden drift tests hold it) and costs a call per use of these top-level
// functions.
#pragma once

#if defined(LADDER_LAB_READY) && defined(__GNUC__) && !defined(__clang__)
#define LADDER_LAB_ENTRY __attribute__((noipa))
#elif defined(LADDER_LAB_READY)
#error "a lab-ready build (LADDER_LAB_READY) needs GCC's noipa attribute: build with g++"
#else
#define LADDER_LAB_ENTRY
#endif
