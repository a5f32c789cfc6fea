// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=FP32
// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16 aicore_num=2}' | filecheck %s --check-prefix=TWO

// Vector kernels tile along every axis (cann/lowering/vector.py).
//
// GlobalAveragePool of two 100x100 planes on 32 cores: SPMD over the positions, core b sums
// part b (313 positions, the last core 297) of both planes in a hardware loop over the planes,
// float32 partial sums [32][2][16] to GM; then global_avg_pool_sum adds the parts (a halving
// tree over rows of 2 x 16), scales by 1/(H*W) and converts (float32 keeps no conversion).
// CHECK:      func.func @global_avg_pool_0({{.*}}memref<1024xf32, #tile<space gm>>) attributes {tile.kernel, tile.block_dim = 32 : i64, tile.tiling = {block_dim = 32 : i64, parts = 32 : i64, positions = 313 : i64}}
// CHECK:        tile.block_offset %0 {stride = 5008}
// CHECK-NEXT:   tile.block_offset %1 {stride = 32}
// CHECK-NEXT:   tile.block_if {lo = 0 : i64, hi = 31 : i64}
// CHECK-NEXT:   tile.loop_begin {count = 2 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 160000}
// CHECK-NEXT:   tile.loop_offset %1 {stride = 16}
// CHECK:        tile.vec {{.*}}count = 5008, unit = 1, {{.*}}op = "cast"
// CHECK:        tile.copy {{.*}}burst = 16, src_stride = 16, dst_stride = 16} : memref<64xf32, #tile<space ub>>, memref<1024xf32
// CHECK:        tile.block_if {lo = 31 : i64, hi = 32 : i64}
// CHECK:        tile.copy %0, {{.*}}burst = 4752,
// CHECK:      func.func @global_avg_pool_sum_0({{.*}}tile.tiling = {parts = 32 : i64}}
// CHECK:        tile.vec {{.*}}src1_offset = 512, count = 32, unit = 16, {{.*}}op = "add"
// CHECK:        tile.vec {{.*}}count = 2, unit = 16, {{.*}}scalar = 0.0001, op = "muls"
// CHECK:        tile.vec {{.*}}count = 32, unit = 1, {{.*}}op = "cast"} : memref<128xf16
// FP32:       func.func @global_avg_pool_0({{.*}}tile.tiling = {block_dim = 32 : i64, parts = 32 : i64, positions = 313 : i64}}
// FP32-NOT:     op = "cast"
// FP32:       func.func @global_avg_pool_sum_0
// FP32-NOT:     op = "cast"
// FP32:       func.func @main
//
// On two cores (no split): one plane per core, read in chunks of `positions` positions, chunk
// pairs in a hardware loop, float16 chunks converted to float32, a halving tree, float32 partial
// sums in UB.
// TWO:        func.func @global_avg_pool_0({{.*}}) attributes {tile.kernel, tile.block_dim = 2 : i64, tile.tiling = {block_dim = 2 : i64, planes = 1 : i64, positions = 1973 : i64}}
// TWO:          tile.vec {{.*}}count = 1, unit = 16, {{.*}}op = "dup"} : memref<64xf32
// TWO:          tile.loop_begin {count = 2 : i64}
// TWO-NEXT:     tile.loop_offset %0 {stride = 63136}
// TWO:          tile.vec {{.*}}count = 31568, unit = 1, {{.*}}op = "cast"
// TWO:          tile.vec {{.*}}src1_offset = 15792, count = 986, unit = 16, {{.*}}op = "add"
// TWO:          tile.loop_end
// TWO:          tile.vec {{.*}}scalar = 0.0001, op = "muls"
// TWO:          tile.vec {{.*}}count = 16, unit = 1, {{.*}}op = "cast"} : memref<128xf16
// TWO-NOT:    func.func @global_avg_pool_sum

builtin.module {
  func.func @main(%0: tensor<1x20x100x100xf32> {graph.name = "x"}) -> (tensor<1x20x1x1xf32> {graph.name = "y"}) {
    %1 = graph.global_avg_pool %0 : tensor<1x20x100x100xf32> -> tensor<1x20x1x1xf32>
    func.return %1 : tensor<1x20x1x1xf32>
  }
}

// -----
// Small planes: groups of whole planes (two of the 63 C1 planes per core), no chunk loop.
// CHECK:      func.func @global_avg_pool_0({{.*}}) attributes {tile.kernel, tile.block_dim = 32 : i64, tile.tiling = {block_dim = 32 : i64, planes = 2 : i64, positions = 49 : i64}}
// CHECK-NOT:    tile.loop_begin
// CHECK:        tile.block_if {lo = 0 : i64, hi = 31 : i64}
// CHECK:        tile.vec {{.*}}dst_offset = 16, src0_offset = 784, {{.*}}op = "mov"
// CHECK:        tile.block_if {lo = 31 : i64, hi = 32 : i64}
// CHECK:      func.func @main

