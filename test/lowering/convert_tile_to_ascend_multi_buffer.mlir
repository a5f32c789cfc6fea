// RUN: cann-opt %s -p convert-tile-to-ascend | filecheck %s
// RUN: cann-opt %s -p tile-multi-buffer,convert-tile-to-ascend | filecheck %s --check-prefix=PASS
// RUN: not cann-opt %S/Inputs/multi_buffer_illegal.mlir -p convert-tile-to-ascend 2>&1 | filecheck %s --check-prefix=ERR

// convert-tile-to-ascend with multi-buffered tile.alloc: a buffer of n copies takes n * its size,
// generation g uses copy g % n (address fields shifted by that copy's offset), a hardware loop
// whose body runs G generations of it rotates by G % n copies per iteration (loop_rotate after
// the loop's loop_offset instructions; none when G % n = 0).

// CHECK-LABEL: ascend.kernel @straight
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0, src_arg=0, src=0,
// CHECK-NEXT:    ascend.vadd dtype=0, dst=1024, src0=0, src1=0,
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=512, src_arg=0, src=512,
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=768, src_arg=0, src=768,
// CHECK-NEXT:    ascend.vadd dtype=0, dst=1024, src0=1024, src1=512,
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=1024,

// CHECK-LABEL: ascend.kernel @nested
// CHECK-NEXT:    ascend.loop_begin count=2
// CHECK-NEXT:    ascend.loop_offset arg=0, stride=1536
// CHECK-NEXT:    ascend.loop_offset arg=1, stride=1536
// CHECK-NEXT:    ascend.loop_begin count=3
// CHECK-NEXT:    ascend.loop_offset arg=0, stride=512
// CHECK-NEXT:    ascend.loop_offset arg=1, stride=512
// CHECK-NEXT:    ascend.loop_rotate space=5, base=0, size=512, copies=3, step=1
// CHECK-NEXT:    ascend.loop_rotate space=5, base=1536, size=256, copies=3, step=2
// CHECK-NEXT:    ascend.copy_gm_to_ub dst=0,
// CHECK-NEXT:    ascend.vadd dtype=0, dst=1536, src0=0, src1=0,
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=1536,
// CHECK-NEXT:    ascend.vadd dtype=0, dst=1792, src0=0, src1=256,
// CHECK-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=256, src=1792,
// CHECK-NEXT:    ascend.loop_end
// CHECK-NEXT:    ascend.loop_end

// With tile-multi-buffer first (its rule: 2 copies each): x has 1 generation per inner
// iteration (step 1), 3 per outer one (3 % 2 = 1: the outer loop rotates too); y has 2 per
// inner iteration (no rotation), its second one in copy 1.
// PASS-LABEL: ascend.kernel @nested
// PASS:         ascend.loop_begin count=2
// PASS-NEXT:    ascend.loop_offset arg=0, stride=1536
// PASS-NEXT:    ascend.loop_offset arg=1, stride=1536
// PASS-NEXT:    ascend.loop_rotate space=5, base=0, size=512, copies=2, step=1
// PASS-NEXT:    ascend.loop_begin count=3
// PASS-NEXT:    ascend.loop_offset arg=0, stride=512
// PASS-NEXT:    ascend.loop_offset arg=1, stride=512
// PASS-NEXT:    ascend.loop_rotate space=5, base=0, size=512, copies=2, step=1
// PASS-NEXT:    ascend.copy_gm_to_ub dst=0,
// PASS-NEXT:    ascend.vadd dtype=0, dst=1024, src0=0, src1=0,
// PASS-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=0, src=1024,
// PASS-NEXT:    ascend.vadd dtype=0, dst=1280, src0=0, src1=256,
// PASS-NEXT:    ascend.copy_ub_to_gm dst_arg=1, dst=256, src=1280,

// ERR: error: @illegal: buffer tile.alloc #0 (UB, 512 bytes) cannot have 2 copies: instruction 3 `copy_ub_to_gm dst_arg=0, dst=512, src=0, nburst=1, burst=512, src_stride=512, dst_stride=512` reads bytes [0, 512) not written in its generation

// Straight-line code: the second generation of x uses copy 1 (x's copies at UB 0 and 512).
func.func @straight(%a: memref<1024xf16, #tile<space gm>>, %b: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
  %y = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 256, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 384, dst_offset = 128, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %y, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  func.return
}

// Nested loops, 3 copies: the inner body refills x once (rotate step 1), the outer body runs
// 3 generations of x (3 % 3 = 0: no rotation); y is refilled twice per inner body (2 % 3 = 2),
// 6 times per outer body (6 % 3 = 0).
func.func @nested(%a: memref<1536xf16, #tile<space gm>>, %b: memref<1536xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc {buffers = 3 : i64} : memref<256xf16, #tile<space ub>>
  %y = tile.alloc {buffers = 3 : i64} : memref<128xf16, #tile<space ub>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_offset %a {stride = 768} : memref<1536xf16, #tile<space gm>>
  tile.loop_offset %b {stride = 768} : memref<1536xf16, #tile<space gm>>
  tile.loop_begin {count = 3 : i64}
  tile.loop_offset %a {stride = 256} : memref<1536xf16, #tile<space gm>>
  tile.loop_offset %b {stride = 256} : memref<1536xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1536xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 128, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<128xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<128xf16, #tile<space ub>>, memref<1536xf16, #tile<space gm>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 128, count = 128, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<128xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 0, dst_offset = 128, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<128xf16, #tile<space ub>>, memref<1536xf16, #tile<space gm>>
  tile.loop_end
  tile.loop_end
  func.return
}
