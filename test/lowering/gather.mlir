// RUN: cann-opt %s --split-input-file -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s

// Gather with runtime indices (cann/lowering/gather.py) of rows (200000 float32 elements) longer
// than UB: per index one ld_idx, then per outer row UB-sized pieces (`piece` elements) moved by
// register-addressed copies.
// CHECK:      func.func @gather_0({{.*}}tile.tiling = {piece = 63352 : i64}}
// CHECK:        tile.load_index %{{.*}} {src_offset = 0, reg = 0, bound = 5}
// CHECK-NEXT:   tile.copy_indexed %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 1, burst = 63352, src_stride = 63352, dst_stride = 63352, reg = 0, reg_stride = 200000}
// CHECK-NEXT:   tile.copy %{{.*}}, %2 {src_offset = 0, dst_offset = 0, nburst = 1, burst = 63352,
// CHECK:        tile.copy_indexed %0, %{{.*}} {src_offset = 190056, dst_offset = 0, nburst = 1, burst = 9944,
// the second outer row
// CHECK-NEXT:   tile.copy %{{.*}}, %2 {src_offset = 0, dst_offset = 190056, nburst = 1, burst = 9944,
// CHECK-NEXT:   tile.copy_indexed %0, %{{.*}} {src_offset = 1000000, dst_offset = 0, nburst = 1, burst = 63352,
// CHECK-NEXT:   tile.copy %{{.*}}, %2 {src_offset = 0, dst_offset = 600000,
// CHECK:        tile.load_index %{{.*}} {src_offset = 1, reg = 1, bound = 5}
// CHECK-NEXT:   tile.copy_indexed %0, %{{.*}} {src_offset = 0, {{.*}}reg = 1, reg_stride = 200000}
// CHECK-NEXT:   tile.copy %{{.*}}, %2 {src_offset = 0, dst_offset = 200000,

builtin.module {
  func.func @main(%0: tensor<2x5x200000xf32> {graph.name = "d"}, %1: tensor<3xi64> {graph.name = "i"}) -> (tensor<2x3x200000xf32> {graph.name = "y"}) {
    %2 = graph.gather %0, %1 {axis = 1 : i64} : (tensor<2x5x200000xf32>, tensor<3xi64>) -> tensor<2x3x200000xf32>
    func.return %2 : tensor<2x3x200000xf32>
  }
}

// -----
// Rows that fit: slots of whole rows, no pieces (must-not case).
// CHECK:      func.func @gather_0(
// CHECK-NOT:    piece
// CHECK:        tile.copy_indexed %0, %{{.*}} {src_offset = 0, dst_offset = 0, nburst = 2, burst = 7, src_stride = 35, dst_stride = 7, reg = 0, reg_stride = 7}
// CHECK:      func.func @main

builtin.module {
  func.func @main(%0: tensor<2x5x7xf32> {graph.name = "d"}, %1: tensor<3xi64> {graph.name = "i"}) -> (tensor<2x3x7xf32> {graph.name = "y"}) {
    %2 = graph.gather %0, %1 {axis = 1 : i64} : (tensor<2x5x7xf32>, tensor<3xi64>) -> tensor<2x3x7xf32>
    func.return %2 : tensor<2x3x7xf32>
  }
}
