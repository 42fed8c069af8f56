// tools/source_dir/source_dir.cpp -- see source_dir.hpp. LADDER_SOURCE_DIR is defined for this file only.
#include "source_dir.hpp"

namespace ladder {

std::filesystem::path source_dir() { return LADDER_SOURCE_DIR; }

}  // namespace ladder