builtin.module {
  func.func @main(%0: tensor<1x1000x7x7xf32> {graph.name = "x"}) -> (tensor<1x1000x1x1xf32> {graph.name = "y"}) {
    %1 = graph.global_avg_pool %0 : tensor<1x1000x7x7xf32> -> tensor<1x1000x1x1xf32>
    func.return %1 : tensor<1x1000x1x1xf32>
  }
}

// -----
// A 9000x2 pooling window larger than UB: blocks of window rows; each block of one output
// position is reduced by a halving tree of vmax, then combined into the output.
// CHECK:      func.func @max_pool_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 1 : i64, kcols = 1 : i64, krows = 7928 : i64, rows = 1 : i64}}
// CHECK:        tile.vec {{.*}}src1_offset = 63424, count = 3964, unit = 16, {{.*}}op = "max"
// FP32:       func.func @max_pool_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 1 : i64, kcols = 1 : i64, krows = {{[0-9]+}} : i64, rows = 1 : i64}}

builtin.module {
  func.func @main(%0: tensor<1x16x9000x3xf32> {graph.name = "x"}) -> (tensor<1x16x1x2xf32> {graph.name = "y"}) {
    %1 = graph.max_pool %0 {kernel_shape = array<i64: 9000, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x16x9000x3xf32> -> tensor<1x16x1x2xf32>
    func.return %1 : tensor<1x16x1x2xf32>
  }
}

// -----
// Output rows of 70000 positions: tiles of 1982 output columns with the whole 3x3 window; the one
// C1 plane leaves cores idle: its three output rows go to three groups of cores (m_blocks).
// CHECK:      func.func @max_pool_0({{.*}}tile.tiling = {block_dim = 3 : i64, cols = 1982 : i64, kcols = 3 : i64, krows = 3 : i64, m_blocks = 3 : i64, rows = 1 : i64}}
// CHECK:        tile.copy {{.*}}nburst = 2, burst = 31728, src_stride = 1120000, dst_stride = 31744}

builtin.module {
  func.func @main(%0: tensor<1x16x3x70000xf32> {graph.name = "x"}) -> (tensor<1x16x3x70000xf32> {graph.name = "y"}) {
    %1 = graph.max_pool %0 {kernel_shape = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x16x3x70000xf32> -> tensor<1x16x3x70000xf32>
    func.return %1 : tensor<1x16x3x70000xf32>
  }
}

// -----
// Softmax over 100000 elements: chunks of 65504 (the float16 count limit) in three passes (max;
// exp and the float32 sum; normalize by the reciprocal) for each row.
// CHECK:      func.func @softmax_0({{.*}}tile.tiling = {block_dim = 2 : i64, chunk = 65504 : i64}}
// CHECK:        tile.reduce {{.*}}count = 65504, op = "max"
// CHECK:        tile.reduce {{.*}}count = 34496, op = "max"
// CHECK:        tile.reduce {{.*}}count = 65504, op = "add"
// CHECK:        tile.vec {{.*}}op = "cast"} : memref<64xf32
// CHECK:        tile.vec {{.*}}op = "rec"
// CHECK:        tile.vec {{.*}}count = 34496, {{.*}}src1_stride = 0, scalar = 0.0, op = "mul"
// CHECK:        tile.copy {{.*}}dst_offset = 65504, nburst = 1, burst = 34496
// FP32:       func.func @softmax_0({{.*}}tile.tiling = {block_dim = 2 : i64, chunk = 61056 : i64}}
// FP32:         tile.reduce {{.*}}count = 61056, op = "max"
// FP32:         tile.reduce {{.*}}count = 38944, op = "max"

builtin.module {
  func.func @main(%0: tensor<2x100000xf32> {graph.name = "x"}) -> (tensor<2x100000xf32> {graph.name = "y"}) {
    %1 = graph.softmax %0 {axis = 1 : i64} : tensor<2x100000xf32>
    func.return %1 : tensor<2x100000xf32>
  }
}

// -----
// A row that fits: read once, no passes (must-not case).
// CHECK:      func.func @softmax_0({{.*}}tile.tiling = {block_dim = 2 : i64, chunk = 1000 : i64}}
// CHECK-NOT:    op = "rec"
// CHECK:        op = "div"
// CHECK:      func.func @main

builtin.module {
  func.func @main(%0: tensor<2x1000xf32> {graph.name = "x"}) -> (tensor<2x1000xf32> {graph.name = "y"}) {
    %1 = graph.softmax %0 {axis = 1 : i64} : tensor<2x1000xf32>
    func.return %1 : tensor<2x1000xf32>
  }
}
