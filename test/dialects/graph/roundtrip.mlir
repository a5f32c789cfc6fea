// RUN: cann-opt %s | filecheck %s
// RUN: cann-opt %s --print-op-generic | cann-opt | filecheck %s
// RUN: cann-opt %s | cann-opt | filecheck %s

// CHECK-LABEL: func.func @main
func.func @main(%x: tensor<1x3x8x8xf32> {graph.name = "data_0"}, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> (tensor<1x4x8x8xf32> {graph.name = "out"}) {
  // CHECK: %{{.*}} = graph.constant dense<1.000000e+00> : tensor<4xf32>
  %c = graph.constant dense<1.0> : tensor<4xf32>
  // CHECK: graph.constant dense<[2, 3]> : tensor<2xi64>
  %s = graph.constant dense<[2, 3]> : tensor<2xi64>
  // CHECK: graph.constant dense_resource<conv1_w_0> : tensor<64x3x7x7xf32>
  %r = graph.constant dense_resource<conv1_w_0> : tensor<64x3x7x7xf32>
  // CHECK: graph.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %0 = graph.conv2d %x, %w, %b {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  %1 = graph.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  // CHECK: graph.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-05 : f32} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  %2 = graph.batch_norm %0, %b, %b, %b, %c {epsilon = 1.0e-05 : f32} : (tensor<1x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.relu %{{.*}} : tensor<1x4x8x8xf32>
  %3 = graph.relu %2 : tensor<1x4x8x8xf32>
  %bb = graph.constant dense<0.5> : tensor<4x1x1xf32>
  // CHECK: graph.add %{{.*}}, %{{.*}} : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %4 = graph.add %3, %bb : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.sub %{{.*}}, %{{.*}} : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %5 = graph.sub %4, %3 : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.mul %{{.*}}, %{{.*}} : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %6 = graph.mul %5, %bb : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.div %{{.*}}, %{{.*}} : (tensor<4x1x1xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %7 = graph.div %bb, %6 : (tensor<4x1x1xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  // CHECK: graph.max_pool %{{.*}} {ceil_mode = 1 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %8 = graph.max_pool %7 {ceil_mode = 1 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  // CHECK: graph.avg_pool %{{.*}} {ceil_mode = 0 : i64, count_include_pad = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %9 = graph.avg_pool %7 {ceil_mode = 0 : i64, count_include_pad = 0 : i64, dilations = array<i64: 1, 1>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  // CHECK: graph.global_avg_pool %{{.*}} : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf32>
  %10 = graph.global_avg_pool %9 : tensor<1x4x8x8xf32> -> tensor<1x4x1x1xf32>
  // CHECK: graph.reshape %{{.*}} : tensor<1x4x1x1xf32> -> tensor<1x4xf32>
  %11 = graph.reshape %10 : tensor<1x4x1x1xf32> -> tensor<1x4xf32>
  %fw = graph.constant dense<0.1> : tensor<10x4xf32>
  %fb = graph.constant dense<0.0> : tensor<10xf32>
  // CHECK: graph.gemm %{{.*}}, %{{.*}}, %{{.*}} {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<1x4xf32>, tensor<10x4xf32>, tensor<10xf32>) -> tensor<1x10xf32>
  %12 = graph.gemm %11, %fw, %fb {alpha = 1.0 : f32, beta = 1.0 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<1x4xf32>, tensor<10x4xf32>, tensor<10xf32>) -> tensor<1x10xf32>
  // CHECK: graph.gemm %{{.*}}, %{{.*}} {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<1x4xf32>, tensor<10x4xf32>) -> tensor<1x10xf32>
  %13 = graph.gemm %11, %fw {alpha = 1.0 : f32, beta = 1.0 : f32, trans_a = 0 : i64, trans_b = 1 : i64} : (tensor<1x4xf32>, tensor<10x4xf32>) -> tensor<1x10xf32>
  %mw = graph.constant dense<0.1> : tensor<4x10xf32>
  // CHECK: graph.matmul %{{.*}}, %{{.*}} : (tensor<1x4xf32>, tensor<4x10xf32>) -> tensor<1x10xf32>
  %14 = graph.matmul %11, %mw : (tensor<1x4xf32>, tensor<4x10xf32>) -> tensor<1x10xf32>
  // CHECK: graph.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1x10xf32>, tensor<1x10xf32>, tensor<1x10xf32>) -> tensor<1x30xf32>
  %15 = graph.concat %12, %13, %14 {axis = 1 : i64} : (tensor<1x10xf32>, tensor<1x10xf32>, tensor<1x10xf32>) -> tensor<1x30xf32>
  // CHECK: graph.transpose %{{.*}} {perm = array<i64: 1, 0>} : tensor<1x30xf32> -> tensor<30x1xf32>
  %16 = graph.transpose %15 {perm = array<i64: 1, 0>} : tensor<1x30xf32> -> tensor<30x1xf32>
  // CHECK: graph.softmax %{{.*}} {axis = 1 : i64} : tensor<1x30xf32>
  %17 = graph.softmax %15 {axis = 1 : i64} : tensor<1x30xf32>
  // CHECK: graph.lrn %{{.*}} {alpha = 1.000000e-04 : f32, beta = 7.500000e-01 : f32, bias = 1.000000e+00 : f32, size = 5 : i64} : tensor<1x4x8x8xf32>
  %18 = graph.lrn %7 {alpha = 1.0e-04 : f32, beta = 0.75 : f32, bias = 1.0 : f32, size = 5 : i64} : tensor<1x4x8x8xf32>
  // CHECK: func.return
  func.return %18 : tensor<1x4x8x8xf32>
}
