// RUN: cann-opt %s | cann-opt | filecheck %s

%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%w = "test.op"() : () -> tensor<3x4x3x3xf32>
%b = "test.op"() : () -> tensor<4xf32>
%0 = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.0, 1.5>} : tensor<1x3x4x5xf32> -> tensor<1x3x8x7xf32>
%1 = graph.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = array<f64: 0.66666666666666663, 0.6>} : tensor<1x3x4x5xf32> -> tensor<1x3x2x3xf32>
%2 = graph.conv_transpose %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x9xf32>
%3 = graph.conv_transpose %x, %w {strides = array<i64: 3, 2>, pads = array<i64: 0, 0, -1, -1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>) -> tensor<1x4x13x12xf32>

// CHECK:      %0 = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.000000e+00, 1.500000e+00>} : tensor<1x3x4x5xf32> -> tensor<1x3x8x7xf32>
// CHECK-NEXT: %1 = graph.resize %x {mode = "linear", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_floor", scales = array<f64: 0.66666666666666663, 6.000000e-01>} : tensor<1x3x4x5xf32> -> tensor<1x3x2x3xf32>
// CHECK-NEXT: %2 = graph.conv_transpose %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 1, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x9xf32>
// CHECK-NEXT: %3 = graph.conv_transpose %x, %w {strides = array<i64: 3, 2>, pads = array<i64: 0, 0, -1, -1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>) -> tensor<1x4x13x12xf32>
