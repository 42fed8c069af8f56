// tools/source_dir/source_dir.hpp -- the source tree this build was configured from, for the programs that
// read its data/, chapters/ and scripts/ folders (the tests, the CLI, the Python module).
//
// The path is compiled into one translation unit (source_dir.cpp) rather than passed to every file as a
// macro: the other compile commands are then the same in any clone of the tree, so ccache (its base_dir is
// the tree, see the Makefile) serves a second clone or worktree of the same commit from the cache.
#pragma once

#include <filesystem>

namespace ladder {

std::filesystem::path source_dir();

}  // namespace ladder
