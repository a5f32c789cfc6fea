// RUN: cann-opt %s -p tile-multi-buffer | filecheck %s
// RUN: cann-opt %s -p 'tile-multi-buffer{buffers=1}' | filecheck %s --check-prefix=ONE
// RUN: cann-opt %s -p 'tile-multi-buffer{buffers=3}' | filecheck %s --check-prefix=THREE
// RUN: not cann-opt %s -p 'tile-multi-buffer{buffers=4}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: cann-opt %s -p 'tile-multi-buffer{first_segment_bytes=1024}' | filecheck %s --check-prefix=SEG
// RUN: cann-opt %s -p 'tile-multi-buffer{first_segment_bytes=-1}' | filecheck %s --check-prefix=NOSEG
// RUN: not cann-opt %s -p 'tile-multi-buffer{first_segment_bytes=-2}' 2>&1 | filecheck %s --check-prefix=BADSEG
// RUN: not cann-opt %S/Inputs/multi_buffer_bad_pin.mlir -p tile-multi-buffer 2>&1 | filecheck %s --check-prefix=BADPIN

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
// BADPIN: error: @k: tiling buffers = 7: 0 (the rule), 1, 2 or 3 expected
// BADSEG: error: tile-multi-buffer: bad pass option first_segment_bytes=-2: expected a byte count (0: the default rule, -1: no segmentation), got -2

