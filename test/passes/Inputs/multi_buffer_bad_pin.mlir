// Input of tile_multi_buffer.mlir (its BADPIN run): a tiling pin of 7 buffers.
func.func @k(%a: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {buffers = 7 : i64}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  func.return
}
