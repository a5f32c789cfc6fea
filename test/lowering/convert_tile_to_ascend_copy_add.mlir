// RUN: cann-opt %s -p convert-tile-to-ascend | filecheck %s
// RUN: not cann-opt %S/Inputs/copy_add_to_ub.mlir -p convert-tile-to-ascend 2>&1 | filecheck %s --check-prefix=ERR

// tile.copy_add (UB -> GM, adding) lowers to the atomic-add store copy_ub_to_gm_add with the
// destination's float dtype (0 float16, 1 float32) and byte sizes; a plain tile.copy stays a
// copy_ub_to_gm (no dtype field).
// CHECK-LABEL: ascend.kernel @add_f16
// CHECK:         ascend.copy_gm_to_ub dst=0, src_arg=0, src=0, nburst=1, burst=512,
// CHECK:         ascend.copy_ub_to_gm_add dst_arg=1, dst=64, src=0, nburst=4, burst=64, src_stride=128, dst_stride=256, dtype=0
// CHECK-NOT:     ascend.copy_ub_to_gm dst_arg
// CHECK-LABEL: ascend.kernel @add_f32
// CHECK:         ascend.copy_ub_to_gm_add dst_arg=1, dst=0, src=0, nburst=1, burst=1024, src_stride=1024, dst_stride=1024, dtype=1
// CHECK-LABEL: ascend.kernel @plain
// CHECK-NOT:     copy_ub_to_gm_add
// CHECK:         ascend.copy_ub_to_gm dst_arg=1, dst=0, src=0, nburst=1, burst=512, src_stride=512, dst_stride=512
// CHECK-NOT:     copy_ub_to_gm_add

// ERR: tile.copy_add adds UB to GM only

func.func @add_f16(%a: memref<256xf16, #tile<space gm>>, %y: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy_add %x, %y {src_offset = 0, dst_offset = 32, nburst = 4, burst = 32, src_stride = 64, dst_stride = 128} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  func.return
}

func.func @add_f32(%a: memref<256xf32, #tile<space gm>>, %y: memref<256xf32, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf32, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf32, #tile<space gm>>, memref<256xf32, #tile<space ub>>
  tile.copy_add %x, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf32, #tile<space ub>>, memref<256xf32, #tile<space gm>>
  func.return
}

func.func @plain(%a: memref<256xf16, #tile<space gm>>, %y: memref<256xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space gm>>
  func.return
}