// Segmented first load: first_segment_bytes=1024 cuts the 2048-element loads into 4 segments of
// 512 fp16 elements, loads by segment, each vector op into the same ranges (a broadcast source,
// stride 0, stays), the store by segment. The default rule leaves this 4 KiB load alone (less
// than 32 KiB).
// CHECK-LABEL: func.func @segments
// CHECK-COUNT-2: tile.copy {{.*}}burst = 2048
// CHECK-NEXT:    tile.vec {{.*}}count = 2048
// first_segment_bytes=-1: no segmentation
// NOSEG-LABEL: func.func @segments
// NOSEG-COUNT-2: tile.copy {{.*}}burst = 2048
// NOSEG-NEXT:    tile.vec {{.*}}count = 2048
// SEG-LABEL: func.func @segments
// SEG:         tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %b, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %a, %x {src_offset = 512, dst_offset = 512, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %b, %y {src_offset = 512, dst_offset = 512, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %a, %x {src_offset = 1024, dst_offset = 1024,
// SEG-NEXT:    tile.copy %b, %y {src_offset = 1024, dst_offset = 1024,
// SEG-NEXT:    tile.copy %a, %x {src_offset = 1536, dst_offset = 1536,
// SEG-NEXT:    tile.copy %b, %y {src_offset = 1536, dst_offset = 1536,
// SEG-NEXT:    tile.vec %x, %x, %y {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 512,
// SEG-NEXT:    tile.vec %x, %x, %y {dst_offset = 512, src0_offset = 512, src1_offset = 512, count = 512,
// SEG-NEXT:    tile.vec %x, %x, %y {dst_offset = 1024, src0_offset = 1024, src1_offset = 1024, count = 512,
// SEG-NEXT:    tile.vec %x, %x, %y {dst_offset = 1536, src0_offset = 1536, src1_offset = 1536, count = 512,
// SEG-NEXT:    tile.vec %x, %x, %t {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 4, unit = 128, dst_stride = 128, src0_stride = 128, src1_stride = 0,
// SEG-NEXT:    tile.vec %x, %x, %t {dst_offset = 512, src0_offset = 512, src1_offset = 0, count = 4,
// SEG-NEXT:    tile.vec %x, %x, %t {dst_offset = 1024, src0_offset = 1024, src1_offset = 0, count = 4,
// SEG-NEXT:    tile.vec %x, %x, %t {dst_offset = 1536, src0_offset = 1536, src1_offset = 0, count = 4,
// SEG-NEXT:    tile.copy %x, %a {src_offset = 0, dst_offset = 4096, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %x, %a {src_offset = 512, dst_offset = 4608, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %x, %a {src_offset = 1024, dst_offset = 5120, nburst = 1, burst = 512,
// SEG-NEXT:    tile.copy %x, %a {src_offset = 1536, dst_offset = 5632, nburst = 1, burst = 512,
// SEG-NEXT:    func.return
func.func @segments(%a: memref<8192xf16, #tile<space gm>>, %b: memref<2048xf16, #tile<space gm>>, %c: memref<128xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<2048xf16, #tile<space ub>>
  %y = tile.alloc : memref<2048xf16, #tile<space ub>>
  %t = tile.alloc : memref<128xf16, #tile<space ub>>
  tile.copy %c, %t {src_offset = 0, dst_offset = 0, nburst = 1, burst = 128, src_stride = 128, dst_stride = 128} : memref<128xf16, #tile<space gm>>, memref<128xf16, #tile<space ub>>
  tile.vec %t, %t, %t {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 128, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "relu"} : memref<128xf16, #tile<space ub>>, memref<128xf16, #tile<space ub>>, memref<128xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<8192xf16, #tile<space gm>>, memref<2048xf16, #tile<space ub>>
  tile.copy %b, %y {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<2048xf16, #tile<space gm>>, memref<2048xf16, #tile<space ub>>
  tile.vec %x, %x, %y {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 2048, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<2048xf16, #tile<space ub>>, memref<2048xf16, #tile<space ub>>, memref<2048xf16, #tile<space ub>>
  tile.vec %x, %x, %t {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16, unit = 128, dst_stride = 128, src0_stride = 128, src1_stride = 0, scalar = 0.0, op = "mul"} : memref<2048xf16, #tile<space ub>>, memref<2048xf16, #tile<space ub>>, memref<128xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 4096, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<2048xf16, #tile<space ub>>, memref<8192xf16, #tile<space gm>>
  func.return
}

// Must not: the vector op reads its own buffer at another offset (a shifted in-place op), so
// splitting it would read elements an earlier piece already overwrote.
// SEG-LABEL: func.func @shifted
// SEG:         tile.copy %a, %x {{.*}}burst = 2048
// SEG-NEXT:    tile.vec %x, %x, %x {{.*}}count = 2048
func.func @shifted(%a: memref<8192xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<4096xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<8192xf16, #tile<space gm>>, memref<4096xf16, #tile<space ub>>
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 1024, src1_offset = 1024, count = 2048, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "add"} : memref<4096xf16, #tile<space ub>>, memref<4096xf16, #tile<space ub>>, memref<4096xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 4096, nburst = 1, burst = 2048, src_stride = 2048, dst_stride = 2048} : memref<4096xf16, #tile<space ub>>, memref<8192xf16, #tile<space gm>>
  func.return
}

// The default rule: a straight-line first load of at least 32 KiB is cut into 4 segments (here of
// 4096 fp16 elements); the same load in a hardware loop is not (every iteration would pay).
// CHECK-LABEL: func.func @default_rule
// CHECK:         tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 4096,
// CHECK-NEXT:    tile.copy %a, %x {src_offset = 4096, dst_offset = 4096, nburst = 1, burst = 4096,
// CHECK-NEXT:    tile.copy %a, %x {src_offset = 8192, dst_offset = 8192, nburst = 1, burst = 4096,
// CHECK-NEXT:    tile.copy %a, %x {src_offset = 12288, dst_offset = 12288, nburst = 1, burst = 4096,
// CHECK-COUNT-4: tile.vec %x, %x, %x {{.*}}count = 4096,
// CHECK-COUNT-4: tile.copy %x, %a {{.*}}burst = 4096,
// CHECK:         tile.loop_begin
// CHECK-NEXT:    tile.loop_offset
// CHECK-NEXT:    tile.copy %a, %x {{.*}}burst = 16384,
// CHECK-NEXT:    tile.vec %x, %x, %x {{.*}}count = 16384,
func.func @default_rule(%a: memref<32768xf16, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {}} {
  %x = tile.alloc : memref<16384xf16, #tile<space ub>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 16384, src_stride = 16384, dst_stride = 16384} : memref<32768xf16, #tile<space gm>>, memref<16384xf16, #tile<space ub>>
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16384, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "relu"} : memref<16384xf16, #tile<space ub>>, memref<16384xf16, #tile<space ub>>, memref<16384xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 16384, nburst = 1, burst = 16384, src_stride = 16384, dst_stride = 16384} : memref<16384xf16, #tile<space ub>>, memref<32768xf16, #tile<space gm>>
  tile.loop_begin {count = 2 : i64}
  tile.loop_offset %a {stride = 16384} : memref<32768xf16, #tile<space gm>>
  tile.copy %a, %x {src_offset = 0, dst_offset = 0, nburst = 1, burst = 16384, src_stride = 16384, dst_stride = 16384} : memref<32768xf16, #tile<space gm>>, memref<16384xf16, #tile<space ub>>
  tile.vec %x, %x, %x {dst_offset = 0, src0_offset = 0, src1_offset = 0, count = 16384, unit = 1, dst_stride = 1, src0_stride = 1, src1_stride = 1, scalar = 0.0, op = "relu"} : memref<16384xf16, #tile<space ub>>, memref<16384xf16, #tile<space ub>>, memref<16384xf16, #tile<space ub>>
  tile.copy %x, %a {src_offset = 0, dst_offset = 0, nburst = 1, burst = 16384, src_stride = 16384, dst_stride = 16384} : memref<16384xf16, #tile<space ub>>, memref<32768xf16, #tile<space gm>>
  tile.loop_end
  func.return
}
