// RUN: cann-opt %s | filecheck %s
// RUN: cann-opt %s --print-op-generic | cann-opt | filecheck %s
// RUN: cann-opt %s | cann-opt | filecheck %s

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.sigmoid %{{.*}} : tensor<2x3xf32>
  %0 = graph.sigmoid %x : tensor<2x3xf32>
  // CHECK: graph.tanh
  %1 = graph.tanh %0 : tensor<2x3xf32>
  // CHECK: graph.exp
  %2 = graph.exp %1 : tensor<2x3xf32>
  // CHECK: graph.log
  %3 = graph.log %2 : tensor<2x3xf32>
  // CHECK: graph.sqrt
  %4 = graph.sqrt %3 : tensor<2x3xf32>
  // CHECK: graph.reciprocal
  %5 = graph.reciprocal %4 : tensor<2x3xf32>
  // CHECK: graph.abs
  %6 = graph.abs %5 : tensor<2x3xf32>
  // CHECK: graph.neg
  %7 = graph.neg %6 : tensor<2x3xf32>
  // CHECK: graph.erf
  %8 = graph.erf %7 : tensor<2x3xf32>
  // CHECK: graph.softplus
  %9 = graph.softplus %8 : tensor<2x3xf32>
  // CHECK: graph.elu %{{.*}} {alpha = 2.000000e+00 : f32} : tensor<2x3xf32>
  %10 = graph.elu %9 {alpha = 2.0 : f32} : tensor<2x3xf32>
  // CHECK: graph.selu %{{.*}} {alpha = 1.500000e+00 : f32, gamma = 2.000000e+00 : f32}
  %11 = graph.selu %10 {alpha = 1.5 : f32, gamma = 2.0 : f32} : tensor<2x3xf32>
  // CHECK: graph.leaky_relu %{{.*}} {alpha = 1.000000e-01 : f32}
  %12 = graph.leaky_relu %11 {alpha = 0.1 : f32} : tensor<2x3xf32>
  // CHECK: graph.clip %{{.*}} {min = 0.000000e+00 : f32, max = 6.000000e+00 : f32}
  %13 = graph.clip %12 {min = 0.0 : f32, max = 6.0 : f32} : tensor<2x3xf32>
  // CHECK: graph.hard_sigmoid %{{.*}} {alpha = 2.000000e-01 : f32, beta = 5.000000e-01 : f32}
  %14 = graph.hard_sigmoid %13 {alpha = 0.2 : f32, beta = 0.5 : f32} : tensor<2x3xf32>
  // CHECK: graph.gelu %{{.*}} {approximate = "tanh"} : tensor<2x3xf32>
  %15 = graph.gelu %14 {approximate = "tanh"} : tensor<2x3xf32>
  func.return %15 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%x: tensor<2x3xf32>, %s: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.max %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = graph.max %x, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.min
  %1 = graph.min %s, %0 : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.pow
  %2 = graph.pow %1, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %2 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @layout
func.func @layout(%x: tensor<2x3xf32>, %g: tensor<3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.reduce %{{.*}} {kind = "sum", axes = array<i64: 1>, keepdims = 0 : i64} : tensor<2x3xf32> -> tensor<2xf32>
  %r = graph.reduce %x {kind = "sum", axes = array<i64: 1>, keepdims = 0 : i64} : tensor<2x3xf32> -> tensor<2xf32>
  // CHECK: graph.reduce %{{.*}} {kind = "log_sum_exp", axes = array<i64: 0, 1>, keepdims = 1 : i64} : tensor<2x3xf32> -> tensor<1x1xf32>
  %r2 = graph.reduce %x {kind = "log_sum_exp", axes = array<i64: 0, 1>, keepdims = 1 : i64} : tensor<2x3xf32> -> tensor<1x1xf32>
  // CHECK: graph.pad %{{.*}} {pads = array<i64: 0, 1, 0, 1>, mode = "reflect", value = 0.000000e+00 : f32} : tensor<2x3xf32> -> tensor<2x5xf32>
  %p = graph.pad %x {pads = array<i64: 0, 1, 0, 1>, mode = "reflect", value = 0.0 : f32} : tensor<2x3xf32> -> tensor<2x5xf32>
  // CHECK: graph.slice %{{.*}} {starts = array<i64: 1, 4>, ends = array<i64: -1, 0>, steps = array<i64: -1, -2>} : tensor<2x5xf32> -> tensor<2x2xf32>
  %s = graph.slice %p {starts = array<i64: 1, 4>, ends = array<i64: -1, 0>, steps = array<i64: -1, -2>} : tensor<2x5xf32> -> tensor<2x2xf32>
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}} {axis = 1 : i64, epsilon = 1.000000e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = graph.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64
  %l2 = graph.layer_norm %x, %g, %g {axis = 0 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // scale / bias broadcast to the input (ONNX's unidirectional rule), not only to the normalized axes
  // CHECK: graph.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64{{.*}}} : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<1x1xf32>) -> tensor<2x3xf32>
  %gc = "test.op"() : () -> tensor<2x1xf32>
  %b1 = "test.op"() : () -> tensor<1x1xf32>
  %l3 = graph.layer_norm %x, %gc, %b1 {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<2x1xf32>, tensor<1x1xf32>) -> tensor<2x3xf32>
  // CHECK: graph.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xf16>
  %c = graph.cast %l : tensor<2x3xf32> -> tensor<2x3xf16>
  func.return %l2 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @expand
func.func @expand(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  // CHECK: graph.expand %{{.*}} : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %0 = graph.expand %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  func.return %0 : tensor<2x3x4xf32>
}
