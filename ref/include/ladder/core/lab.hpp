// ladder/core/lab.hpp -- LADDER_LAB_ENTRY, the mark on every function whose body a course lab's student
// writes (the functions holding a `// lab:todo` region; see scripts/lab and cmake/lab.cmake).
//
// In the normal build it is empty: the functions stay ordinary inline functions and templates, inlined
// wherever the compiler likes, and the code and its bits are exactly what they were without the mark.
//
// In a lab build (cmake/lab.cmake defines LADDER_LAB_BUILD for everything compiled against the library)
// the library, the registries and the tests are compiled ONCE from the reference headers, and one thin
// translation unit per stage (ref/src/<NN-stage>/lab/*.cpp) is compiled against the student's headers and
// instantiates exactly the student's functions. For the student's copy to be the one that runs, no
// reference-compiled caller may inline the reference body, clone it for constant arguments or draw
// conclusions from it (pure, no side effects, ...). GCC's noipa does exactly that: the caller is
// optimised as if the body were not visible and always calls the out-of-line symbol, and the linker
// keeps the first copy of that symbol it meets -- the student's, whose objects come first on every link
// line. So a save recompiles only the thin unit, and the reference is never run in the student's place.
#pragma once

#if defined(LADDER_LAB_BUILD) && defined(__GNUC__) && !defined(__clang__)
#define LADDER_LAB_ENTRY __attribute__((noipa))
#elif defined(LADDER_LAB_BUILD)
#error "a lab build (LADDER_LAB_BUILD) needs GCC's noipa attribute: build the lab with g++"
#else
#define LADDER_LAB_ENTRY
#endif
