// RUN: cann-opt %s --split-input-file --verify-diagnostics | filecheck %s

%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%0 = graph.resize %x {mode = "cubic", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.0, 2.0>} : tensor<1x3x4x5xf32> -> tensor<1x3x8x10xf32>
// CHECK: 'graph.resize' mode must be one of nearest, linear, got 'cubic'

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%0 = graph.resize %x {mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", nearest_mode = "floor", scales = array<f64: 2.0, 2.0>} : tensor<1x3x4x5xf32> -> tensor<1x3x8x10xf32>
// CHECK: 'graph.resize' coordinate_transformation_mode must be one of half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, got 'tf_crop_and_resize'

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%0 = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.0>} : tensor<1x3x4x5xf32> -> tensor<1x3x8x10xf32>
// CHECK: 'graph.resize' expects 2 positive scales (H, W), got [2.0]

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%0 = graph.resize %x {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 2.0, 2.0>} : tensor<1x3x4x5xf32> -> tensor<1x6x8x10xf32>
// CHECK: 'graph.resize' result must be 1x3xHoxWo with Ho, Wo >= 1, got 1x6x8x10

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%w = "test.op"() : () -> tensor<3x4x3x3xf32>
%0 = graph.conv_transpose %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>) -> tensor<1x4x8x9xf32>
// CHECK: 'graph.conv_transpose' result shape 1x4x8x9 does not match expected 1x4x7x9

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%w = "test.op"() : () -> tensor<3x4x3x3xf32>
%0 = graph.conv_transpose %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 2 : i64} : (tensor<1x3x4x5xf32>, tensor<3x4x3x3xf32>) -> tensor<1x8x7x9xf32>
// CHECK: 'graph.conv_transpose' group 2 must divide input channels 3

// -----
%x = "test.op"() : () -> tensor<1x3x4x5xf32>
%w = "test.op"() : () -> tensor<2x4x3x3xf32>
%0 = graph.conv_transpose %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, group = 1 : i64} : (tensor<1x3x4x5xf32>, tensor<2x4x3x3xf32>) -> tensor<1x4x6x7xf32>
// CHECK: 'graph.conv_transpose' weight expects 2 input channels, input has 3
