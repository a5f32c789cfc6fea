// RUN: cann-opt %s | filecheck %s
// RUN: cann-opt %s --print-op-generic | cann-opt | filecheck %s

// CHECK-LABEL: func.func @trig
func.func @trig(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK: graph.sin %{{.*}} : tensor<2x3xf32>
  %0 = graph.sin %x : tensor<2x3xf32>
  // CHECK: graph.cos
  %1 = graph.cos %0 : tensor<2x3xf32>
  // CHECK: graph.tan
  %2 = graph.tan %1 : tensor<2x3xf32>
  // CHECK: graph.asin
  %3 = graph.asin %2 : tensor<2x3xf32>
  // CHECK: graph.acos
  %4 = graph.acos %3 : tensor<2x3xf32>
  // CHECK: graph.atan
  %5 = graph.atan %4 : tensor<2x3xf32>
  // CHECK: graph.sinh
  %6 = graph.sinh %5 : tensor<2x3xf32>
  // CHECK: graph.cosh
  %7 = graph.cosh %6 : tensor<2x3xf32>
  // CHECK: graph.asinh
  %8 = graph.asinh %7 : tensor<2x3xf32>
  // CHECK: graph.acosh
  %9 = graph.acosh %8 : tensor<2x3xf32>
  // CHECK: graph.atanh
  %10 = graph.atanh %9 : tensor<2x3xf32>
  // CHECK: graph.mish
  %11 = graph.mish %10 : tensor<2x3xf32>
  // CHECK: graph.thresholded_relu %{{.*}} {alpha = 2.000000e+00 : f32} : tensor<2x3xf32>
  %12 = graph.thresholded_relu %11 {alpha = 2.0 : f32} : tensor<2x3xf32>
  // CHECK: graph.shrink %{{.*}} {bias = 1.500000e+00 : f32, lambd = 5.000000e-01 : f32} : tensor<2x3xf32>
  %13 = graph.shrink %12 {bias = 1.5 : f32, lambd = 0.5 : f32} : tensor<2x3xf32>
  // CHECK: graph.hardmax %{{.*}} {axis = 1 : i64} : tensor<2x3xf32>
  %14 = graph.hardmax %13 {axis = 1 : i64} : tensor<2x3xf32>
  func.return %14 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @det
func.func @det(%x: tensor<3x4x4xf32>) -> tensor<3xf32> {
  // CHECK: graph.det %{{.*}} : tensor<3x4x4xf32> -> tensor<3xf32>
  %0 = graph.det %x : tensor<3x4x4xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
