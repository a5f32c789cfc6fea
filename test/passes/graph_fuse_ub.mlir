// RUN: cann-opt %s --split-input-file -p graph-fuse-ub | filecheck %s
// RUN: cann-opt %s --split-input-file -p 'graph-fuse-ub{cube_epilogue=false elementwise=false}' | filecheck %s --check-prefix=OFF
// RUN: cann-opt %s --split-input-file -p 'graph-fuse-ub{ub_bytes=16384}' | filecheck %s --check-prefix=SMALL

// A conv with its residual Add and Relu: one cube kernel with an epilogue.
// CHECK-LABEL: func.func @residual
// CHECK:         %[[F:.*]] = graph.fused "cube_epilogue" : tensor<1x16x4x4xf32> {
// CHECK-NEXT:      %[[C:.*]] = graph.conv2d
// CHECK-NEXT:      %[[A:.*]] = graph.add %[[C]], %x
// CHECK-NEXT:      %[[R:.*]] = graph.relu %[[A]]
// CHECK-NEXT:      graph.yield %[[R]] : tensor<1x16x4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[F]]
// OFF-LABEL:   func.func @residual
// OFF-NOT:       graph.fused
// The UB budget check (profitability) refuses groups whose buffers would not fit.
// SMALL-LABEL: func.func @residual
// SMALL-NOT:     graph.fused
builtin.module {
  func.func @residual(%x: tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32> {
    %w = graph.constant dense<0.1> : tensor<16x16x1x1xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
    %a = graph.add %c, %x : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
    %r = graph.relu %a : tensor<1x16x4x4xf32>
    func.return %r : tensor<1x16x4x4xf32>
  }
}

// -----

// An elementwise chain with a per-channel constant and swish (x * sigmoid(x)).
// CHECK-LABEL: func.func @chain
// CHECK:         graph.fused "elementwise" : tensor<1x16x4x4xf32> {
// CHECK-NEXT:      graph.mul
// CHECK-NEXT:      graph.sigmoid
// CHECK-NEXT:      graph.mul
// CHECK-NEXT:      graph.yield
builtin.module {
  func.func @chain(%x: tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32> {
    %k = graph.constant dense<2.0> : tensor<16x1x1xf32>
    %a = graph.mul %x, %k : (tensor<1x16x4x4xf32>, tensor<16x1x1xf32>) -> tensor<1x16x4x4xf32>
    %s = graph.sigmoid %a : tensor<1x16x4x4xf32>
    %b = graph.mul %a, %s : (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) -> tensor<1x16x4x4xf32>
    func.return %b : tensor<1x16x4x4xf32>
  }
}

// -----

// Must not fuse: the conv result is also an output of the function; fusing the Relu would have to
// compute the conv twice or write it anyway.
// CHECK-LABEL: func.func @two_users
// CHECK-NOT:     graph.fused
builtin.module {
  func.func @two_users(%x: tensor<1x16x4x4xf32>) -> (tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>) {
    %w = graph.constant dense<0.1> : tensor<16x16x1x1xf32>
    %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x16x4x4xf32>, tensor<16x16x1x1xf32>) -> tensor<1x16x4x4xf32>
    %r = graph.relu %c : tensor<1x16x4x4xf32>
    func.return %r, %c : tensor<1x16x4x4xf32>, tensor<1x16x4x4xf32>
  }
}

// -----

// A Softmax with its elementwise producers (scale, mask): one "reduction" group.
// CHECK-LABEL: func.func @softmax_prologue
// CHECK:         graph.fused "reduction" : tensor<4x32xf32> {
// CHECK-NEXT:      graph.mul
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.softmax
// CHECK-NEXT:      graph.yield
builtin.module {
  func.func @softmax_prologue(%s: tensor<4x32xf32>, %m: tensor<4x32xf32>) -> tensor<4x32xf32> {
    %k = graph.constant dense<0.125> : tensor<f32>
    %a = graph.mul %s, %k : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
    %b = graph.add %a, %m : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %y = graph.softmax %b {axis = 1 : i64} : tensor<4x32xf32>
    func.return %y : tensor<4x32xf32>
  }
}

// -----

// A MatMul by a constant on a 3-D input (a Dense layer on a sequence) takes its per-column bias
// and GELU as an epilogue.
// CHECK-LABEL: func.func @dense_gelu
// CHECK:         graph.fused "cube_epilogue" : tensor<1x4x16xf32> {
// CHECK-NEXT:      graph.matmul
// CHECK-NEXT:      graph.add
// CHECK-NEXT:      graph.gelu
// CHECK-NEXT:      graph.yield
builtin.module {
  func.func @dense_gelu(%x: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
    %w = graph.constant dense<0.1> : tensor<16x16xf32>
    %b = graph.constant dense<0.5> : tensor<16xf32>
    %m = graph.matmul %x, %w : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
    %a = graph.add %m, %b : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
    %g = graph.gelu %a {approximate = "none"} : tensor<1x4x16xf32>
    func.return %g : tensor<1x4x16xf32>
  }
}
