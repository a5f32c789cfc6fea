// A tile.loop_step on a property whose lowering does not move an on-chip field linearly (the vector
// op's count changes its repeat and mask): convert-tile-to-ascend refuses it.
func.func @bad(%a: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<1024xf16, #tile<space ub>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_step {field = "count", step = 64 : i64}
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 1.0, op = "adds"} : memref<1024xf16, #tile<space ub>>, memref<1024xf16, #tile<space ub>>, memref<1024xf16, #tile<space ub>>
  tile.loop_end
  func.return
}
