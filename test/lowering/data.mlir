// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=FP32

// Data-movement kernels (cann/lowering/data.py).
//
// trans_data float32 -> float16 of 811009 elements: 33 chunks of 25344 on 32 cores. The last,
// partial round is guarded to core 0 and addresses its own chunk (element 811008 = 32 chunks on);
// so does trans_data back (a guarded second round from element 573440 = 32 * 17920).
// CHECK:      func.func @trans_data_0({{.*}}tile.tiling = {block_dim = 32 : i64, chunk = 25344 : i64}}
// CHECK:        tile.block_offset %0 {stride = 25344}
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 25344,
// CHECK:        tile.block_if {lo = 0 : i64, hi = 1 : i64}
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 811008, dst_offset = 0, nburst = 1, burst = 1,
// CHECK-NEXT:   tile.vec {{.*}}count = 1, {{.*}}op = "cast"
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 811008, nburst = 1, burst = 1,
// CHECK:      func.func @trans_data_1({{.*}}tile.tiling = {block_dim = 32 : i64, chunk = 17920 : i64}}
// CHECK:        tile.block_if {lo = 0 : i64, hi = 13 : i64}
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 573440,
// CHECK:        tile.block_if {lo = 13 : i64, hi = 14 : i64}
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 573440, dst_offset = 0, nburst = 1, burst = 4609,
// float32 on the device: no conversion kernels at all.
// FP32-NOT:   func.func @trans_data
// FP32:       func.func @relu_0

builtin.module {
  func.func @main(%0: tensor<811009xf32> {graph.name = "x"}) -> (tensor<811009xf32> {graph.name = "y"}) {
    %1 = graph.relu %0 : tensor<811009xf32>
    func.return %1 : tensor<811009xf32>
  }
}

// -----
// Transpose whose contiguous run (140000 elements) is longer than UB: a hardware loop over the
// bursts, each run in UB-sized pieces (126976 + 13024 in float16, 63488-element pieces in float32).
// CHECK:      func.func @transpose_0({{.*}}tile.tiling = {chunk = 126976 : i64}}
// CHECK:        tile.loop_begin {count = 3 : i64}
// CHECK:        tile.loop_begin {count = 2 : i64}
// CHECK-NEXT:   tile.loop_offset %0 {stride = 420000}
// CHECK-NEXT:   tile.loop_offset %1 {stride = 140000}
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 126976,
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 126976,
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 126976, dst_offset = 0, nburst = 1, burst = 13024,
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 126976, nburst = 1, burst = 13024,
// CHECK-NEXT:   tile.loop_end
// FP32:       func.func @transpose_0({{.*}}tile.tiling = {chunk = 63488 : i64}}
// FP32:         tile.copy %0, %{{.*}} {src_offset = 126976, dst_offset = 0, nburst = 1, burst = 13024,

builtin.module {
  func.func @main(%0: tensor<2x3x140000xf32> {graph.name = "x"}) -> (tensor<3x2x140000xf32> {graph.name = "y"}) {
    %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : tensor<2x3x140000xf32> -> tensor<3x2x140000xf32>
    func.return %1 : tensor<3x2x140000xf32>
  }
}

// -----
// A run that fits: bursts of the run, no piece loop (must-not case).
// CHECK:      func.func @transpose_0(
// CHECK-NOT:    tile.loop_begin {count = 2 : i64}
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 2, burst = 5, src_stride = 15, dst_stride = 5}
// CHECK:      func.func @main

builtin.module {
  func.func @main(%0: tensor<2x3x5xf32> {graph.name = "x"}) -> (tensor<3x2x5xf32> {graph.name = "y"}) {
    %1 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : tensor<2x3x5xf32> -> tensor<3x2x5xf32>
    func.return %1 : tensor<3x2x5xf32>
  }
}

