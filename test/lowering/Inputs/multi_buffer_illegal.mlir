// Input of convert_tile_to_ascend_multi_buffer.mlir (its ERR run): asked for an illegal renaming,
// the second generation of x (a half refill) is read whole, bytes of the first with it.
func.func @illegal(%a: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 256, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 256, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  func.return
}
