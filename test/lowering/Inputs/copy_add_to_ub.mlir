// tile.copy_add from GM to UB: not an atomic-add store (convert_tile_to_ascend_copy_add.mlir, ERR)
func.func @bad(%a: memref<256xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy_add %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  func.return
}
