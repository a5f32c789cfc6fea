// a clamped step whose bounds are equal: it never moves its property
func.func @bad(%a: memref<256xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<128xf16, #tile<space ub>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_step {field = "src_offset", step = 128 : i64, offset = 0 : i64, lo = 0 : i64, hi = 0 : i64}
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<256xf16, #tile<space gm>>, memref<128xf16, #tile<space ub>>
  tile.loop_end
  func.return
}
