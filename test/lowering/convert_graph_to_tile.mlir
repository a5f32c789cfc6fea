// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=force_fp16}' | filecheck %s
// RUN: cann-opt %s -p 'convert-graph-to-tile{soc=Ascend910 precision_mode=must_keep_origin_dtype tiling="{\"conv2d_0\": {\"c04\": 0}}"}' | filecheck %s --check-prefix=FP32

// A 1x1 Conv + bias + Relu: input NCHW fp32 -> trans_data (rows cast, then 16x16 transposed) ->
// NC1HWC0 fp16, cube conv, vector relu, trans_data back to NCHW fp32.

// CHECK:      builtin.module attributes {tile.soc = "Ascend910", tile.precision_mode = "force_fp16"}
// CHECK:      func.func @trans_data_0(%{{.*}}: memref<48xf32, #tile<space gm>>, %{{.*}}: memref<256xf16, #tile<space gm>>)
// CHECK:        tile.vec {{.*}} op = "cast"
// CHECK:        tile.transpose_blocks {{.*}}count = 1, dst_stride = 256, src_stride = 16, dst_row = 16, src_row = 16}
// CHECK:      func.func @conv2d_0({{.*}}) attributes {tile.kernel, tile.block_dim = 1 : i64, tile.tiling = {block_dim = 1 : i64, k = 16 : i64, m = 16 : i64, n = 16 : i64, rows = {{[0-9]+}} : i64}}
// CHECK-DAG:    %[[L1:.*]] = tile.alloc : memref<{{[0-9]+}}xf16, #tile<space l1>>
// CHECK-DAG:    %[[L0A:.*]] = tile.alloc : memref<256xf16, #tile<space l0a>>
// CHECK-DAG:    %[[L0B:.*]] = tile.alloc : memref<256xf16, #tile<space l0b>>
// CHECK-DAG:    %[[L0C:.*]] = tile.alloc : memref<{{[0-9]+}}xf32, #tile<space l0c>>
// CHECK:        tile.load2d %{{.*}}, %[[L0B]] {{{.*}}count = 1
// CHECK:        tile.img2col %{{.*}}, %[[L0A]] {{{.*}}fm_c1 = 1, fm_h = 4, fm_w = 4, {{.*}}m_start = 0, m_count = 16, k_start = 0, k_count = 16, fm_c1_stride = 256}
// CHECK:        tile.mmad %[[L0A]], %[[L0B]], %[[L0C]] {a_offset = 0, b_offset = 0, c_offset = 0, m = 16, k = 16, n = 16, init = 1}
// CHECK:        tile.copy_l0c_to_ub %[[L0C]], {{.*}}n1 = 1, m = 16, src_m = 16
// CHECK:        tile.vec {{.*}}src1_stride = 0, scalar = 0.0, op = "add"
// CHECK:      func.func @relu_0
// CHECK:        tile.vec {{.*}}op = "relu"
// CHECK:      func.func @trans_data_1
// CHECK:      func.func @main(%[[X:.*]]: memref<1x3x4x4xf32, #tile<space gm>> {graph.name = "x"}) -> (memref<1x4x4x4xf32, #tile<space gm>> {graph.name = "z"})
// CHECK:        tile.launch @trans_data_0(%[[X]], %{{.*}})
// CHECK:        tile.constant {format = "FRACTAL_Z"
// CHECK:        tile.launch @conv2d_0(
// CHECK:        tile.launch @relu_0(
// CHECK:        tile.launch @trans_data_1(
// CHECK:        func.return

// fp32 keeps float32 on the device; the fp32 cube fractal has K0 = 8, so K = 16 is two fractals
// (in NC1HWC0, pinned: unpinned, the 3 channels take NC1HWC0_C04, K = 8, small_cin.mlir).
// FP32:       func.func @conv2d_0
// FP32:         tile.alloc : memref<{{[0-9]+}}xf32, #tile<space l0a>>
// FP32:         tile.mmad {{.*}}m = 16, k = 16, n = 16, init = 1
// FP32-NOT:     op = "cast"
// FP32:       func.func @relu_0

builtin.module {
  func.func @main(%0: tensor<1x3x4x4xf32> {graph.name = "x"}) -> (tensor<1x4x4x4xf32> {graph.name = "z"}) {
    %1 = graph.constant dense<[[[[0.000000e+00]], [[1.000000e-01]], [[2.000000e-01]]], [[[3.000000e-01]], [[4.000000e-01]], [[5.000000e-01]]], [[[6.000000e-01]], [[7.000000e-01]], [[8.000000e-01]]], [[[9.000000e-01]], [[1.000000e+00]], [[1.100000e+00]]]]> : tensor<4x3x1x1xf32>
    %2 = graph.constant dense<[5.000000e-01, -5.000000e-01, 1.000000e+00, 0.000000e+00]> : tensor<4xf32>
    %3 = graph.conv2d %0, %1, %2 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<4x3x1x1xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
    %4 = graph.relu %3 : tensor<1x4x4x4xf32>
    func.return %4 : tensor<1x4x4x4xf32>
  }
}

