// RUN: cann-opt %s -p graph-fold-transposes | filecheck %s
// Idempotence: a second run changes nothing.
// RUN: cann-opt %s -p graph-fold-transposes -o %t.1.mlir
// RUN: cann-opt %t.1.mlir -p graph-fold-transposes -o %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

// NHWC -> NCHW -> conv -> NHWC -> elementwise (constant operand, swish) -> NCHW -> conv: the pair
// between the layers cancels, the per-channel constant is permuted to [C, 1, 1].
// CHECK-LABEL: func.func @between_layers
// CHECK:       %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 0, 3, 1, 2>}
// CHECK:       %[[C1:.*]] = graph.conv2d %[[T]]
// CHECK-DAG:   %[[K:.*]] = graph.constant dense<{{.*}}> : tensor<1x2x1x1xf32>
// CHECK:       %[[M:.*]] = graph.mul %[[C1]], %[[K]] : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
// CHECK:       %[[S:.*]] = graph.sigmoid %[[M]] : tensor<1x2x4x4xf32>
// CHECK:       %[[W:.*]] = graph.mul %[[M]], %[[S]] : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK:       %[[C2:.*]] = graph.conv2d %[[W]]
// CHECK-NOT:   graph.transpose
// CHECK:       func.return %[[C2]]
func.func @between_layers(%x: tensor<1x4x4x3xf32>) -> tensor<1x2x4x4xf32> {
  %w1 = graph.constant dense<1.0> : tensor<2x3x1x1xf32>
  %w2 = graph.constant dense<1.0> : tensor<2x2x1x1xf32>
  %k = graph.constant dense<[0.5, 2.0]> : tensor<2xf32>
  %0 = graph.transpose %x {perm = array<i64: 0, 3, 1, 2>} : tensor<1x4x4x3xf32> -> tensor<1x3x4x4xf32>
  %1 = graph.conv2d %0, %w1 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x3x4x4xf32>, tensor<2x3x1x1xf32>) -> tensor<1x2x4x4xf32>
  %2 = graph.transpose %1 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x2x4x4xf32> -> tensor<1x4x4x2xf32>
  %3 = graph.mul %2, %k : (tensor<1x4x4x2xf32>, tensor<2xf32>) -> tensor<1x4x4x2xf32>
  %4 = graph.sigmoid %3 : tensor<1x4x4x2xf32>
  %5 = graph.mul %3, %4 : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %6 = graph.transpose %5 {perm = array<i64: 0, 3, 1, 2>} : tensor<1x4x4x2xf32> -> tensor<1x2x4x4xf32>
  %7 = graph.conv2d %6, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  func.return %7 : tensor<1x2x4x4xf32>
}

// Two transposes compose; a reduction over NHWC's H, W becomes one over NCHW's H, W.
// CHECK-LABEL: func.func @compose_and_reduce
// CHECK:       %[[R:.*]] = graph.reduce %x {kind = "mean", axes = array<i64: 2, 3>, keepdims = 0 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2xf32>
// CHECK-NEXT:      %[[P:.*]] = graph.transpose %y {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK:       func.return %[[R]], %[[P]]
func.func @compose_and_reduce(%x: tensor<1x2x4x4xf32>, %y: tensor<2x3x4xf32>) -> (tensor<1x2xf32>, tensor<4x2x3xf32>) {
  %0 = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : tensor<1x2x4x4xf32> -> tensor<1x4x4x2xf32>
  %1 = graph.reduce %0 {axes = array<i64: 1, 2>, keepdims = 0 : i64, kind = "mean"} : tensor<1x4x4x2xf32> -> tensor<1x2xf32>
  %2 = graph.transpose %y {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
  %3 = graph.transpose %2 {perm = array<i64: 1, 2, 0>} : tensor<3x4x2xf32> -> tensor<4x2x3xf32>
  func.return %1, %3 : tensor<1x2xf32>, tensor<4x2x3xf32>
}

// Must not fold: the binary op's other operand is neither a constant nor a transpose of the
// same permutation, and the transpose also feeds the function result.
// CHECK-LABEL: func.func @no_fold
// CHECK:       %[[T:.*]] = graph.transpose %{{.*}} {perm = array<i64: 0, 2, 3, 1>}
// CHECK:       %[[A:.*]] = graph.add %[[T]], %y
// CHECK:       %[[U:.*]] = graph.transpose %z {perm = array<i64: 1, 0>}
// CHECK:       %[[R:.*]] = graph.relu %[[U]]
// CHECK:       func.return %[[A]], %[[U]], %[[R]]
func.func @no_fold(%x: tensor<1x2x4x4xf32>, %y: tensor<1x4x4x2xf32>, %z: tensor<2x3xf32>) -> (tensor<1x4x4x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %0 = graph.transpose %x {perm = array<i64: 0, 2, 3, 1>} : tensor<1x2x4x4xf32> -> tensor<1x4x4x2xf32>
  %1 = graph.add %0, %y : (tensor<1x4x4x2xf32>, tensor<1x4x4x2xf32>) -> tensor<1x4x4x2xf32>
  %2 = graph.transpose %z {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %3 = graph.relu %2 : tensor<3x2xf32>
  func.return %1, %2, %3 : tensor<1x4x4x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}
