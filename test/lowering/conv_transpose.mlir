// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=FP32

// ConvTranspose's stride-dilating scatter (cann/lowering/conv_transpose.py): an input row of
// 4000 x 16 channels is longer than its UB buffer (63488 float16 elements), so each row moves in
// pieces of `cols` = 3968 input columns (and the 32-column rest), each piece written at its place
// in the zero-filled buffer.
// CHECK:      func.func @dilate_scatter_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 3968 : i64}}
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 63488, src_stride = 64000, dst_stride = 63488}
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 16, nburst = 1, burst = 63488,
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 63488, dst_offset = 0, nburst = 1, burst = 512, src_stride = 64000, dst_stride = 512}
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 63504, nburst = 1, burst = 512,
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 64000, dst_offset = 0, nburst = 1, burst = 63488,
// CHECK:      func.func @conv_transpose_0
// FP32:       func.func @dilate_scatter_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 1984 : i64}}

builtin.module {
  func.func @main(%0: tensor<1x16x2x4000xf32> {graph.name = "x"}) -> (tensor<1x4x2x4001xf32> {graph.name = "y"}) {
    %1 = graph.constant dense<5.000000e-01> : tensor<16x4x1x2xf32>
    %2 = graph.conv_transpose %0, %1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x16x2x4000xf32>, tensor<16x4x1x2xf32>) -> tensor<1x4x2x4001xf32>
    func.return %2 : tensor<1x4x2x4001xf32>
  }
}

// -----
// Rows that fit: whole rows, both in one contiguous copy, each scattered with stride 2 (must-not
// case: no pieces).
// CHECK:      func.func @dilate_scatter_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 5 : i64}}
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 160, src_stride = 160, dst_stride = 160}
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = {{[0-9]+}}, nburst = 5, burst = 16, src_stride = 16, dst_stride = 32}
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 80, dst_offset = {{[0-9]+}}, nburst = 5, burst = 16, src_stride = 16, dst_stride = 32}
// CHECK-NEXT:   func.return

builtin.module {
  func.func @main(%0: tensor<1x16x2x5xf32> {graph.name = "x"}) -> (tensor<1x4x4x10xf32> {graph.name = "y"}) {
    %1 = graph.constant dense<5.000000e-01> : tensor<16x4x2x2xf32>
    %2 = graph.conv_transpose %0, %1 {strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x16x2x5xf32>, tensor<16x4x2x2xf32>) -> tensor<1x4x4x10xf32>
    func.return %2 : tensor<1x4x4x10xf32>
  }
}
