// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

%0 = tile.alloc : memref<16xf16, #tile<space gm>>
// CHECK: tile.alloc allocates on-chip buffers; use tile.gm_alloc in @main for GM

// -----

%0 = tile.alloc {buffers = 0 : i64} : memref<16xf16, #tile<space ub>>
// CHECK: tile.alloc buffers must be >= 1, got 0

// -----

%0 = "test.op"() : () -> memref<16xf16>
%1 = tile.alloc : memref<16xf16, #tile<space ub>>
tile.copy %0, %1 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 16, src_stride = 16, dst_stride = 16} : memref<16xf16>, memref<16xf16, #tile<space ub>>
// CHECK: expected a memref in a #tile<space ...>, got memref<16xf16>

// -----

%0 = tile.alloc : memref<16xf16, #tile<space ub>>
"tile.copy"(%0) <{src_offset = 0 : i64, dst_offset = 0 : i64, nburst = 1 : i64, burst = 16 : i64, src_stride = 16 : i64, dst_stride = 16 : i64}> : (memref<16xf16, #tile<space ub>>) -> ()
// CHECK: tile.copy expects 2 operands (src, dst)
