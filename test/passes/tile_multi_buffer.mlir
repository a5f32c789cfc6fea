// RUN: cann-opt %s -p tile-multi-buffer | filecheck %s
// RUN: cann-opt %s -p 'tile-multi-buffer{buffers=1}' | filecheck %s --check-prefix=ONE
// RUN: cann-opt %s -p 'tile-multi-buffer{buffers=3}' | filecheck %s --check-prefix=THREE
// RUN: not cann-opt %s -p 'tile-multi-buffer{buffers=4}' 2>&1 | filecheck %s --check-prefix=BAD

// tile-multi-buffer gives 2 copies (the rule; `buffers` option: 1 none, 3 three) to each buffer a
// kernel refills, where renaming its generations is legal and the copies fit; a kernel's tiling
// pin `buffers` overrides the option.

// A loop refilling x and y every iteration: both doubled.
// CHECK-LABEL: func.func @refill
// CHECK-NEXT:    tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
// CHECK-NEXT:    tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
// ONE-LABEL:   func.func @refill
// ONE-NEXT:      tile.alloc : memref<256xf16, #tile<space ub>>
// ONE-NEXT:      tile.alloc : memref<256xf16, #tile<space ub>>
// THREE-LABEL: func.func @refill
// THREE-NEXT:    tile.alloc {buffers = 3 : i64} : memref<256xf16, #tile<space ub>>
// THREE-NEXT:    tile.alloc {buffers = 3 : i64} : memref<256xf16, #tile<space ub>>
func.func @refill(%a: memref<1024xf16, #tile<space gm>>, %b: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  %y = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.loop_offset %b {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.loop_end
  func.return
}

// Must not: t is filled once (one generation) and read in every iteration; x is refilled.
// CHECK-LABEL: func.func @once
// CHECK-NEXT:    tile.alloc : memref<256xf16, #tile<space ub>>
// CHECK-NEXT:    tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
func.func @once(%a: memref<1024xf16, #tile<space gm>>, %b: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %t = tile.alloc : memref<256xf16, #tile<space ub>>
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy %b, %t {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %x, %x, %t {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.loop_end
  func.return
}

// Must not: the second half-refill of x starts a generation, and the next read reads the first
// half too, written in the previous generation.
// CHECK-LABEL: func.func @across
// CHECK-NEXT:    tile.alloc : memref<256xf16, #tile<space ub>>
// CHECK-NEXT:    tile.alloc {buffers = 2 : i64} : memref<256xf16, #tile<space ub>>
func.func @across(%a: memref<1024xf16, #tile<space gm>>, %b: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  %y = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 256, dst_offset = 128, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.vec %y, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 256, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>, memref<256xf16, #tile<space ub>>
  tile.copy %y, %b {src_offset = 256, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  func.return
}

// Capacity: two copies of both (2 * (100352 + 50176) bytes) exceed the UB's 253952 usable bytes;
// the larger buffer keeps one copy, the smaller gets two.
// CHECK-LABEL: func.func @capacity
// CHECK-NEXT:    tile.alloc : memref<50176xf16, #tile<space ub>>
// CHECK-NEXT:    tile.alloc {buffers = 2 : i64} : memref<25088xf16, #tile<space ub>>
// THREE-LABEL: func.func @capacity
// THREE-NEXT:    tile.alloc : memref<50176xf16, #tile<space ub>>
// THREE-NEXT:    tile.alloc {buffers = 3 : i64} : memref<25088xf16, #tile<space ub>>
func.func @capacity(%a: memref<200704xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<50176xf16, #tile<space ub>>
  %y = tile.alloc : memref<25088xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 50176} : memref<200704xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 50176, src_stride = 50176, dst_stride = 50176} : memref<200704xf16, #tile<space gm>>, memref<50176xf16, #tile<space ub>>
  tile.copy %a, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 25088, src_stride = 25088, dst_stride = 25088} : memref<200704xf16, #tile<space gm>>, memref<25088xf16, #tile<space ub>>
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 25088, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<50176xf16, #tile<space ub>>, memref<50176xf16, #tile<space ub>>, memref<50176xf16, #tile<space ub>>
  tile.vec %x, %x, %y {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 25088, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<50176xf16, #tile<space ub>>, memref<50176xf16, #tile<space ub>>, memref<25088xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 50176, src_stride = 50176, dst_stride = 50176} : memref<50176xf16, #tile<space ub>>, memref<200704xf16, #tile<space gm>>
  tile.loop_end
  func.return
}

// The kernel's tiling pin overrides the option: buffers = 1 keeps one copy, buffers = 3 three.
// CHECK-LABEL: func.func @pinned_one
// CHECK-NEXT:    tile.alloc : memref<256xf16, #tile<space ub>>
// THREE-LABEL: func.func @pinned_one
// THREE-NEXT:    tile.alloc : memref<256xf16, #tile<space ub>>
func.func @pinned_one(%a: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {buffers = 1 : i64}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.loop_end
  func.return
}
// CHECK-LABEL: func.func @pinned_three
// CHECK-NEXT:    tile.alloc {buffers = 3 : i64} : memref<256xf16, #tile<space ub>>
// ONE-LABEL:   func.func @pinned_three
// ONE-NEXT:      tile.alloc {buffers = 3 : i64} : memref<256xf16, #tile<space ub>>
func.func @pinned_three(%a: memref<1024xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {buffers = 3 : i64}} {
  %x = tile.alloc : memref<256xf16, #tile<space ub>>
  tile.loop_begin {count = 4 : i64}
  tile.loop_offset %a {stride = 256} : memref<1024xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<1024xf16, #tile<space gm>>, memref<256xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 256, dst_stride = 256} : memref<256xf16, #tile<space ub>>, memref<1024xf16, #tile<space gm>>
  tile.loop_end
  func.return
}

// BAD: error: tile-multi-buffer: buffers = 4: 0 (the rule), 1, 2 or 3 expected
