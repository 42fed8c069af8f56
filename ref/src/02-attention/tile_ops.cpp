// attention_tile_ops.cpp -- the one instantiation of the tiled rungs' tile products (float, double);
// see ladder/02-attention/tile_ops.hpp.
#include "ladder/02-attention/tile_ops.hpp"

namespace ladder::attention::tile {

LADDER_TILE_OPS(, float)
LADDER_TILE_OPS(, double)

}  // namespace ladder::attention::tile
