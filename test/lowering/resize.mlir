// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s

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