// -----
// NCHW -> NC1HWC0 of a 3-channel image (3136 positions, 112 per core: 28 cores; transdata.py): the
// three channel rows of the core's positions load in one DMA (bursts of 112 elements), are cast, the
// C1 block's 13 padding channels are zeroed rows in UB, seven 16x16 transposes (source rows 112
// apart) make [112][16], stored in one burst. No element bursts.
// CHECK:      func.func @trans_data_0({{.*}}tile.tiling = {block_dim = 28 : i64, blocks = 1 : i64, positions = 112 : i64}}
// CHECK:        tile.block_offset %0 {stride = 112}
// CHECK-NEXT:   tile.block_offset %1 {stride = 1792}
// CHECK-NEXT:   tile.copy %0, %[[A:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 3, burst = 112, src_stride = 3136, dst_stride = 112}
// CHECK-NEXT:   tile.vec %[[H:[0-9]+]], %[[A]], %[[A]] {{{.*}}count = 336, {{.*}}op = "cast"}
// CHECK-NEXT:   tile.vec %[[H]], {{.*}}{dst_offset = 336, {{.*}}count = 1456, {{.*}}op = "dup"}
// CHECK-NEXT:   tile.transpose_blocks %[[B:[0-9]+]], %[[H]] {dst_offset = 0, src_offset = 0, count = 7, dst_stride = 256, src_stride = 16, dst_row = 16, src_row = 112}
// CHECK-NEXT:   tile.copy %[[B]], %1 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 1792, src_stride = 1792, dst_stride = 50176}
// CHECK-NEXT:   func.return
// And back (NC1HWC0 -> NCHW of 784 positions, 64 per core, the last core's 16 a guarded section):
// transposes with destination rows 64 apart, the cast, the three real channel rows stored.
// CHECK:      func.func @trans_data_1({{.*}}tile.tiling = {block_dim = 13 : i64, blocks = 1 : i64, positions = 64 : i64}}
// CHECK:        tile.copy %0, %[[B:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 1024, src_stride = 12544, dst_stride = 1024}
// CHECK-NEXT:   tile.transpose_blocks %[[A:[0-9]+]], %[[B]] {dst_offset = 0, src_offset = 0, count = 4, dst_stride = 16, src_stride = 256, dst_row = 64, src_row = 16}
// CHECK-NEXT:   tile.vec %[[F:[0-9]+]], %[[A]], %[[A]] {{{.*}}count = 192, {{.*}}op = "cast"}
// CHECK-NEXT:   tile.copy %[[F]], %1 {src_offset = 0, dst_offset = 0, nburst = 3, burst = 64, src_stride = 64, dst_stride = 784}
// CHECK:        tile.block_if {lo = 12 : i64, hi = 13 : i64}
// CHECK:        tile.copy %0, %[[B]] {src_offset = 0, dst_offset = 0, nburst = 1, burst = 256, src_stride = 12544, dst_stride = 1024}
// CHECK-NEXT:   tile.transpose_blocks %[[A]], %[[B]] {dst_offset = 0, src_offset = 0, count = 1, dst_stride = 16, src_stride = 256, dst_row = 64, src_row = 16}
// CHECK-NOT:    burst = 1,
// CHECK:        func.return

builtin.module {
  func.func @main(%0: tensor<1x3x56x56xf32> {graph.name = "x"}) -> (tensor<1x3x28x28xf32> {graph.name = "y"}) {
    %1 = graph.max_pool %0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x3x56x56xf32> -> tensor<1x3x28x28xf32>
    func.return %1 : tensor<1x3x28x28xf32>
  }
}

// -----
// 16 channels fill the C1 block: no padding rows to zero (must-not case).
// CHECK:      func.func @trans_data_0(
// CHECK:        tile.copy %0, %[[A:[0-9]+]] {src_offset = 0, dst_offset = 0, nburst = 16, burst = 112, src_stride = 3136, dst_stride = 112}
// CHECK-NEXT:   tile.vec %[[H:[0-9]+]], %[[A]], %[[A]] {{{.*}}count = 1792, {{.*}}op = "cast"}
// CHECK-NEXT:   tile.transpose_blocks
// CHECK:        func.return

builtin.module {
  func.func @main(%0: tensor<1x16x56x56xf32> {graph.name = "x"}) -> (tensor<1x16x28x28xf32> {graph.name = "y"}) {
    %1 = graph.max_pool %0 {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : tensor<1x16x56x56xf32> -> tensor<1x16x28x28xf32>
    func.return %1 : tensor<1x16x28x28xf32>
  }
}
