// ref/src/99-rowsum/registry.cpp -- the template stage's reference rungs.
#include "ladder/99-rowsum/rowsum.hpp"
#include "ladder/core/registry.hpp"

namespace ladder {

void register_rowsum(Registry& r) {
  using rowsum::RowsFns;
  r.add({"99-rowsum", "sequential", "sequential row sum", "one accumulator, left to right", "ref",
         RowsFns{&rowsum::sequential_rows<float>, &rowsum::sequential_rows<double>}, &rowsum::cost,
         "4 bytes read per element, cols - 1 adds per row"});
  r.add({"99-rowsum", "pairwise", "pairwise row sum", "halves, recursively (blocks of 8 summed in order)", "ref",
         RowsFns{&rowsum::pairwise_rows<float>, &rowsum::pairwise_rows<double>}, &rowsum::cost,
         "4 bytes read per element, cols - 1 adds per row"});
}

}  // namespace ladder
