// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

%x = "test.op"() : () -> tensor<2x3xf32>
%s = "test.op"() : () -> tensor<4xf32>
%0 = graph.max %x, %s : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
// CHECK: 'graph.max' operands are not broadcastable: tensor<2x3xf32> and tensor<4xf32>

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.gelu %x {approximate = "fast"} : tensor<2x3xf32>
// CHECK: 'graph.gelu' approximate must be one of none, tanh, got 'fast'

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.reduce %x {kind = "median", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK: 'graph.reduce' kind must be one of sum, mean, max, min, prod, l1, l2, sum_square, log_sum, log_sum_exp, got 'median'

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.reduce %x {kind = "sum", axes = array<i64: 1, 0>, keepdims = 1 : i64} : tensor<2x3xf32> -> tensor<1x1xf32>
// CHECK: 'graph.reduce' axes [1, 0] must be sorted, distinct and in [0, 2)

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.reduce %x {kind = "sum", axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x3xf32> -> tensor<2xf32>
// CHECK: 'graph.reduce' result shape 2 does not match expected 2x1

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.pad %x {pads = array<i64: 0, 1>, mode = "constant", value = 0.0 : f32} : tensor<2x3xf32> -> tensor<2x4xf32>
// CHECK: 'graph.pad' expects pads to have 4 elements, got 2

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.pad %x {pads = array<i64: 0, 0, 0, 1>, mode = "wrap", value = 0.0 : f32} : tensor<2x3xf32> -> tensor<2x4xf32>
// CHECK: 'graph.pad' mode must be one of constant, reflect, edge, got 'wrap'

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.pad %x {pads = array<i64: 0, 3, 0, 0>, mode = "reflect", value = 0.0 : f32} : tensor<2x3xf32> -> tensor<2x6xf32>
// CHECK: 'graph.pad' reflect pads must be smaller than the axis

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: 'graph.slice' steps must be non-zero

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%0 = graph.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 7>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x7xf32>
// CHECK: 'graph.slice' axis 1: start 0 / end 7 not clamped to the axis

// -----
%x = "test.op"() : () -> tensor<2x3xf32>
%g = "test.op"() : () -> tensor<2xf32>
%0 = graph.layer_norm %x, %g {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
// CHECK: 'graph.layer_norm' scale does not broadcast to the input shape 2x3

// -----
%x = "test.op"() : () -> tensor<3x2xf32>
%0 = graph.expand %x : tensor<3x2xf32> -> tensor<2x3x4xf32>
// CHECK: 'graph.expand' cannot broadcast tensor<3x2xf32> to tensor<2x3x4xf32>
