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

// -----

// Resize source coordinates are exact rationals (cann/lowering/resize.py): half_pixel_symmetric,
// width 9, scale 2.5, nearest ceil: x(o) = (2o - 1) / 5, so outputs 11-13 read column 5 (13 is
// exactly 5), 16-18 read column 7 (18 is exactly 7; float64 gave 7.000000000000001 -> column 8),
// 19-21 read column 8. One burst copy per source column: src_offset = 16 * column.

// CHECK:      func.func @resize_0(
// CHECK:        tile.copy {{.*}}src_offset = 80, dst_offset = 176, nburst = 3, burst = 16, src_stride = 0, dst_stride = 16
// CHECK:        tile.copy {{.*}}src_offset = 112, dst_offset = 256, nburst = 3, burst = 16, src_stride = 0, dst_stride = 16
// CHECK-NOT:    src_offset = 128, dst_offset = 288
// CHECK:        tile.copy {{.*}}src_offset = 128, dst_offset = 304, nburst = 3, burst = 16, src_stride = 0, dst_stride = 16
func.func @main(%x: tensor<1x16x1x9xf16>) -> tensor<1x16x1x22xf16> {
  %y = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "half_pixel_symmetric", nearest_mode = "ceil", scales = array<f64: 1.0, 2.5>} : tensor<1x16x1x9xf16> -> tensor<1x16x1x22xf16>
  func.return %y : tensor<1x16x1x22xf16>
}

// -----

// align_corners, sizes 5 -> 9 (scale 1.8 = 9/5, recovered exactly): x(o) = o / 2; round_prefer_ceil
// sends the halves up: outputs 0 | 1, 2 | 3, 4 | 5, 6 | 7, 8 read columns 0 | 1 | 2 | 3 | 4, i.e.
// output o reads column (o + 1) // 2: a progression of period 2.

// CHECK:      func.func @resize_0(
// CHECK:        tile.copy {{.*}}src_offset = 0, dst_offset = 0, nburst = 5, burst = 16, src_stride = 16, dst_stride = 32
// CHECK:        tile.copy {{.*}}src_offset = 16, dst_offset = 16, nburst = 4, burst = 16, src_stride = 16, dst_stride = 32
func.func @main(%x: tensor<1x16x1x5xf16>) -> tensor<1x16x1x9xf16> {
  %y = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "align_corners", nearest_mode = "round_prefer_ceil", scales = array<f64: 1.0, 1.8>} : tensor<1x16x1x5xf16> -> tensor<1x16x1x9xf16>
  func.return %y : tensor<1x16x1x9xf16>
}
