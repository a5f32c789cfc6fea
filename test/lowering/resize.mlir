// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype}' | filecheck %s --check-prefix=FP32

// Resize builds output rows wider than UB in segments of `cols` output columns
// (cann/lowering/resize.py).
//
// Nearest 2x of 6000 columns: segments of 3968 output columns (1984 source columns each), every
// segment gathered by two progressions and written to both output rows of its source row.
// CHECK:      func.func @resize_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 3968 : i64, planes = 1 : i64}}
// CHECK-NEXT:   tile.alloc : memref<63488xf16
// CHECK-NEXT:   tile.alloc : memref<63488xf16
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1984, burst = 16, src_stride = 16, dst_stride = 32}
// CHECK-NEXT:   tile.copy %0, %{{.*}} {src_offset = 0, dst_offset = 16, nburst = 1984, burst = 16, src_stride = 16, dst_stride = 32}
// CHECK-NEXT:   tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 0, nburst = 2, burst = 63488, src_stride = 0, dst_stride = 192000}
// CHECK:        tile.copy %0, %{{.*}} {src_offset = 31744, dst_offset = 0, nburst = 1984,
// CHECK:        tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 63488, nburst = 2, burst = 63488, src_stride = 0, dst_stride = 192000}
// the last segment: 96 output columns
// CHECK:        tile.copy %{{.*}}, %1 {src_offset = 0, dst_offset = 574464, nburst = 2, burst = 1536, src_stride = 0, dst_stride = 192000}
// FP32:       func.func @resize_0({{.*}}tile.tiling = {block_dim = 1 : i64, cols = 1984 : i64, planes = 1 : i64}}

builtin.module {
  func.func @main(%0: tensor<1x16x2x6000xf32> {graph.name = "x"}) -> (tensor<1x16x4x12000xf32> {graph.name = "y"}) {
    %1 = graph.resize %0 {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.000000e+00, 2.000000e+00>} : tensor<1x16x2x6000xf32> -> tensor<1x16x4x12000xf32>
    func.return %1 : tensor<1x16x4x12000xf32>
  }
}

// -----
// Linear: nine row buffers of 880 columns; each segment reads its slice of both weight tables.
// CHECK:      func.func @resize_0({{.*}}tile.tiling = {block_dim = 2 : i64, cols = 880 : i64, planes = 2 : i64}}
// CHECK:        tile.copy %2, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 14080,
// CHECK-NEXT:   tile.copy %3, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 14080,
// CHECK:        tile.copy %2, %{{.*}} {src_offset = 14080, dst_offset = 0, nburst = 1, burst = 14080,
// CHECK-NEXT:   tile.copy %3, %{{.*}} {src_offset = 14080, dst_offset = 0, nburst = 1, burst = 14080,
// FP32:       func.func @resize_0({{.*}}tile.tiling = {block_dim = 2 : i64, cols = 440 : i64, planes = 2 : i64}}

builtin.module {
  func.func @main(%0: tensor<1x20x3x5000xf32> {graph.name = "x"}) -> (tensor<1x20x6x7500xf32> {graph.name = "y"}) {
    %1 = graph.resize %0 {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = array<f64: 2.000000e+00, 1.500000e+00>} : tensor<1x20x3x5000xf32> -> tensor<1x20x6x7500xf32>
    func.return %1 : tensor<1x20x6x7500xf32>
  }
}

// -----
// A row that fits: one segment, the weight tables loaded once before the planes (must-not case).
// CHECK:      func.func @resize_0({{.*}}tile.tiling = {block_dim = 2 : i64, cols = 10 : i64, planes = 2 : i64}}
// CHECK:        tile.copy %2, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 160,
// CHECK-NOT:    tile.copy %2,
// CHECK:      func.func @main

builtin.module {
  func.func @main(%0: tensor<1x20x3x5xf32> {graph.name = "x"}) -> (tensor<1x20x6x10xf32> {graph.name = "y"}) {
    %1 = graph.resize %0 {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = array<f64: 2.000000e+00, 2.000000e+00>} : tensor<1x20x3x5xf32> -> tensor<1x20x6x10xf32>
    func.return %1 : tensor<1x20x6x10xf32>
  }
}
