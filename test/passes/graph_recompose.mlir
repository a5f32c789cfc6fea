// RUN: cann-opt %s --split-input-file -p graph-recompose | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'graph-recompose{layer_norm=false gelu=false}' | filecheck %s --check-prefix=OFF

// LayerNormalization as ONNX exporters spell it (ReduceMean, Sub, Pow, Add eps, Sqrt, Div, *gamma +beta).
// CHECK-LABEL: func.func @layer_norm
// CHECK:         %[[G:.*]] = graph.constant dense<2.000000e+00> : tensor<8xf32>
// CHECK:         %[[B:.*]] = graph.constant dense<5.000000e-01> : tensor<8xf32>
// CHECK:         %[[N:.*]] = graph.layer_norm %x, %[[G]], %[[B]] {axis = 1 : i64, epsilon = 1.000000e-05 : f32}
// CHECK-NOT:     graph.reduce
// CHECK:         func.return %[[N]]
// OFF-LABEL:   func.func @layer_norm
// OFF-NOT:       graph.layer_norm
builtin.module {
  func.func @layer_norm(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %two = graph.constant dense<2.0> : tensor<f32>
    %eps = graph.constant dense<1.0e-5> : tensor<f32>
    %gamma = graph.constant dense<2.0> : tensor<8xf32>
    %beta = graph.constant dense<0.5> : tensor<8xf32>
    %m = graph.reduce %x {kind = "mean", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
    %d = graph.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %p = graph.pow %d, %two : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %v = graph.reduce %p {kind = "mean", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
    %a = graph.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    %s = graph.sqrt %a : tensor<2x1xf32>
    %y = graph.div %d, %s : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %g = graph.mul %y, %gamma : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %o = graph.add %g, %beta : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    func.return %o : tensor<2x8xf32>
  }
}

// -----

// GELU: 0.5 * x * (1 + erf(x / sqrt(2))).
// CHECK-LABEL: func.func @gelu
// CHECK:         %[[R:.*]] = graph.gelu %x {approximate = "none"}
// CHECK-NOT:     graph.erf
// CHECK:         func.return %[[R]]
builtin.module {
  func.func @gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %sq = graph.constant dense<1.41421354> : tensor<f32>
    %one = graph.constant dense<1.0> : tensor<f32>
    %half = graph.constant dense<0.5> : tensor<f32>
    %a = graph.div %x, %sq : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e = graph.erf %a : tensor<2x8xf32>
    %b = graph.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %c = graph.mul %x, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = graph.mul %c, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    func.return %y : tensor<2x8xf32>
  }
}

// -----

// Must not recompose: dividing by the variance (no square root) is not a LayerNorm, and
// 0.6 * x * (1 + erf(...)) is not a GELU.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT:     graph.layer_norm
// CHECK-NOT:     graph.gelu
// CHECK:         graph.erf
builtin.module {
  func.func @near_misses(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
    %eps = graph.constant dense<1.0e-5> : tensor<f32>
    %m = graph.reduce %x {kind = "mean", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
    %d = graph.sub %x, %m : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %p = graph.mul %d, %d : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = graph.reduce %p {kind = "mean", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
    %a = graph.add %v, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    %y = graph.div %d, %a : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %sq = graph.constant dense<1.41421354> : tensor<f32>
    %one = graph.constant dense<1.0> : tensor<f32>
    %k = graph.constant dense<0.6> : tensor<f32>
    %q = graph.div %x, %sq : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %e = graph.erf %q : tensor<2x8xf32>
    %b = graph.add %e, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %c = graph.mul %x, %b : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %z = graph.mul %c, %k : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    func.return %y, %z : tensor<2x8xf32>, tensor<2x8xf32>
  }
}
